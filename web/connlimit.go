package web

import "sync"

// ConnLimit bounds the connections each principal holds open at once, by
// Principal.Name (a user counts its password's and its API keys' together).
// The anonymous principal of Open is not bounded: on an open bus every
// request is it, so its bound would be the whole server's. The zero value
// bounds nothing; it is safe for concurrent use.
type ConnLimit struct {
	max int // 0 or less: no bound

	mu    sync.Mutex
	users map[string]int // open connections by name; a name leaves at zero
}

// NewConnLimit bounds each principal at max connections; max <= 0 means
// no bound.
func NewConnLimit(max int) *ConnLimit {
	return &ConnLimit{max: max, users: map[string]int{}}
}

// Max is the bound, 0 or less for none.
func (l *ConnLimit) Max() int { return l.max }

func (l *ConnLimit) bounded(who Principal) bool { return l.max > 0 && !who.Anonymous }

// Admit takes one of who's connections, unless they are all taken. Every
// Admit that returns true is paired with a Leave when the connection ends,
// however it ends.
func (l *ConnLimit) Admit(who Principal) bool {
	if !l.bounded(who) {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users[who.Name] >= l.max {
		return false
	}
	l.users[who.Name]++
	return true
}

// Leave gives back the connection Admit took.
func (l *ConnLimit) Leave(who Principal) {
	if !l.bounded(who) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users[who.Name]--; l.users[who.Name] <= 0 {
		delete(l.users, who.Name)
	}
}

// Open is how many connections name holds now (bounded principals only).
func (l *ConnLimit) Open(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.users[name]
}
