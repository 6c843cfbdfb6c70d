package progress

import (
	"strings"
	"testing"
	"time"
)

// TestPercentIsExact: the percentage is floor(100*n/total) in every form:
// it divided first, and 29/100 (0.28999… as a float) read 28%.
func TestPercentIsExact(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 100, Options{Mode: Plain})
	clk.Advance(EveryDefault)
	r.Set(29)
	if got := take(buf); !strings.HasPrefix(got, "29/100 (29%)") {
		t.Errorf("plain line %q, want it to start 29/100 (29%%)", got)
	}
	r.Set(57)
	r.Done()
	if got := take(buf); !strings.HasPrefix(got, "57/100 (57%)") {
		t.Errorf("final line %q, want it to start 57/100 (57%%)", got)
	}

	tr, tbuf, tclk := reporter(t, 100, Options{Mode: Terminal})
	tclk.Advance(time.Second)
	tr.Set(58)
	if got := take(tbuf); !strings.Contains(got, "] 58% ") {
		t.Errorf("bar %q, want 58%%", got)
	}
}

// TestHumanSuffixOfTheRoundedValue: the suffix is the printed value's;
// it was the unrounded one's, and 999,960 read "1000.0k".
func TestHumanSuffixOfTheRoundedValue(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{999_960: "1.0M", 999_960_000: "1.0G", 999.7: "1.0k"} {
		if got := Human(v); got != want {
			t.Errorf("Human(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestNegativeCountDrawsAnEmptyBar: a count below zero draws an empty bar
// (strings.Repeat panicked on the negative width).
func TestNegativeCountDrawsAnEmptyBar(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 100, Options{Mode: Terminal})
	clk.Advance(time.Second)
	r.Set(-50)
	if got := take(buf); !strings.Contains(got, "[>") {
		t.Errorf("bar %q, want an empty one", got)
	}
}
