package dashboard

import (
	"context"
	"time"

	"github.com/switchyard-dev/switchyard/work"
)

// Snapshot is what one tick pushes to every dashboard, as JSON. Each is
// whole (no deltas), so a client that misses some loses nothing but their
// moment.
type Snapshot struct {
	// Seq counts the snapshots of this hub from 1; Instance tells hubs
	// apart (it changes when the process restarts and Seq starts again).
	Seq      uint64 `json:"seq"`
	Instance string `json:"instance"`
	Time     int64  `json:"time"` // unix milliseconds

	Members  []Member  `json:"members,omitempty"`
	Pools    []Pool    `json:"pools,omitempty"`
	Watchers []Watcher `json:"watchers,omitempty"`
	Peers    []Peer    `json:"peers,omitempty"`
	Totals   *Totals   `json:"totals,omitempty"`
	// Throughput is the articles/s of the last samples, oldest first.
	Throughput []Sample     `json:"throughput,omitempty"`
	Work       *work.Status `json:"work,omitempty"`
	Releases   *Releases    `json:"releases,omitempty"`
	Errors     *PartErrors  `json:"errors,omitempty"`
}

// Peer is one peer region and the forward queue to it.
type Peer struct {
	Region   string `json:"region"` // this process's region
	Name     string `json:"name"`   // the peer's
	URL      string `json:"url"`
	Queued   int    `json:"queued"`    // items waiting for a batch
	InFlight int    `json:"in_flight"` // batches sent and not answered
	Batches  uint64 `json:"batches"`   // batches sent
	Items    uint64 `json:"items"`     // items in them
	Shed     uint64 `json:"shed"`      // items the queue's bounds dropped (each under a gap marker)
	Lost     uint64 `json:"lost"`      // batches whose send failed
	// Watches is how many anchor tokens the peer watches here.
	Watches int `json:"watches"`
}

// Sample is one point of the throughput chart.
type Sample struct {
	Time int64   `json:"t"` // unix milliseconds
	Rate float64 `json:"v"` // articles per second
}

// PartErrors says why a part that needs a read has no section this tick.
type PartErrors struct {
	Work     string `json:"work,omitempty"`
	Releases string `json:"releases,omitempty"`
}

// sampler keeps the last n throughput samples.
type sampler struct {
	n       int
	samples []Sample
	last    Totals
	lastAt  time.Time
	primed  bool
}

// add records the rate of t.Articles since the previous call; without
// totals it records fallback (the work status's minute average), when
// there is one.
func (s *sampler) add(now time.Time, t Totals, haveTotals bool, fallback *float64) {
	var v float64
	switch {
	case haveTotals && s.primed:
		if d := now.Sub(s.lastAt).Seconds(); d > 0 {
			v = float64(t.Articles-s.last.Articles) / d
		}
	case haveTotals:
		s.last, s.lastAt, s.primed = t, now, true
		return
	case fallback != nil:
		v = *fallback
	default:
		return
	}
	if haveTotals {
		s.last, s.lastAt = t, now
	}
	if v < 0 {
		v = 0
	}
	s.samples = append(s.samples, Sample{Time: now.UnixMilli(), Rate: v})
	if len(s.samples) > s.n {
		s.samples = append(s.samples[:0], s.samples[len(s.samples)-s.n:]...)
	}
}

// build reads every part of src into a snapshot; read bounds the reads
// that need I/O, full says whether to make them (someone is watching).
func (h *Hub) build(ctx context.Context, now time.Time, full bool) Snapshot {
	src := h.cfg.Source
	s := Snapshot{Instance: h.instance, Time: now.UnixMilli(), Members: src.Members(), Pools: src.Pools(), Watchers: src.Watchers(), Peers: src.Peers()}
	t, ok := src.Totals()
	if ok {
		s.Totals = &t
	}
	var errs PartErrors
	if full {
		rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
		st, err := src.Work(rctx)
		cancel()
		if err != nil {
			errs.Work = err.Error()
		}
		s.Work = st
		rctx, cancel = context.WithTimeout(ctx, h.cfg.ReadTimeout)
		rel, err := src.Releases(rctx, h.cfg.Releases)
		cancel()
		if err != nil {
			errs.Releases = err.Error()
		}
		s.Releases = rel
	}
	if errs != (PartErrors{}) {
		s.Errors = &errs
	}
	var fallback *float64
	if s.Work != nil {
		fallback = &s.Work.Throughput
	}
	h.samples.add(now, t, ok, fallback)
	s.Throughput = append([]Sample(nil), h.samples.samples...)
	return s
}
