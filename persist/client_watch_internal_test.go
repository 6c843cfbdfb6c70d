package persist

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSeqSet checks the interval set against a map under random adds,
// removes, differences and intersections.
func TestSeqSet(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var a, b seqSet
		am, bm := map[uint64]bool{}, map[uint64]bool{}
		for q := uint64(1); q <= 300; q++ {
			if r.IntN(3) > 0 {
				a.add(q)
				am[q] = true
			}
			if r.IntN(2) > 0 {
				b.add(q)
				bm[q] = true
			}
		}
		for range 100 {
			q := uint64(r.IntN(320))
			if got := a.remove(q); got != am[q] {
				t.Fatalf("remove(%d) = %v, want %v", q, got, am[q])
			}
			delete(am, q)
		}
		if a.count() != uint64(len(am)) {
			t.Fatalf("count %d, want %d", a.count(), len(am))
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
		if got := a.minus(&b); !slices.Equal(got, wantMinus) {
			t.Fatalf("minus = %v, want %v", got, wantMinus)
		}
		and := a.intersect(&b)
		var got []uint64
		for _, iv := range and.iv {
			for q := iv.lo; q <= iv.hi; q++ {
				got = append(got, q)
			}
		}
		if !slices.Equal(got, wantAnd) || and.count() != uint64(len(wantAnd)) {
			t.Fatalf("intersect = %v (count %d), want %v", got, and.count(), wantAnd)
		}
		// copyAbove onto the members of b up to a cut gives b's lower part
		// plus a's upper part.
		cut := uint64(r.IntN(320))
		var low seqSet
		var wantCopy []uint64
		for q := uint64(1); q <= cut; q++ {
			if bm[q] {
				low.add(q)
				wantCopy = append(wantCopy, q)
			}
		}
		for q := cut + 1; q <= 320; q++ {
			if am[q] {
				wantCopy = append(wantCopy, q)
			}
		}
		a.copyAbove(&low, cut)
		got = got[:0]
		for _, iv := range low.iv {
			for q := iv.lo; q <= iv.hi; q++ {
				got = append(got, q)
			}
		}
		if !slices.Equal(got, wantCopy) || low.count() != uint64(len(wantCopy)) {
			t.Fatalf("copyAbove(%d) = %v (count %d), want %v", cut, got, low.count(), wantCopy)
		}
	}
}
