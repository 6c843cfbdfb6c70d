package progress

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The package promises no goroutine of its own; goleak holds it to that.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// reporter returns a Reporter on a buffer with a fake clock.
func reporter(t *testing.T, total int64, opts Options) (*Reporter, *bytes.Buffer, *FakeClock) {
	t.Helper()
	var buf bytes.Buffer
	clk := NewFakeClock(t0)
	opts.Clock = clk
	return New(&buf, total, "items", opts), &buf, clk
}

// take returns what was written since the last take and empties buf.
func take(buf *bytes.Buffer) string {
	s := buf.String()
	buf.Reset()
	return s
}

func TestPlainLinesETAAndSlidingWindow(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 10000, Options{Label: "import", Mode: Plain})
	steps := []struct {
		after time.Duration
		set   int64
		want  string
	}{
		// Not due yet (every 5s): nothing.
		{time.Second, 1000, ""},
		{4 * time.Second, 4500, "import: 4500/10000 (45%) 900 items/s ETA 6s\n"},
		{time.Second, 4600, ""},
		{4 * time.Second, 5000, "import: 5000/10000 (50%) 500 items/s ETA 10s\n"},
		// The window (10s) now starts at 5s: 1000 in 10s, not 5500 in 15s.
		{5 * time.Second, 5500, "import: 5500/10000 (55%) 100 items/s ETA 45s\n"},
	}
	for i, s := range steps {
		clk.Advance(s.after)
		r.Set(s.set)
		if got := take(buf); got != s.want {
			t.Fatalf("step %d: wrote %q, want %q", i, got, s.want)
		}
	}
	clk.Advance(2 * time.Second)
	r.Add(4500)
	take(buf)
	r.Done()
	if got, want := take(buf), "import: 10000/10000 (100%) in 17s, 588 items/s\n"; got != want {
		t.Fatalf("Done wrote %q, want %q", got, want)
	}
}

func TestPlainEveryIsConfigurable(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 100, Options{Mode: Plain, Every: time.Second})
	clk.Advance(time.Second)
	r.Add(10)
	if got, want := take(buf), "10/100 (10%) 10 items/s ETA 9s\n"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
}

func TestTerminalBarRedrawnAndCleared(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 10000, Options{Label: "import", Mode: Terminal})
	clk.Advance(100 * time.Millisecond)
	r.Set(100)
	if got := take(buf); got != "" {
		t.Fatalf("drew %q before the redraw interval", got)
	}
	clk.Advance(900 * time.Millisecond)
	r.Set(4500)
	first := "import [=========>          ] 45% 4.5k items/s ETA 1s"
	if got := take(buf); got != "\r"+first {
		t.Fatalf("drew %q, want %q", got, "\r"+first)
	}
	clk.Advance(time.Second)
	r.Set(10000)
	second := "import [====================] 100% 5.0k items/s ETA 0s"
	if got := take(buf); got != "\r"+second {
		t.Fatalf("drew %q, want %q", got, "\r"+second)
	}
	r.Done()
	got := take(buf)
	wantClear := "\r" + strings.Repeat(" ", len(second)) + "\r"
	if !strings.HasPrefix(got, wantClear) {
		t.Fatalf("Done wrote %q: does not clear the bar first", got)
	}
	if final := strings.TrimPrefix(got, wantClear); final != "import: 10000/10000 (100%) in 2s, 5000 items/s\n" {
		t.Fatalf("Done's final line %q", final)
	}
	if strings.Contains(got, "[") {
		t.Fatalf("final line keeps the bar: %q", got)
	}
}

func TestTerminalShorterLinePadsTheOld(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 0, Options{Mode: Terminal})
	clk.Advance(time.Second)
	r.Set(123456)
	long := take(buf)
	clk.Advance(10 * time.Second)
	r.Set(123457)
	short := take(buf)
	if len(short) < len(long) {
		t.Fatalf("redraw %q is shorter than %q: leaves old characters on screen", short, long)
	}
}

func TestUnknownTotal(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		r, buf, clk := reporter(t, 0, Options{Label: "scan", Mode: Plain})
		clk.Advance(5 * time.Second)
		r.Add(1500)
		if got, want := take(buf), "scan: 1500 items, 300 items/s\n"; got != want {
			t.Fatalf("wrote %q, want %q", got, want)
		}
		r.Done()
		if got, want := take(buf), "scan: 1500 items in 5s, 300 items/s\n"; got != want {
			t.Fatalf("Done wrote %q, want %q", got, want)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		t.Parallel()
		r, buf, clk := reporter(t, 0, Options{Label: "scan", Mode: Terminal})
		clk.Advance(time.Second)
		r.Add(1500)
		got := take(buf)
		if want := "\rscan 1.5k items, 1.5k items/s"; got != want {
			t.Fatalf("drew %q, want %q", got, want)
		}
		if strings.Contains(got, "ETA") || strings.Contains(got, "[") {
			t.Fatalf("unknown total drew a bar or ETA: %q", got)
		}
	})
}

func TestDoneIsFinalAndIdempotent(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 10, Options{Mode: Plain})
	r.Add(3)
	r.Done()
	if got, want := take(buf), "3/10 (30%) in 0s, 0 items/s\n"; got != want {
		t.Fatalf("Done wrote %q, want %q", got, want)
	}
	clk.Advance(time.Minute)
	r.Add(1)
	r.Done()
	if got := take(buf); got != "" {
		t.Fatalf("wrote %q after Done", got)
	}
}

func TestOffDrawsNothing(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 10, Options{Mode: Off})
	clk.Advance(time.Minute)
	r.Add(5)
	r.Done()
	if buf.Len() != 0 {
		t.Fatalf("Off wrote %q", buf.String())
	}
}

func TestConcurrentAdds(t *testing.T) {
	t.Parallel()
	r, buf, clk := reporter(t, 0, Options{Mode: Plain, Every: time.Nanosecond})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				clk.Advance(time.Millisecond)
				r.Add(1)
			}
		}()
	}
	wg.Wait()
	take(buf)
	r.Done()
	if got := take(buf); !strings.HasPrefix(got, "8000 items in ") {
		t.Fatalf("final line %q, want 8000 counted", got)
	}
}

func TestAutoModeOnANonTerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if IsTerminal(&buf) {
		t.Fatal("a buffer is a terminal")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if IsTerminal(pw) {
		t.Fatal("a pipe is a terminal")
	}
	clk := NewFakeClock(t0)
	r := New(&buf, 10, "items", Options{Clock: clk})
	clk.Advance(EveryDefault)
	r.Add(5)
	if got := buf.String(); strings.Contains(got, "\r") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("Auto on a buffer drew %q, want a plain line", got)
	}
}

func TestHuman(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999: "999", 1200: "1.2k", 3_400_000: "3.4M", 2e9: "2.0G"} {
		if got := Human(v); got != want {
			t.Errorf("Human(%v) = %q, want %q", v, got, want)
		}
	}
}
