// Package progress reports how far a long piece of CLI work is: a single
// redrawn line on a terminal, plain periodic lines otherwise (a log file, a
// pipe, a test capturing stderr).
//
// A Reporter has no goroutine: Add and Set count with atomics and draw only
// when a redraw is due, so a stalled job draws nothing until it moves again
// or Done is called. Callers in hot loops pay one atomic add and one clock
// read per call.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mode says how a Reporter draws.
type Mode int

const (
	// Auto draws a bar when the writer is a terminal, plain lines otherwise.
	Auto Mode = iota
	// Plain writes a line every Options.Every and a final one at Done.
	Plain
	// Terminal redraws one line in place (carriage return), cleared at Done.
	Terminal
	// Off draws nothing (a --quiet flag).
	Off
)

// Defaults of Options.
const (
	EveryDefault  = 5 * time.Second        // plain lines
	RedrawDefault = 200 * time.Millisecond // terminal redraws
	WindowDefault = 10 * time.Second       // the rate's sliding window
)

// Options are a Reporter's settings; the zero value is usable.
type Options struct {
	// Label starts every line. Empty means none.
	Label string
	// Mode: zero means Auto.
	Mode Mode
	// Every is the interval between plain lines. Zero means EveryDefault.
	Every time.Duration
	// Redraw is the least interval between terminal redraws. Zero means
	// RedrawDefault.
	Redraw time.Duration
	// Window is how far back the rate looks. Zero means WindowDefault.
	Window time.Duration
	// Clock: nil means the system clock.
	Clock Clock
}

func (o Options) withDefaults() Options {
	if o.Every <= 0 {
		o.Every = EveryDefault
	}
	if o.Redraw <= 0 {
		o.Redraw = RedrawDefault
	}
	if o.Window <= 0 {
		o.Window = WindowDefault
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	return o
}

// Reporter draws the progress of one job. Add and Set are safe for
// concurrent use; Done ends it and later calls draw nothing.
type Reporter struct {
	w     io.Writer
	total int64 // zero: unknown
	unit  string
	opts  Options
	mode  Mode // resolved: Plain, Terminal or Off
	every time.Duration

	count  atomic.Int64
	due    atomic.Int64 // unix nanos of the next draw
	closed atomic.Bool

	mu      sync.Mutex // protects what follows and serialises writes to w
	start   time.Time
	samples []sample // the rate window, oldest first
	width   int      // of the last terminal line, to clear it
}

// sample is the count at one moment, for the sliding-window rate.
type sample struct {
	at time.Time
	n  int64
}

// New starts reporting a job of total units (zero: unknown) on w. unit
// names them in the rate ("items", "ops").
func New(w io.Writer, total int64, unit string, opts Options) *Reporter {
	opts = opts.withDefaults()
	r := &Reporter{w: w, total: max(total, 0), unit: unit, opts: opts, mode: opts.Mode}
	if r.mode == Auto {
		r.mode = Plain
		if IsTerminal(w) {
			r.mode = Terminal
		}
	}
	r.every = opts.Every
	if r.mode == Terminal {
		r.every = opts.Redraw
	}
	r.start = opts.Clock.Now()
	r.samples = []sample{{r.start, 0}}
	r.due.Store(r.start.Add(r.every).UnixNano())
	return r
}

// Add counts n more units done.
func (r *Reporter) Add(n int64) {
	r.count.Add(n)
	r.maybeDraw()
}

// Set says n units are done in all.
func (r *Reporter) Set(n int64) {
	r.count.Store(n)
	r.maybeDraw()
}

// Done draws the final line (clearing a terminal's bar first). It is
// idempotent.
func (r *Reporter) Done() {
	if r.mode == Off || r.closed.Swap(true) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Clock.Now()
	if r.mode == Terminal && r.width > 0 {
		fmt.Fprintf(r.w, "\r%s\r", strings.Repeat(" ", r.width))
	}
	fmt.Fprintln(r.w, r.finalLine(now))
}

// maybeDraw draws when a redraw is due; only the caller that wins the
// compare-and-swap draws, so concurrent adders do not queue on the lock.
func (r *Reporter) maybeDraw() {
	if r.mode == Off || r.closed.Load() {
		return
	}
	now := r.opts.Clock.Now()
	due := r.due.Load()
	if now.UnixNano() < due || !r.due.CompareAndSwap(due, now.Add(r.every).UnixNano()) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return
	}
	n := r.count.Load()
	r.record(now, n)
	if r.mode == Terminal {
		line := r.barLine(n)
		pad := max(r.width-len(line), 0)
		fmt.Fprintf(r.w, "\r%s%s", line, strings.Repeat(" ", pad))
		r.width = len(line)
		return
	}
	fmt.Fprintln(r.w, r.plainLine(n))
}

// record adds a sample and drops those older than the window, keeping one
// at or before its start so the rate spans the whole window.
func (r *Reporter) record(now time.Time, n int64) {
	r.samples = append(r.samples, sample{now, n})
	cut := now.Add(-r.opts.Window)
	i := 0
	for i+1 < len(r.samples) && !r.samples[i+1].at.After(cut) {
		i++
	}
	r.samples = r.samples[i:]
}

// rate is units per second over the window; the newest sample is now's.
func (r *Reporter) rate() float64 {
	oldest, newest := r.samples[0], r.samples[len(r.samples)-1]
	secs := newest.at.Sub(oldest.at).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(newest.n-oldest.n) / secs
}
