package bench

// Meter counts the progress of one phase of a benchmark. Add is called from
// the measured loops, so it must be cheap and safe for concurrent use.
type Meter interface {
	Add(n int64) // n more units done
	Set(n int64) // n units done in all
	Done()
}

// Progress starts a Meter for a phase: its label, its total in units (zero
// when the phase runs for a time rather than a count) and the unit's name.
// The command passes one that draws on stderr; nil means no progress.
type Progress func(label string, total int64, unit string) Meter

// start is p's meter for a phase, or one that counts nothing.
func (p Progress) start(label string, total int64, unit string) Meter {
	if p == nil {
		return nopMeter{}
	}
	return p(label, total, unit)
}

type nopMeter struct{}

func (nopMeter) Add(int64) {}
func (nopMeter) Set(int64) {}
func (nopMeter) Done()     {}
