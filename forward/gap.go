package forward

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Defaults of [GapConfig].
const (
	// GapReasonDefault is the reason a backlog marker carries.
	GapReasonDefault = "backlog_overflow"
	// LostReasonDefault is the reason carried by a marker made for a
	// delivery whose batch was lost (its send failed).
	LostReasonDefault = "send_failed"
	// WarnEveryDefault spaces the overflow warnings logged for one peer.
	WarnEveryDefault = time.Minute
)

// GapConfig configures a [GapPolicy].
type GapConfig struct {
	// Reason goes into the event of a marker made for a shed delivery.
	// Empty means "backlog_overflow".
	Reason string
	// LostReason goes into the event of a marker made for a delivery whose
	// batch was lost. Empty means "send_failed".
	LostReason string
	// WarnEvery is the least time between two overflow warnings for one
	// peer; the next one says how many items were shed in between. Zero
	// means one minute.
	WarnEvery time.Duration
	// Clock stamps markers whose event has no ts and spaces warnings. Nil
	// means the wall clock.
	Clock Clock
	// Logger receives the warnings. Nil means slog.Default().
	Logger *slog.Logger
}

// GapStats are a [GapPolicy]'s counters.
type GapStats struct {
	Overflows   uint64 // Overflow calls: the alarm "events_forward_overflow"
	Dropped     uint64 // items handed to Overflow
	LostBatches uint64 // Lost calls: batches whose send failed
	Lost        uint64 // items handed to Lost
	Markers     uint64 // markers made, for shed or lost deliveries
	Requeued    uint64 // lost markers queued again (none other was pending)
	Covered     uint64 // shed or lost deliveries a pending marker stands for
	AckRequired uint64 // shed or lost ackRequired deliveries: their lease retries them
	NonDelivery uint64 // shed or lost items of other kinds, without a marker
	MarkersShed uint64 // markers shed themselves (nothing else was left)
}

type gapKey struct{ peer, sub string }

type gapWarn struct {
	last    time.Time
	pending uint64 // shed since the last warning
}

// GapPolicy turns shed deliveries into gap markers. Plug it into a queue
// with QueueConfig{OnOverflow: g.Overflow, OnTaken: g.Taken, OnLost: g.Lost}.
//
// A subscription has at most one marker pending per peer: the first shed
// delivery of it becomes the marker (its event replaced by {id, subject,
// op: "gap", reason, ts}) and later ones are counted under it while the
// marker is still held by the queue. The slot frees when a batch carrying
// the marker is taken for sending, or when the marker is itself shed, so a
// delivery shed after that gets a marker of its own: every shed delivery is
// named by a marker taken for sending after the delivery was pushed.
// ackRequired deliveries get none (their lease retries them), nor do other
// item kinds.
type GapPolicy struct {
	cfg        GapConfig
	reason     []byte // the reasons, JSON-encoded
	lostReason []byte

	mu      sync.Mutex // protects the fields below
	pending map[gapKey]*Delivery
	warned  map[string]*gapWarn
	stats   GapStats
}

// NewGapPolicy returns a policy with no marker pending.
func NewGapPolicy(cfg GapConfig) *GapPolicy {
	if cfg.Reason == "" {
		cfg.Reason = GapReasonDefault
	}
	if cfg.LostReason == "" {
		cfg.LostReason = LostReasonDefault
	}
	if cfg.WarnEvery == 0 {
		cfg.WarnEvery = WarnEveryDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &GapPolicy{
		cfg:        cfg,
		reason:     appendString(nil, cfg.Reason),
		lostReason: appendString(nil, cfg.LostReason),
		pending:    make(map[gapKey]*Delivery),
		warned:     make(map[string]*gapWarn),
	}
}

// Overflow is a [QueueConfig.OnOverflow]: it returns the new markers.
func (g *GapPolicy) Overflow(peer string, dropped []Item) []Item {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stats.Overflows++
	g.stats.Dropped += uint64(len(dropped))
	var out []Item
	for _, it := range dropped {
		d, ok := it.(*Delivery)
		if !ok {
			g.stats.NonDelivery++
			continue
		}
		k := gapKey{peer, d.SubID}
		if isGapEvent(d.Event) {
			// The marker is gone; the next shed delivery makes a new one.
			g.stats.MarkersShed++
			if g.pending[k] == d {
				delete(g.pending, k)
			}
			continue
		}
		if d.AckRequired {
			g.stats.AckRequired++
			continue
		}
		g.stats.Covered++
		if _, ok := g.pending[k]; ok {
			continue
		}
		m := g.marker(d, g.reason)
		g.pending[k] = m
		g.stats.Markers++
		out = append(out, m)
	}
	g.warnLocked(peer, uint64(len(dropped)))
	return out
}

// Lost is a [QueueConfig.OnLost]: a failed send has the outcome of a shed
// for everything it carried. A lost delivery gets a marker (reason
// LostReason) unless one is pending for its subscription; a lost marker is
// queued again unless another is pending, which then stands for its
// deliveries too. ackRequired deliveries and other kinds are counted, as
// when shed. The returned markers go to the tail, so each is taken after
// the deliveries it names were pushed.
func (g *GapPolicy) Lost(peer string, lost []Item, _ error) []Item {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stats.LostBatches++
	g.stats.Lost += uint64(len(lost))
	var out []Item
	for _, it := range lost {
		d, ok := it.(*Delivery)
		if !ok {
			g.stats.NonDelivery++
			continue
		}
		k := gapKey{peer, d.SubID}
		if isGapEvent(d.Event) {
			if _, ok := g.pending[k]; ok {
				continue
			}
			g.pending[k] = d
			g.stats.Requeued++
			out = append(out, d)
			continue
		}
		if d.AckRequired {
			g.stats.AckRequired++
			continue
		}
		g.stats.Covered++
		if _, ok := g.pending[k]; ok {
			continue
		}
		m := g.marker(d, g.lostReason)
		g.pending[k] = m
		g.stats.Markers++
		out = append(out, m)
	}
	// No warning here: the queue logs every lost batch.
	return out
}

// Taken is a [QueueConfig.OnTaken]: a marker's slot frees as soon as a
// batch carrying it is taken for sending. A delivery pushed before that
// moment and shed after it would otherwise be counted under a marker that
// is already on the wire, and the resync that marker triggers could miss it.
func (g *GapPolicy) Taken(peer string, items []Item) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freeLocked(peer, items)
}

func (g *GapPolicy) freeLocked(peer string, items []Item) {
	for _, it := range items {
		if d, ok := it.(*Delivery); ok {
			k := gapKey{peer, d.SubID}
			if g.pending[k] == d {
				delete(g.pending, k)
			}
		}
	}
}

// Pending reports whether a marker for (peer, subID) is queued.
func (g *GapPolicy) Pending(peer, subID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.pending[gapKey{peer, subID}]
	return ok
}

// Stats returns the policy's counters.
func (g *GapPolicy) Stats() GapStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// marker builds d's gap marker: d with its event replaced. Only id, subject
// and ts are lifted out of the event, without decoding the rest of it.
func (g *GapPolicy) marker(d *Delivery, reason []byte) *Delivery {
	id, subject, ts := liftValue(d.Event, "id"), liftValue(d.Event, "subject"), liftValue(d.Event, "ts")
	ev := make([]byte, 0, 64+len(id)+len(subject)+len(ts)+len(reason))
	ev = append(ev, '{')
	if id != nil {
		ev = append(appendKey(ev, "id"), id...)
	}
	if subject != nil {
		ev = append(appendKey(ev, "subject"), subject...)
	}
	ev = append(appendKey(ev, "op"), `"gap"`...)
	ev = append(appendKey(ev, "reason"), reason...)
	if ts != nil {
		ev = append(appendKey(ev, "ts"), ts...)
	} else {
		ev = strconv.AppendInt(appendKey(ev, "ts"), g.cfg.Clock.Now().UnixMilli(), 10)
	}
	ev = append(ev, '}')
	m := *d
	m.Event = ev
	return &m
}

// liftValue returns the raw value of the event's top-level member key, or
// nil if there is none or it is not valid JSON. The scanner checks only
// that brackets balance and strings close, and a marker carrying a value
// that does not decode fails its batch at the receiver; Lost then queues
// it again, into every batch after it, and nothing reaches the peer.
// Values lifted are short (an id, a subject, a timestamp), so checking
// them costs little, unlike checking every pushed event whole.
func liftValue(event []byte, key string) []byte {
	v := topLevel(event, key)
	if v != nil && !json.Valid(v) {
		return nil
	}
	return v
}

// warnLocked logs one warning per peer per WarnEvery, carrying the count
// shed since the previous one, so a dead peer does not flood the log.
func (g *GapPolicy) warnLocked(peer string, n uint64) {
	w := g.warned[peer]
	if w == nil {
		w = &gapWarn{}
		g.warned[peer] = w
	}
	w.pending += n
	now := g.cfg.Clock.Now()
	if !w.last.IsZero() && now.Sub(w.last) < g.cfg.WarnEvery {
		return
	}
	g.cfg.Logger.Warn("forward: peer backlog overflow, shedding oldest items",
		"alarm", "events_forward_overflow", "peer", peer, "shed", w.pending)
	w.last, w.pending = now, 0
}
