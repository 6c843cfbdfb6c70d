package events

import "time"

// CoalesceWindowDefault is the seed system's coalescing window: one
// delivery per (subscription, subject) per 250 ms.
const CoalesceWindowDefault = 250 * time.Millisecond

// NoCoalescing, as a window, delivers each event as soon as its owner
// asks for what is due: only events taken together, before that, share a
// delivery (the newest payload still wins).
const NoCoalescing time.Duration = -1

// Coalescer holds events for one window per (subscription, subject): the
// first event opens the window, later ones replace its payload (the newest
// wins) without restarting it, and at the window's end one delivery goes
// out with the newest payload. It does no I/O and starts no goroutine: its
// owner adds events, asks Next when the earliest window ends, and takes the
// due deliveries with Due. Not safe for concurrent use.
type Coalescer[T any] struct {
	window  time.Duration
	pending map[coalesceKey]*Coalesced[T]
	// order holds the open windows in the order they opened, which is the
	// order they end (the window is one length for all): a queue, not a
	// heap. Windows dropped early stay in it until they reach its front.
	order []*Coalesced[T]
	head  int

	replaced uint64
}

type coalesceKey struct {
	sub     SubID
	subject string
}

// Coalesced is one window's delivery.
type Coalesced[T any] struct {
	Sub     SubID
	Subject string
	// Value is the newest payload of the window.
	Value T
	// Events is how many events the window took (1 when none was
	// coalesced).
	Events int
	// Ends is when the window ends and the delivery is due.
	Ends time.Time

	dropped bool
}

// NewCoalescer returns a coalescer with window; zero means
// CoalesceWindowDefault, a negative window (NoCoalescing) none.
func NewCoalescer[T any](window time.Duration) *Coalescer[T] {
	switch {
	case window == 0:
		window = CoalesceWindowDefault
	case window < 0:
		window = 0
	}
	return &Coalescer[T]{window: window, pending: make(map[coalesceKey]*Coalesced[T])}
}

// Add takes an event for sub on subject at now, and reports whether it
// opened a window (false: it replaced the payload of an open one).
func (c *Coalescer[T]) Add(now time.Time, sub SubID, subject string, v T) (opened bool) {
	k := coalesceKey{sub, subject}
	if p, ok := c.pending[k]; ok {
		p.Value = v
		p.Events++
		c.replaced++
		return false
	}
	p := &Coalesced[T]{Sub: sub, Subject: subject, Value: v, Events: 1, Ends: now.Add(c.window)}
	c.pending[k] = p
	c.order = append(c.order, p)
	return true
}

// AddMerged is Add for payloads that add up rather than replace each
// other (gap markers, whose counts sum): an open window's payload becomes
// merge(old, v).
func (c *Coalescer[T]) AddMerged(now time.Time, sub SubID, subject string, v T, merge func(old, v T) T) (opened bool) {
	if p, ok := c.pending[coalesceKey{sub, subject}]; ok {
		v = merge(p.Value, v)
	}
	return c.Add(now, sub, subject, v)
}

// Next is when the earliest open window ends; ok is false with none open.
func (c *Coalescer[T]) Next() (t time.Time, ok bool) {
	c.skipDropped()
	if c.head == len(c.order) {
		return time.Time{}, false
	}
	return c.order[c.head].Ends, true
}

// Due appends to dst the deliveries of every window that ended by now, in
// the order their windows opened, and closes those windows.
func (c *Coalescer[T]) Due(now time.Time, dst []Coalesced[T]) []Coalesced[T] {
	for {
		c.skipDropped()
		if c.head == len(c.order) || c.order[c.head].Ends.After(now) {
			break
		}
		p := c.order[c.head]
		c.order[c.head] = nil
		c.head++
		delete(c.pending, coalesceKey{p.Sub, p.Subject})
		dst = append(dst, *p)
	}
	c.compact()
	return dst
}

// Drop closes sub's open windows without delivering them (the
// subscription is gone) and reports how many there were. It costs a pass
// over the open windows.
func (c *Coalescer[T]) Drop(sub SubID) int {
	n := 0
	for k, p := range c.pending {
		if k.sub == sub {
			p.dropped = true
			delete(c.pending, k)
			n++
		}
	}
	return n
}

// Open is the number of open windows.
func (c *Coalescer[T]) Open() int { return len(c.pending) }

// Replaced is how many events were coalesced into an open window: events
// never delivered on their own.
func (c *Coalescer[T]) Replaced() uint64 { return c.replaced }

func (c *Coalescer[T]) skipDropped() {
	for c.head < len(c.order) && c.order[c.head].dropped {
		c.order[c.head] = nil
		c.head++
	}
}

// compact reuses the queue's space once half of it is consumed.
func (c *Coalescer[T]) compact() {
	if c.head > 0 && c.head*2 >= len(c.order) {
		n := copy(c.order, c.order[c.head:])
		clear(c.order[n:])
		c.order = c.order[:n]
		c.head = 0
	}
}
