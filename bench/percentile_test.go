package bench

import (
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
