// Package placement maps a scope to the server that owns it. Placement is a
// pure function of (member ids, scope): every client and server computes the
// same owner without coordination and without memory per scope.
package placement

import (
	"fmt"
	"reflect"
	"unicode/utf16"
)

// Func picks the owner of scope among ids. ids must not be empty; callers
// pass the same list in the same order everywhere.
type Func func(ids []string, scope string) string

// Names of the placement functions, as used by flags and configuration.
const (
	NameRendezvous = "rendezvous"
	NameModulo     = "modulo"
)

// ByName returns the placement function called name ("" means rendezvous).
func ByName(name string) (Func, error) {
	switch name {
	case "", NameRendezvous:
		return Rendezvous, nil
	case NameModulo:
		return Modulo, nil
	}
	return nil, fmt.Errorf("unknown placement %q (want %s or %s)", name, NameRendezvous, NameModulo)
}

// NameOf is the name of f when it is one of the named placement functions
// (ByName's), else "": a balancer tells its clients the rule only when they
// can compute it too.
func NameOf(f Func) string {
	if f == nil {
		return ""
	}
	switch reflect.ValueOf(f).Pointer() {
	case reflect.ValueOf(Rendezvous).Pointer():
		return NameRendezvous
	case reflect.ValueOf(Modulo).Pointer():
		return NameModulo
	}
	return ""
}

// JavaHash is the Java-style 32-bit string hash the modulo rule uses:
// h = h*31 + c over the UTF-16 code units of s, wrapping to int32; 0 for "".
func JavaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r < 0x10000 {
			h = h*31 + int32(r)
			continue
		}
		// Characters outside the BMP count as their two surrogate code units,
		// exactly as a UTF-16 string would present them.
		hi, lo := utf16.EncodeRune(r)
		h = h*31 + int32(hi)
		h = h*31 + int32(lo)
	}
	return h
}

// Modulo is the compatibility rule: ids[|JavaHash(scope)| mod len(ids)], with
// the absolute value taken in 64 bits (so math.MinInt32 stays positive).
// Adding or removing a member remaps almost every scope.
func Modulo(ids []string, scope string) string {
	h := int64(JavaHash(scope))
	if h < 0 {
		h = -h
	}
	return ids[h%int64(len(ids))]
}

// Rendezvous is highest-random-weight hashing, the default: each (id, scope)
// pair gets a pseudo-random weight and the highest wins, so adding or
// removing one of n members moves only about 1/n of the scopes.
func Rendezvous(ids []string, scope string) string {
	sh := fnv64(offset64, scope)
	best, bestW := 0, uint64(0)
	for i, id := range ids {
		w := mix64(fnv64(sh^0x9e3779b97f4a7c15, id))
		if i == 0 || w > bestW || (w == bestW && id < ids[best]) {
			best, bestW = i, w
		}
	}
	return ids[best]
}

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// fnv64 continues an FNV-1a hash from h over s.
func fnv64(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime64
	}
	return h
}

// mix64 is the splitmix64 finaliser: FNV alone is weak in its high bits for
// short inputs, and rendezvous compares whole weights.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
