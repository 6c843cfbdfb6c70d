// Package seqset is a set of stream seqs kept as sorted, disjoint,
// non-adjacent closed intervals: a log with few deletions costs a few
// intervals whatever its length. A watcher keeps the seqs it delivered in
// one.
package seqset

import (
	"slices"
	"sort"
)

// Set is a set of seqs. The zero value is empty and ready to use. A Set is
// not safe for concurrent use.
type Set struct {
	iv []span
	n  uint64
}

// span is the closed interval lo..hi, lo <= hi.
type span struct{ lo, hi uint64 }

// Count is the number of members.
func (s *Set) Count() uint64 { return s.n }

// Min is the lowest member; false when the set is empty.
func (s *Set) Min() (uint64, bool) {
	if len(s.iv) == 0 {
		return 0, false
	}
	return s.iv[0].lo, true
}

// Append adds q, which must be greater than every member: the cheap add of
// a seq delivered in order.
func (s *Set) Append(q uint64) {
	if k := len(s.iv); k > 0 && s.iv[k-1].hi+1 == q {
		s.iv[k-1].hi = q
	} else {
		s.iv = append(s.iv, span{q, q})
	}
	s.n++
}

// CopyAbove adds the members of s above q to dst, whose members must all be
// at most q.
func (s *Set) CopyAbove(dst *Set, q uint64) {
	for _, r := range s.iv {
		if r.hi <= q {
			continue
		}
		lo := max(r.lo, q+1)
		if k := len(dst.iv); k > 0 && dst.iv[k-1].hi+1 == lo {
			dst.iv[k-1].hi = r.hi
		} else {
			dst.iv = append(dst.iv, span{lo, r.hi})
		}
		dst.n += r.hi - lo + 1
	}
}

// find returns the index of the interval holding q, or -1.
func (s *Set) find(q uint64) int {
	lo, hi := 0, len(s.iv)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case s.iv[m].hi < q:
			lo = m + 1
		case s.iv[m].lo > q:
			hi = m
		default:
			return m
		}
	}
	return -1
}

// Has reports whether q is a member.
func (s *Set) Has(q uint64) bool { return s.find(q) >= 0 }

// Insert adds q wherever it falls; a member already there is left alone.
func (s *Set) Insert(q uint64) {
	if s.Has(q) {
		return
	}
	i := sort.Search(len(s.iv), func(i int) bool { return s.iv[i].lo > q })
	joinPrev := i > 0 && s.iv[i-1].hi+1 == q
	joinNext := i < len(s.iv) && s.iv[i].lo == q+1
	switch {
	case joinPrev && joinNext:
		s.iv[i-1].hi = s.iv[i].hi
		s.iv = slices.Delete(s.iv, i, i+1)
	case joinPrev:
		s.iv[i-1].hi = q
	case joinNext:
		s.iv[i].lo = q
	default:
		s.iv = slices.Insert(s.iv, i, span{q, q})
	}
	s.n++
}

// CutFrom removes the members >= lo and returns them, ascending.
func (s *Set) CutFrom(lo uint64) []uint64 {
	var out []uint64
	k := sort.Search(len(s.iv), func(i int) bool { return s.iv[i].hi >= lo })
	for i := k; i < len(s.iv); i++ {
		r := s.iv[i]
		for q := max(r.lo, lo); q <= r.hi; q++ {
			out = append(out, q)
		}
	}
	s.n -= uint64(len(out))
	if k < len(s.iv) && s.iv[k].lo < lo {
		s.iv[k].hi = lo - 1
		k++
	}
	s.iv = s.iv[:k]
	return out
}

// Remove deletes q and reports whether it was a member.
func (s *Set) Remove(q uint64) bool {
	i := s.find(q)
	if i < 0 {
		return false
	}
	s.n--
	r := s.iv[i]
	switch {
	case r.lo == r.hi:
		if i == 0 {
			s.iv = s.iv[1:] // trimming from the front (limits, expiry) stays O(1)
		} else {
			s.iv = append(s.iv[:i], s.iv[i+1:]...)
		}
	case q == r.lo:
		s.iv[i].lo++
	case q == r.hi:
		s.iv[i].hi--
	default:
		s.iv = append(s.iv, span{})
		copy(s.iv[i+2:], s.iv[i+1:])
		s.iv[i] = span{r.lo, q - 1}
		s.iv[i+1] = span{q + 1, r.hi}
	}
	return true
}

// Minus lists the members of s that are not in o, ascending.
func (s *Set) Minus(o *Set) []uint64 {
	var out []uint64
	j := 0
	for _, r := range s.iv {
		for q := r.lo; q <= r.hi; q++ {
			for j < len(o.iv) && o.iv[j].hi < q {
				j++
			}
			if j < len(o.iv) && o.iv[j].lo <= q {
				// Skip the whole overlap at once.
				q = min(o.iv[j].hi, r.hi)
				continue
			}
			out = append(out, q)
		}
	}
	return out
}

// Intersect returns the members of both s and o.
func (s *Set) Intersect(o *Set) Set {
	var out Set
	i, j := 0, 0
	for i < len(s.iv) && j < len(o.iv) {
		lo, hi := max(s.iv[i].lo, o.iv[j].lo), min(s.iv[i].hi, o.iv[j].hi)
		if lo <= hi {
			out.iv = append(out.iv, span{lo, hi})
			out.n += hi - lo + 1
		}
		if s.iv[i].hi < o.iv[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// Members lists the members, ascending.
func (s *Set) Members() []uint64 {
	out := make([]uint64, 0, s.n)
	for _, r := range s.iv {
		for q := r.lo; q <= r.hi; q++ {
			out = append(out, q)
		}
	}
	return out
}
