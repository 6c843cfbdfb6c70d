package bench

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestPercentileNearestRank: p50 and p99 are nearest-rank quantiles, the
// same in every bench. pct took one rank too many when n*p was whole (p99
// of 100 samples was the largest), percentile rounded (p99 of 170 was the
// 168th) and panicked on no samples.
func TestPercentileNearestRank(t *testing.T) {
	t.Parallel()
	samples := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(n - i) // reversed: percentile sorts
		}
		return s
	}
	for _, c := range []struct {
		n    int
		q    float64
		want time.Duration
	}{
		{100, 0.99, 99}, {1000, 0.99, 990}, {170, 0.99, 169}, {4, 0.50, 2}, {5, 0.50, 3}, {1, 0.99, 1},
	} {
		if got := percentile(samples(c.n), c.q); got != c.want {
			t.Errorf("percentile of 1..%d at %v = %d, want %d", c.n, c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

// TestSearchPercentileNearestRank: bench index's search p50 and p99 are
// nearest-rank quantiles like every other bench's (pct). With two queries
// the nearest-rank p50 is the faster of the two and the p99 the slower, so
// over a few runs they differ. (Was: lat[len/2] and lat[len*99/100], both
// the slower one, so its p50 always equalled its p99, and at 100 queries
// its p99 was the largest sample.)
func TestSearchPercentileNearestRank(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	differ := false
	for i := range 5 {
		r, err := searchOnce(t.Context(), filepath.Join(dir, "s"+strconv.Itoa(i)+".db"), 20, 2)
		if err != nil {
			t.Fatal(err)
		}
		if r.P50 > r.P99 {
			t.Fatalf("run %d: p50 %v above p99 %v", i, r.P50, r.P99)
		}
		if r.P50 != r.P99 {
			differ = true
		}
	}
	if !differ {
		t.Fatal("p50 equalled p99 in every run of 2 queries: the p50 is the slower query (lat[len/2]), not the nearest-rank median (the faster)")
	}
}
