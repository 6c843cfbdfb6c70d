package persist

import (
	"bytes"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
)

// Feed messages delivered in process. When a persist server and the
// watchers of its streams share a process and a NATS server (switchyard up:
// the events router, the gateway's watchers), a feed message would cross
// the NATS server twice on its way from one goroutine to another: the
// server's connection, the NATS server's read and write loops, the
// watcher's connection and its subscription's goroutine. DeliverFeedLocally
// hands it to the hubs of this process instead, as if it had come through
// the subscription, whenever they are all the subject's listeners; the
// server then does not publish it. Anything else (a watcher in another
// process, `nats sub`, a hub whose subscription the NATS server may not
// hold yet) takes the bus as before, so what a watcher sees is the same
// either way: the same feed numbers, bodies and digests, in commit order.

// localFeed lists the hubs of this process that DeliverFeedLocally may
// serve, by feed subject: those whose subscription the NATS server is known
// to hold (feedHub.confirm). A slice is replaced, never modified, so the
// delivering side reads it outside the lock. Lock order: feedHubs.mu, then
// localFeed.mu.
var localFeed = struct {
	mu   sync.RWMutex
	hubs map[string][]*feedHub
}{hubs: map[string][]*feedHub{}}

// confirm lists h for in-process delivery. A watcher calls it once a read
// it sent after joining h has been answered: the NATS server handles a
// connection's messages in order, so by then it holds h's subscription
// (sent before the read), and a NATS server that counts the subject's
// listeners counts h among them.
//
// That holds if the server accepted the subscription. It refuses one the
// user may not make, and tells nats.go only in an asynchronous error, so
// confirm relies on the bus's users: every one that may request a scope
// may also watch its feed (bus/auth: the client role any scope, a tenant
// its own; the server and balancer roles request nothing), so a read that
// was answered says the subscription was allowed. A user allowed one and
// not the other would get in-process deliveries it could not subscribe to.
func (h *feedHub) confirm() {
	if h.confirmed.Load() {
		return
	}
	feedHubs.mu.Lock()
	defer feedHubs.mu.Unlock()
	if h.confirmed.Load() || feedHubs.m[h.key] != h {
		return // listed already, or left since
	}
	h.confirmed.Store(true)
	localFeed.mu.Lock()
	localFeed.hubs[h.subject] = append(slices.Clip(localFeed.hubs[h.subject]), h)
	localFeed.mu.Unlock()
}

// unlist takes h out of localFeed; called with feedHubs.mu held, when h's
// last watcher leaves.
func (h *feedHub) unlist() {
	if !h.confirmed.Load() {
		return
	}
	localFeed.mu.Lock()
	defer localFeed.mu.Unlock()
	hs := slices.DeleteFunc(slices.Clone(localFeed.hubs[h.subject]), func(x *feedHub) bool { return x == h })
	if len(hs) == 0 {
		delete(localFeed.hubs, h.subject)
	} else {
		localFeed.hubs[h.subject] = hs
	}
}

// DeliverFeedLocally is how a persist server in this process skips the bus
// for its feed message m: it hands m to the feed hubs of this process that
// listen to m.Subject through the NATS server serverID (the one the
// server's connection is on), and reports handled when they are all the
// listeners that server has for the subject (listeners: how many
// subscriptions matching it the server holds, as the caller just counted
// them, or -1 when it cannot tell; none at all is handled too, with
// nothing delivered). handled false means nothing was delivered and m must
// be published as usual. delivered counts the hubs served.
//
// m's body is copied: the caller may reuse it once this returns.
func DeliverFeedLocally(m *nats.Msg, serverID string, listeners int) (delivered int, handled bool) {
	if serverID == "" || listeners < 0 {
		return 0, false // not connected, or no way to count the listeners
	}
	localFeed.mu.RLock()
	hs := localFeed.hubs[m.Subject]
	localFeed.mu.RUnlock()
	var buf [4]*feedHub // a stream has one hub per client of this process
	on := buf[:0]
	for _, h := range hs {
		if h.serverID() == serverID {
			on = append(on, h)
		}
	}
	if listeners != len(on) {
		return 0, false
	}
	if len(on) == 0 {
		return 0, true
	}
	b := parseFeedMsg(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: bytes.Clone(m.Data)})
	if b == nil {
		return 0, false
	}
	for _, h := range on {
		h.offer(b)
	}
	return len(on), true
}

// serverID is the NATS server h's subscription is on: its connection's,
// "" while that is not connected.
func (h *feedHub) serverID() string { return h.key.c.cfg.Conn.ConnectedServerId() }
