package seqset

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// check fails t unless s's intervals are sorted, disjoint, non-adjacent and
// counted right: the representation every method relies on.
func check(t *testing.T, s *Set) {
	t.Helper()
	var n uint64
	for i, r := range s.iv {
		if r.lo > r.hi {
			t.Fatalf("interval %d is %d..%d", i, r.lo, r.hi)
		}
		if i > 0 && s.iv[i-1].hi+1 >= r.lo {
			t.Fatalf("intervals %d..%d and %d..%d touch or overlap", s.iv[i-1].lo, s.iv[i-1].hi, r.lo, r.hi)
		}
		n += r.hi - r.lo + 1
	}
	if n != s.n {
		t.Fatalf("count %d, intervals hold %d", s.n, n)
	}
}

func of(qs ...uint64) *Set {
	var s Set
	for _, q := range qs {
		s.Insert(q)
	}
	return &s
}

func TestAppend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		add    []uint64
		spans  int
		min    uint64
		hasMin bool
	}{
		{name: "empty"},
		{name: "one", add: []uint64{7}, spans: 1, min: 7, hasMin: true},
		{name: "run", add: []uint64{1, 2, 3, 4}, spans: 1, min: 1, hasMin: true},
		{name: "gaps", add: []uint64{1, 3, 5}, spans: 3, min: 1, hasMin: true},
		{name: "runs", add: []uint64{2, 3, 10, 11, 12, 20}, spans: 3, min: 2, hasMin: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Set
			for _, q := range tc.add {
				s.Append(q)
			}
			check(t, &s)
			if len(s.iv) != tc.spans {
				t.Fatalf("%d intervals, want %d", len(s.iv), tc.spans)
			}
			if got := s.Members(); !slices.Equal(got, append([]uint64{}, tc.add...)) {
				t.Fatalf("members %v, want %v", got, tc.add)
			}
			if s.Count() != uint64(len(tc.add)) {
				t.Fatalf("count %d, want %d", s.Count(), len(tc.add))
			}
			if m, ok := s.Min(); m != tc.min || ok != tc.hasMin {
				t.Fatalf("min %d, %v; want %d, %v", m, ok, tc.min, tc.hasMin)
			}
		})
	}
}

func TestInsertRemove(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		set     *Set
		insert  uint64
		remove  uint64
		removed bool
		want    []uint64
	}{
		{name: "insert joins two runs", set: of(1, 2, 4, 5), insert: 3, remove: 9, want: []uint64{1, 2, 3, 4, 5}},
		{name: "insert extends a run up", set: of(1, 2), insert: 3, remove: 9, want: []uint64{1, 2, 3}},
		{name: "insert extends a run down", set: of(5, 6), insert: 4, remove: 9, want: []uint64{4, 5, 6}},
		{name: "insert alone", set: of(1, 9), insert: 5, remove: 0, want: []uint64{1, 5, 9}},
		{name: "insert a member", set: of(1, 2, 3), insert: 2, remove: 0, want: []uint64{1, 2, 3}},
		{name: "remove splits a run", set: of(1, 2, 3), insert: 2, remove: 2, removed: true, want: []uint64{1, 3}},
		{name: "remove the low end", set: of(1, 2, 3), insert: 1, remove: 1, removed: true, want: []uint64{2, 3}},
		{name: "remove the high end", set: of(1, 2, 3), insert: 1, remove: 3, removed: true, want: []uint64{1, 2}},
		{name: "remove a single", set: of(1, 5, 9), insert: 1, remove: 5, removed: true, want: []uint64{1, 9}},
		{name: "remove the first single", set: of(1, 5), insert: 5, remove: 1, removed: true, want: []uint64{5}},
		{name: "remove a gap", set: of(1, 3), insert: 1, remove: 2, want: []uint64{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.set.Insert(tc.insert)
			check(t, tc.set)
			if got := tc.set.Remove(tc.remove); got != tc.removed {
				t.Fatalf("remove(%d) = %v, want %v", tc.remove, got, tc.removed)
			}
			check(t, tc.set)
			if got := tc.set.Members(); !slices.Equal(got, tc.want) {
				t.Fatalf("members %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCutFrom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		set       *Set
		lo        uint64
		cut, left []uint64
	}{
		{name: "empty", set: of(), lo: 1, left: []uint64{}},
		{name: "above all", set: of(1, 2), lo: 3, left: []uint64{1, 2}},
		{name: "all", set: of(1, 2, 5), lo: 1, cut: []uint64{1, 2, 5}, left: []uint64{}},
		{name: "inside a run", set: of(1, 2, 3, 4, 8), lo: 3, cut: []uint64{3, 4, 8}, left: []uint64{1, 2}},
		{name: "in a gap", set: of(1, 2, 6, 7), lo: 4, cut: []uint64{6, 7}, left: []uint64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.set.CutFrom(tc.lo); !slices.Equal(got, tc.cut) {
				t.Fatalf("cut %v, want %v", got, tc.cut)
			}
			check(t, tc.set)
			if got := tc.set.Members(); !slices.Equal(got, tc.left) {
				t.Fatalf("left %v, want %v", got, tc.left)
			}
		})
	}
}

func TestMinusIntersect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		a, b        *Set
		minus, both []uint64
	}{
		{name: "empty", a: of(), b: of(1), both: []uint64{}},
		{name: "disjoint", a: of(1, 2), b: of(3, 4), minus: []uint64{1, 2}, both: []uint64{}},
		{name: "same", a: of(1, 2, 3), b: of(1, 2, 3), both: []uint64{1, 2, 3}},
		{name: "holes", a: of(1, 2, 3, 4, 5), b: of(2, 4), minus: []uint64{1, 3, 5}, both: []uint64{2, 4}},
		{name: "overlapping runs", a: of(1, 2, 3, 7, 8), b: of(3, 4, 5, 6, 7), minus: []uint64{1, 2, 8}, both: []uint64{3, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Minus(tc.b); !slices.Equal(got, tc.minus) {
				t.Fatalf("minus %v, want %v", got, tc.minus)
			}
			both := tc.a.Intersect(tc.b)
			check(t, &both)
			if got := both.Members(); !slices.Equal(got, tc.both) {
				t.Fatalf("intersect %v, want %v", got, tc.both)
			}
		})
	}
}

// TestAgainstMap checks the set against a map under random adds, removes,
// differences and intersections.
func TestAgainstMap(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var a, b Set
		am, bm := map[uint64]bool{}, map[uint64]bool{}
		for q := uint64(1); q <= 300; q++ {
			if r.IntN(3) > 0 {
				a.Append(q)
				am[q] = true
			}
			if r.IntN(2) > 0 {
				b.Append(q)
				bm[q] = true
			}
		}
		for range 100 {
			q := uint64(r.IntN(320))
			if got := a.Remove(q); got != am[q] {
				t.Fatalf("remove(%d) = %v, want %v", q, got, am[q])
			}
			delete(am, q)
		}
		check(t, &a)
		if a.Count() != uint64(len(am)) {
			t.Fatalf("count %d, want %d", a.Count(), len(am))
		}
		var wantMinus, wantAnd []uint64
		for q := uint64(0); q <= 320; q++ {
			if am[q] && !bm[q] {
				wantMinus = append(wantMinus, q)
			}
			if am[q] && bm[q] {
				wantAnd = append(wantAnd, q)
			}
		}
		if got := a.Minus(&b); !slices.Equal(got, wantMinus) {
			t.Fatalf("minus = %v, want %v", got, wantMinus)
		}
		and := a.Intersect(&b)
		check(t, &and)
		if got := and.Members(); !slices.Equal(got, append([]uint64{}, wantAnd...)) || and.Count() != uint64(len(wantAnd)) {
			t.Fatalf("intersect = %v (count %d), want %v", got, and.Count(), wantAnd)
		}
		// CopyAbove onto the members of b up to a cut gives b's lower part
		// plus a's upper part.
		cut := uint64(r.IntN(320))
		var low Set
		wantCopy := []uint64{}
		for q := uint64(1); q <= cut; q++ {
			if bm[q] {
				low.Append(q)
				wantCopy = append(wantCopy, q)
			}
		}
		for q := cut + 1; q <= 320; q++ {
			if am[q] {
				wantCopy = append(wantCopy, q)
			}
		}
		a.CopyAbove(&low, cut)
		check(t, &low)
		if got := low.Members(); !slices.Equal(got, wantCopy) || low.Count() != uint64(len(wantCopy)) {
			t.Fatalf("CopyAbove(%d) = %v (count %d), want %v", cut, got, low.Count(), wantCopy)
		}
	}
}

// FuzzOps runs a byte string as a program of inserts, removes and cuts on
// a Set and on a map, and compares them after every step.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 5, 0, 6, 0, 4, 1, 5, 2, 3})
	f.Add([]byte{0, 1, 0, 3, 0, 2, 1, 2, 1, 1, 1, 3})
	f.Fuzz(func(t *testing.T, prog []byte) {
		var s Set
		m := map[uint64]bool{}
		for i := 0; i+1 < len(prog); i += 2 {
			q := uint64(prog[i+1] % 64)
			switch prog[i] % 3 {
			case 0:
				s.Insert(q)
				m[q] = true
			case 1:
				if got := s.Remove(q); got != m[q] {
					t.Fatalf("step %d: remove(%d) = %v, want %v", i/2, q, got, m[q])
				}
				delete(m, q)
			case 2:
				var want []uint64
				for p := q; p < 64; p++ {
					if m[p] {
						want = append(want, p)
						delete(m, p)
					}
				}
				if got := s.CutFrom(q); !slices.Equal(got, want) {
					t.Fatalf("step %d: CutFrom(%d) = %v, want %v", i/2, q, got, want)
				}
			}
			check(t, &s)
			want := []uint64{}
			for p := uint64(0); p < 64; p++ {
				if m[p] {
					want = append(want, p)
				}
			}
			if got := s.Members(); !slices.Equal(got, want) {
				t.Fatalf("step %d: members %v, want %v", i/2, got, want)
			}
			if m, ok := s.Min(); ok != (len(want) > 0) || (ok && m != want[0]) {
				t.Fatalf("step %d: min %d, %v; members %v", i/2, m, ok, want)
			}
		}
	})
}
