package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock runs timers only when the test advances it. It stands in for
// the wall clock so window behaviour is checked without waiting on time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	done bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_764_000_000, 0)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves time on and runs every timer that came due, in order, on
// the calling goroutine.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.done:
		case !t.at.After(c.now):
			t.done = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// sentBatch is a copy of one Outbound, taken inside Send.
type sentBatch struct {
	peer  string
	seq   uint64
	items []Item
	body  []byte
}

// recorder is a Send that reports every batch on a channel and then waits
// for the test's verdict on it: nil, an error, or (gate) until released.
type recorder struct {
	ch   chan sentBatch
	mu   sync.Mutex
	fail map[string]error // per peer
	gate chan struct{}    // when set, sends block until it is closed or ctx ends
}

func newRecorder() *recorder {
	return &recorder{ch: make(chan sentBatch, 1024), fail: map[string]error{}}
}

func (r *recorder) send(ctx context.Context, b *Outbound) error {
	r.ch <- sentBatch{peer: b.Peer, seq: b.Seq, items: append([]Item(nil), b.Items...), body: append([]byte(nil), b.Body...)}
	r.mu.Lock()
	err, gate := r.fail[b.Peer], r.gate
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (r *recorder) next(t *testing.T) sentBatch {
	t.Helper()
	select {
	case b := <-r.ch:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch was sent")
		return sentBatch{}
	}
}

// waitQueue waits until cond holds, re-checking whenever a send returns.
func waitQueue(t *testing.T, q *PeerQueue, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		q.mu.RLock()
		changed := q.changed
		q.mu.RUnlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("condition not reached")
		}
	}
}

// idle waits until no send is in flight to peer.
func idle(t *testing.T, q *PeerQueue, peer string, batches uint64) {
	t.Helper()
	waitQueue(t, q, func() bool {
		s := q.PeerStats(peer)
		return s.Batches == batches && s.InFlight == 0
	})
}

func newTestQueue(t *testing.T, clk *fakeClock, rec *recorder, mod func(*QueueConfig)) *PeerQueue {
	t.Helper()
	cfg := QueueConfig{From: "eu", Send: rec.send, Clock: clk}
	if mod != nil {
		mod(&cfg)
	}
	q := startQueue(t, cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // cancel sends still blocked at once
		_ = q.Stop(ctx)
	})
	return q
}

// del is a delivery named name, with op write unless it is "name:gap".
func del(sub, name string) *Delivery {
	op := "write"
	if len(name) > 4 && name[len(name)-4:] == ":gap" {
		op, name = "gap", name[:len(name)-4]
	}
	ev := fmt.Sprintf(`{"id":%q,"subject":"fs:%s:write","op":%q,"ts":1764000000000}`, name, name, op)
	return &Delivery{UserID: 7, SubID: sub, Event: json.RawMessage(ev)}
}

// names lists each item as "id:op" in order.
func names(t *testing.T, items []Item) []string {
	t.Helper()
	out := make([]string, 0, len(items))
	for _, it := range items {
		d, ok := it.(*Delivery)
		if !ok {
			out = append(out, string(it.Kind()))
			continue
		}
		var ev struct{ ID, Op string }
		if err := json.Unmarshal(d.Event, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.ID+":"+ev.Op)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waiting counts the timers that have neither run nor been stopped.
func (c *fakeClock) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// startSender makes and starts a sender, stopped when the test ends.
func startSender(t *testing.T, cfg SenderConfig) *Sender {
	t.Helper()
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// startQueue makes and starts a queue. The caller stops it: the tests of
// Stop each stop it their own way.
func startQueue(t *testing.T, cfg QueueConfig) *PeerQueue {
	t.Helper()
	q, err := NewPeerQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return q
}
