package persist

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// A feed hub shares one NATS subscription to a stream's feed subject among
// all the watchers of that stream in one Client: it parses each feed
// message's headers and decodes its frames once and hands the result to
// every watcher's bounded buffer. What each watcher knows (the last seq it
// accounted for, the publishers it follows, gaps, resyncs, overflow) stays
// its own, so a slow or resyncing watcher does not hold up the others.
// Without it, 100 watchers of one stream in one process would parse and
// decode every change 100 times.
//
// The hub has no goroutine of its own: its onMsg runs on the delivery
// goroutine nats.go keeps per subscription, which ends when the last
// watcher leaves and the hub unsubscribes. onMsg never blocks.

// feedBatch is one feed message, decoded once by a hub and shared by its
// watchers, which must not modify it (nor the Messages handed on as
// Event.Msg).
type feedBatch struct {
	epoch  string
	n      uint64
	server string
	// sum is a digest of the body: a watcher that meets one feed number
	// twice compares digests to tell a harmless replay from a forgery.
	sum    uint64
	frames []Frame
	msgs   []Message // msgs[i] is frames[i].Message(): the Event.Msg of a set
	err    error     // the body broke off after frames
}

// feedHub is one (client, stream) subscription and its watchers.
type feedHub struct {
	key     feedHubKey
	subject string
	sub     *nats.Subscription
	// confirmed: the NATS server holds sub, and the hub is in localFeed
	// (client_watch_local.go). Set under feedHubs.mu.
	confirmed atomic.Bool
	// watchers is replaced, never modified, under feedHubs.mu, so onMsg
	// reads it without a lock.
	watchers atomic.Pointer[[]*Watcher]
}

type feedHubKey struct {
	c         *Client
	scope     string
	name      string
	ephemeral bool
}

// feedHubs holds the live hubs of every Client: it lives outside Client so
// a Client needs no setup for it, and an entry goes when its last watcher
// leaves.
var feedHubs = struct {
	mu sync.Mutex // protects m and every hub's watchers list
	m  map[feedHubKey]*feedHub
}{m: map[feedHubKey]*feedHub{}}

// joinFeedHub adds w to the hub of its stream, subscribing if w is the
// first. From its return on, w is offered every feed message the
// subscription receives.
func joinFeedHub(w *Watcher) (*feedHub, error) {
	s := w.s
	nc := s.c.cfg.Conn
	key := feedHubKey{c: s.c, scope: s.scope, name: s.name, ephemeral: s.ephemeral}
	feedHubs.mu.Lock()
	defer feedHubs.mu.Unlock()
	h := feedHubs.m[key]
	if h == nil {
		h = &feedHub{key: key, subject: FeedSubject(s.c.cfg.Service, s.scope, s.name, s.ephemeral)}
		sub, err := nc.Subscribe(h.subject, h.onMsg)
		if err != nil {
			return nil, fmt.Errorf("watch %q/%q: subscribe: %w", s.scope, s.name, err)
		}
		// onMsg never blocks, so NATS's own pending limit is only a
		// backstop; a drop there shows up as a Sy-Feed-N gap.
		_ = sub.SetPendingLimits(-1, 256<<20)
		h.sub = sub
		h.watchers.Store(&[]*Watcher{})
		feedHubs.m[key] = h
	} else if nc.IsClosed() {
		// The hub's watchers are on their way out; a new one would never
		// hear of the close.
		return nil, fmt.Errorf("watch %q/%q: subscribe: %w", s.scope, s.name, nats.ErrConnectionClosed)
	}
	ws := append(slices.Clip(*h.watchers.Load()), w)
	h.watchers.Store(&ws)
	return h, nil
}

// leave removes w; the last watcher out unsubscribes and drops the hub.
func (h *feedHub) leave(w *Watcher) {
	feedHubs.mu.Lock()
	defer feedHubs.mu.Unlock()
	ws := slices.DeleteFunc(slices.Clone(*h.watchers.Load()), func(x *Watcher) bool { return x == w })
	h.watchers.Store(&ws)
	if len(ws) == 0 {
		h.unlist()
		_ = h.sub.Unsubscribe()
		if feedHubs.m[h.key] == h {
			delete(feedHubs.m, h.key)
		}
	}
}

// onMsg is the subscription's callback: parse and decode once, then offer
// the result to every watcher without waiting on any.
func (h *feedHub) onMsg(m *nats.Msg) {
	if len(*h.watchers.Load()) == 0 {
		return
	}
	if b := parseFeedMsg(m); b != nil {
		h.offer(b)
	}
}

// offer hands b to every watcher of h without waiting on any: from onMsg,
// or from a persist server in this process (DeliverFeedLocally).
func (h *feedHub) offer(b *feedBatch) {
	for _, w := range *h.watchers.Load() {
		w.offer(b)
	}
}

// parseFeedMsg reads a feed message; nil means it is not from a persist
// server (no epoch or message number), and is ignored rather than let a
// stray publisher force resyncs.
func parseFeedMsg(m *nats.Msg) *feedBatch {
	epoch := header(m.Header, HdrFeedEpoch)
	n, err := strconv.ParseUint(header(m.Header, HdrFeedN), 10, 64)
	if epoch == "" || err != nil || n == 0 {
		return nil
	}
	b := &feedBatch{epoch: epoch, n: n, server: header(m.Header, HdrServer), sum: maphash.Bytes(feedSumSeed, m.Data)}
	b.frames, b.err = decodeFeedBody(m.Data)
	b.msgs = make([]Message, len(b.frames))
	for i := range b.frames {
		b.msgs[i] = b.frames[i].Message()
	}
	return b
}

// feedSumSeed keys the feed digests; it is random per process, so a forger
// cannot craft a body with the digest of another.
var feedSumSeed = maphash.MakeSeed()

// header is Header.Get without canonicalising the name on every call: our
// header names are already in canonical form, which is how they arrive.
func header(h nats.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return h.Get(name)
}
