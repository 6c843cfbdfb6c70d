package progress

import (
	"fmt"
	"strings"
	"time"
)

// barWidth is the number of cells between the brackets of the bar.
const barWidth = 20

// barLine is the terminal line: label [=====>    ] 45% 1.2k items/s ETA 12s.
func (r *Reporter) barLine(n int64) string {
	rate := r.rate()
	var b strings.Builder
	r.label(&b, " ")
	if r.total > 0 {
		frac := max(min(float64(n)/float64(r.total), 1), 0) // a negative count draws an empty bar
		filled := int(frac * barWidth)
		b.WriteByte('[')
		switch {
		case filled >= barWidth:
			b.WriteString(strings.Repeat("=", barWidth))
		default:
			b.WriteString(strings.Repeat("=", filled) + ">" + strings.Repeat(" ", barWidth-filled-1))
		}
		fmt.Fprintf(&b, "] %d%% ", percent(n, r.total))
	} else {
		fmt.Fprintf(&b, "%s %s, ", Human(float64(n)), r.unit)
	}
	fmt.Fprintf(&b, "%s %s/s", Human(rate), r.unit)
	if eta, ok := r.eta(n, rate); ok {
		fmt.Fprintf(&b, " ETA %s", eta)
	}
	return b.String()
}

// plainLine is a periodic line: label: 4500/10000 (45%) 1200 items/s ETA 5s.
func (r *Reporter) plainLine(n int64) string {
	rate := r.rate()
	var b strings.Builder
	r.label(&b, ": ")
	if r.total > 0 {
		fmt.Fprintf(&b, "%d/%d (%d%%)", n, r.total, percent(n, r.total))
	} else {
		fmt.Fprintf(&b, "%d %s,", n, r.unit)
	}
	fmt.Fprintf(&b, " %.0f %s/s", rate, r.unit)
	if eta, ok := r.eta(n, rate); ok {
		fmt.Fprintf(&b, " ETA %s", eta)
	}
	return b.String()
}

// finalLine is Done's line, the same in both modes: the count and the
// average rate since the start (the window no longer matters).
func (r *Reporter) finalLine(now time.Time) string {
	n := r.count.Load()
	elapsed := now.Sub(r.start)
	var b strings.Builder
	r.label(&b, ": ")
	if r.total > 0 {
		fmt.Fprintf(&b, "%d/%d (%d%%)", n, r.total, percent(n, r.total))
	} else {
		fmt.Fprintf(&b, "%d %s", n, r.unit)
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	fmt.Fprintf(&b, " in %s, %.0f %s/s", roundDur(elapsed), rate, r.unit)
	return b.String()
}

func (r *Reporter) label(b *strings.Builder, sep string) {
	if r.opts.Label != "" {
		b.WriteString(r.opts.Label + sep)
	}
}

// eta is the time left at rate; none for an unknown total or no rate yet.
func (r *Reporter) eta(n int64, rate float64) (time.Duration, bool) {
	if r.total <= 0 || rate <= 0 {
		return 0, false
	}
	left := max(r.total-n, 0)
	return roundDur(time.Duration(float64(left) / rate * float64(time.Second))), true
}

// roundDur rounds to the second above a second, else to the millisecond.
func roundDur(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// percent is n of total in whole percent, at most 100. It multiplies
// before it divides: 29/100 is 0.28999… as a fraction, which read 28%.
func percent(n, total int64) int {
	return int(min(float64(n)*100/float64(total), 100))
}

// Human formats v with a k, M or G suffix and one decimal: 1.2k, 3.4M. The
// suffix is chosen by the value as printed: 999,960 is 1.0M, not 1000.0k.
func Human(v float64) string {
	switch {
	case v >= 999.95e6:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 999.95e3:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 999.5:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
