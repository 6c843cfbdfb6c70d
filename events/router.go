package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
)

// Defaults of RouterConfig.
const (
	// MaxSessionSubsDefault bounds the subscriptions of one session (one
	// WebSocket), as the seed's system does.
	MaxSessionSubsDefault = 50
	// routerQueue is how many changes wait between the streams' watchers
	// and the router's loop; a full queue holds the watchers back, whose
	// own buffers then resync rather than lose anything.
	routerQueue = 1024
	// stopWatchTimeout bounds the wait for a watcher no subscription needs.
	stopWatchTimeout = 10 * time.Second
)

// ErrTooManySubs is returned by Session.Subscribe past the session's limit.
var ErrTooManySubs = errors.New("events: too many subscriptions on this session")

// ErrSessionClosed is returned by Session.Subscribe after Close.
var ErrSessionClosed = errors.New("events: session closed")

// RouterConfig configures a Router.
type RouterConfig struct {
	// Client reads the change feeds. Required.
	Client *persist.Client
	// Coalesce is the coalescing window. Zero means CoalesceWindowDefault;
	// NoCoalescing delivers each change as soon as the loop has taken it
	// (changes read together still share a delivery).
	Coalesce time.Duration
	// MaxSessionSubs bounds one session's subscriptions. Zero means
	// MaxSessionSubsDefault.
	MaxSessionSubs int
	// BroadcastPerMinute bounds one subscription's deliveries over a
	// sliding minute. Zero means BroadcastPerMinute.
	BroadcastPerMinute int
	// Clock is the time of windows and limits. Nil means the wall clock.
	Clock forward.Clock
	// Logger receives what goes wrong with a stream's watcher. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Region joins the router to its peer regions (see RegionConfig). Nil
	// means a region of its own.
	Region *RegionConfig
	// Durable turns on durable subscriptions, rows kept in persist (see
	// DurableConfig). Nil means session subscriptions only.
	Durable *DurableConfig
}

// Event is one change as a subscriber gets it.
type Event struct {
	// ID names the change: "scope/stream#seq" (the seq of the set, or of
	// the removed message for a delete), and "@REGION" after it for a
	// change committed in a peer's data (Origin): each region's streams
	// have seqs of their own.
	ID      string
	Subject Subject
	Op      Op
	Seq     uint64
	// Value is the stored value of a set (nil for a delete). It may be
	// shared: read it, never modify it.
	Value []byte
	// TS is the change's time, unix milliseconds: the write's time for a
	// set, the router's for a delete.
	TS int64
	// Coalesced is how many changes of the subject this delivery stands for
	// (1 when none was coalesced into it).
	Coalesced int
	// Origin is the peer region whose data the change was committed in,
	// "" for this region's. A remote change's Seq is of the peer's
	// stream: it moves no cursor here.
	Origin string
}

// Delivery is what a session's deliver function gets: an event, or a gap
// marker in its place.
type Delivery struct {
	// Sub is the session's own id for the subscription (Subscribe's id),
	// or a durable subscription's id.
	Sub string
	// Event may be shared by the deliveries of one change to several
	// subscriptions: read it, never modify it.
	Event *Event
	Gap   *Gap
	// Mode is "" for a session subscription's delivery, ModeBroadcast or
	// ModeSingle for a durable one's.
	Mode string
	// Entry, on a `single` delivery, is what the session acks (Session.Ack)
	// to get the next; Attempt counts the times it was handed out (more
	// than 1 after a lease ran out unacked).
	Entry   string
	Attempt int
}

// RouterStats counts what a router did.
type RouterStats struct {
	Changes     uint64            // changes read from the feeds (after the history)
	Deliveries  uint64            // events delivered
	Coalesced   uint64            // changes folded into another delivery
	Gaps        map[Reason]uint64 // gap markers delivered, by reason
	RateDrops   uint64            // events dropped under a rate limit's marker
	Acks        uint64            // `single` deliveries acked
	Redelivered uint64            // `single` deliveries handed out again after their lease ran out
	Watches     int               // streams watched now
	Ready       int               // of those, the ones whose first read is done (changes from now on are delivered)
	Subs        int               // subscriptions now
	Sessions    int               // sessions open now
	// Leases is the `single` deliveries in flight now (handed out, not
	// acked), Backlog the entries waiting behind them (markers included),
	// as the loop last left them.
	Leases, Backlog int
}

// Router reads the change feeds of the streams its subscriptions are
// anchored in — one watcher per stream, shared by every subscription in
// it, started by the first and stopped after the last — and delivers each
// change to the subscriptions whose anchor and filter take it, coalesced
// and rate limited, with gap markers for what it cannot deliver. A
// watcher's first read of its stream (the history) only learns the keys;
// what changes after is delivered. A change the feed lost and the stream
// no longer holds is a feed_loss gap for every subscription in the stream.
//
// This is the region-local router of session subscriptions; durable rows,
// `single` delivery and regions build on it. Start it before opening
// sessions; Stop closes every session.
type Router struct {
	cfg  RouterConfig
	base lifecycle.Base
	log  *slog.Logger

	in   chan routed
	tick chan struct{} // a window ended: see loop's arm
	done chan struct{}

	mu       sync.Mutex
	index    *Index
	local    map[string]int // anchor token -> session subscriptions on it (what the region announces)
	subs     map[SubID]*routerSub
	watches  map[streamRef]*streamWatch
	sessions map[*Session]struct{}
	nextSess uint64

	// Owned by the loop.
	coal *Coalescer[pending]
	lim  *Limiter

	region *region // nil without peers
	bg     sync.WaitGroup

	durable *durables             // nil without durable subscriptions
	byOwner map[string][]*Session // open sessions by user, under mu
	single  *Single[pending]      // owned by the loop
	// singleLeases and singleBacklog are single's Totals, published by the
	// loop for Stats.
	singleLeases, singleBacklog atomic.Int64

	durableUsers map[int64]map[string]int    // wire number -> users with durable rows here -> rows, under mu
	last         map[SubID]target            // `single` subscription -> where its last delivery went; owned by the loop
	singleTop    map[SubID]uint64            // `single` subscription -> highest seq given it; owned by the loop (resume.go)
	singleSaved  map[SubID]uint64            // `single` subscription -> the cursor last handed to saver; owned by the loop
	singleGen    map[SubID]string            // `single` subscription -> its row's Gen, what its cursor is saved as; owned by the loop
	windowLow    map[SubID]map[string]uint64 // durable subscription -> its open windows (coalescer subjects) -> the lowest seq each took; owned by the loop (resume.go)
	saver        *cursorSaver                // writes the `single` cursors; nil without durable subscriptions
	remoteIn     map[remoteKey]*remoteEntry  // peers' `single` deliveries given to sessions here; owned by the loop
	remoteInBy   map[string]int              // peer -> its entries in remoteIn (bounded by MaxRemoteEntries); owned by the loop

	changes, deliveries, coalesced, rateDrops, acks, redelivered atomic.Uint64
	gapMu                                                        sync.Mutex
	gaps                                                         map[Reason]uint64
}

type streamRef struct{ scope, stream string }

type routerSub struct {
	sub      *Sub
	session  *Session    // nil for a durable subscription or a peer's stand-in
	durable  *DurableRow // set on a durable subscription
	clientID string
}

// streamWatch is one stream's watcher and what the router knows of the
// stream's keys: the key of each live seq, to name a delete's subject, and
// the live seq of each key, to tell a replaced row (whose delete is no
// event: the set that replaced it is) from a deleted one.
type streamWatch struct {
	ref    streamRef
	w      *persist.Watcher
	cancel context.CancelFunc
	refs   int

	ready     chan struct{} // closed once the first read (the history) is done
	readyOnce sync.Once

	// Owned by the watcher's callback.
	seqKey   map[uint64]string
	keySeq   map[string]uint64
	caughtUp bool
}

// routed is one change on its way from a watcher to the loop; gapAll
// asks for a feed_loss gap to every subscription of the stream instead.
type routed struct {
	ev     Event
	gapAll *streamRef
	reason Reason // of gapAll
	count  int
	// remote: the change came from a peer region, for this region's
	// session subscriptions only (hop 1: never forwarded again).
	remote bool
	// do, when set, is work for the loop (which owns the lease table):
	// an ack, or handing a newly connected user its `single` backlog.
	do func()
}

// pending is what a coalescing window holds: an event, or a gap marker
// for the window's subject.
type pending struct {
	ev  *Event
	gap *Gap
	// sub is the subscription whose window this is. A subscription
	// replaced under its id (a session's subscribe again, a durable row
	// written again) leaves its windows behind until the loop takes its
	// forget; flush delivers them to nobody rather than to the
	// subscription that replaced it, anchored elsewhere perhaps.
	sub *Sub
	// low, on a marker the router put in the `single` lease table (gap
	// set, as the entry's Gap), is the lowest seq of this region's stream
	// among the changes it stands for (0: none known): see saveCursor.
	low uint64
}

// NewRouter checks cfg and returns a router to Start.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Client == nil {
		return nil, errors.New("events: RouterConfig.Client is nil")
	}
	if (cfg.Coalesce < 0 && cfg.Coalesce != NoCoalescing) || cfg.MaxSessionSubs < 0 || cfg.BroadcastPerMinute < 0 {
		return nil, errors.New("events: negative RouterConfig field")
	}
	if cfg.MaxSessionSubs == 0 {
		cfg.MaxSessionSubs = MaxSessionSubsDefault
	}
	if cfg.BroadcastPerMinute == 0 {
		cfg.BroadcastPerMinute = BroadcastPerMinute
	}
	if cfg.Clock == nil {
		cfg.Clock = forward.WallClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var reg *region
	if cfg.Region != nil {
		var err error
		if reg, err = newRegion(*cfg.Region, cfg.Clock); err != nil {
			return nil, err
		}
	}
	r := &Router{
		cfg: cfg, log: cfg.Logger,
		in:       make(chan routed, routerQueue),
		tick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		index:    NewIndex(),
		subs:     make(map[SubID]*routerSub),
		watches:  make(map[streamRef]*streamWatch),
		sessions: make(map[*Session]struct{}),
		coal:     NewCoalescer[pending](cfg.Coalesce),
		lim:      NewLimiter(time.Minute),
		gaps:     make(map[Reason]uint64),
		local:    make(map[string]int),
		region:   reg,
		byOwner:  make(map[string][]*Session),

		durableUsers: make(map[int64]map[string]int),
		last:         make(map[SubID]target),
		singleTop:    make(map[SubID]uint64),
		singleSaved:  make(map[SubID]uint64),
		singleGen:    make(map[SubID]string),
		windowLow:    make(map[SubID]map[string]uint64),
		remoteIn:     make(map[remoteKey]*remoteEntry),
		remoteInBy:   make(map[string]int),
	}
	if cfg.Durable != nil {
		d, err := newDurables(cfg.Client, *cfg.Durable)
		if err != nil {
			return nil, err
		}
		r.durable = d
		r.single = NewSingle[pending](SingleConfig{Lease: d.cfg.Lease, Backlog: d.cfg.Backlog})
		r.saver = newCursorSaver(cfg.Client.KV(d.cfg.Scope, d.cfg.CursorStream), cfg.Logger)
	}
	if reg != nil {
		reg.r = r
	}
	return r, nil
}

// Start starts the router's loop.
func (r *Router) Start(ctx context.Context) error {
	return r.base.Start(ctx, "events router", func(context.Context) error {
		go r.loop(r.base.Run())
		if r.region != nil {
			r.region.start(r.base.Run())
		}
		if r.durable != nil {
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				r.saver.run(r.base.Run())
				// The last writes come after the loop's end, which hands
				// the saver its last cursors and removals, or leaves the
				// removals it accepted unhanded: finish makes them.
				<-r.done
				r.saver.finish(r.base.Run())
			}()
			if err := r.durable.follow(r.base.Run(), r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Stop closes every session, stops the watchers and the loop.
func (r *Router) Stop(ctx context.Context) error {
	return r.base.Stop(ctx, func(ctx context.Context) error {
		r.mu.Lock()
		sessions := make([]*Session, 0, len(r.sessions))
		for s := range r.sessions {
			sessions = append(sessions, s)
		}
		r.mu.Unlock()
		for _, s := range sessions {
			s.Close()
		}
		if r.region != nil {
			r.region.stop()
		}
		if r.durable != nil {
			r.durable.stop()
		}
		bgDone := make(chan struct{})
		go func() { r.bg.Wait(); close(bgDone) }()
		select { // remote watches being added end with the run context
		case <-bgDone:
		case <-ctx.Done():
			return fmt.Errorf("events router: stop: %w", ctx.Err())
		}
		select { // the run context, which ends the loop, is cancelled before this runs
		case <-r.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("events router: stop: %w", ctx.Err())
		}
	})
}

// Client is the persist client the router reads the feeds with.
func (r *Router) Client() *persist.Client { return r.cfg.Client }

// MaxSessionSubs is how many subscriptions one session may hold (the
// config's, or MaxSessionSubsDefault): what a gateway tells its clients.
func (r *Router) MaxSessionSubs() int { return r.cfg.MaxSessionSubs }

// Stats returns the router's counters.
func (r *Router) Stats() RouterStats {
	st := RouterStats{
		Changes: r.changes.Load(), Deliveries: r.deliveries.Load(), Coalesced: r.coalesced.Load(), RateDrops: r.rateDrops.Load(), Acks: r.acks.Load(), Redelivered: r.redelivered.Load(),
		Gaps:   make(map[Reason]uint64, len(Reasons)),
		Leases: int(r.singleLeases.Load()), Backlog: int(r.singleBacklog.Load()),
	}
	r.gapMu.Lock()
	for k, v := range r.gaps {
		st.Gaps[k] = v
	}
	r.gapMu.Unlock()
	r.mu.Lock()
	st.Watches, st.Subs, st.Sessions = len(r.watches), len(r.subs), len(r.sessions)
	for _, sw := range r.watches {
		select {
		case <-sw.ready:
			st.Ready++
		default:
		}
	}
	r.mu.Unlock()
	return st
}

// Session is one subscriber's set of subscriptions (one WebSocket): they
// end with it.
type Session struct {
	r       *Router
	id      string
	owner   string
	deliver func(Delivery)

	mu     sync.Mutex // protects subs and closed; never held while calling the router
	subs   map[string]SubID
	closed bool
}

// Open starts a session of owner (the user its subscriptions count
// against). deliver is called from the router's loop, one delivery at a
// time, and must return at once (queue, or drop and close): a slow
// deliver holds every subscriber of the region back. It must not call the
// session's or router's methods.
func (r *Router) Open(owner string, deliver func(Delivery)) *Session {
	r.mu.Lock()
	r.nextSess++
	s := &Session{r: r, id: "s" + strconv.FormatUint(r.nextSess, 10), owner: owner, deliver: deliver, subs: make(map[string]SubID)}
	r.sessions[s] = struct{}{}
	first := len(r.byOwner[owner]) == 0
	r.byOwner[owner] = append(r.byOwner[owner], s)
	r.mu.Unlock()
	if first && r.region != nil {
		r.region.bump(owner, bumpPresence) // the user's first session here
	}
	if r.durable != nil {
		// What waits for the user's `single` subscriptions goes out now.
		r.post(routed{do: func() { r.dispatchOwner(owner) }})
	}
	return s
}

// Subscribe adds the session's subscription id on anchor with filter; a
// second Subscribe of one id replaces the first. Every change committed
// after it returns reaches the subscription. An anchor whose stream is not
// yet watched starts the stream's watcher, and Subscribe waits (within
// ctx) for its first read of the stream, which learns the stream's keys
// without delivering them.
func (s *Session) Subscribe(ctx context.Context, id string, anchor Anchor, filter Filter) error {
	if id == "" || len(id) > 128 {
		return errors.New("events: a subscription id is 1 to 128 bytes")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSessionClosed
	}
	old, replacing := s.subs[id]
	if !replacing && len(s.subs) >= s.r.cfg.MaxSessionSubs {
		s.mu.Unlock()
		return fmt.Errorf("%w (%d)", ErrTooManySubs, s.r.cfg.MaxSessionSubs)
	}
	sid := SubID(s.id + "/" + id)
	s.subs[id] = sid
	s.mu.Unlock()
	if replacing {
		s.r.remove(old)
	}
	err := s.r.add(ctx, &routerSub{sub: &Sub{ID: sid, Owner: s.owner, Anchor: anchor, Filter: filter}, session: s, clientID: id})
	if err != nil && !errors.Is(err, ErrDuplicateSub) {
		// The router holds nothing of it: neither does the session, so a
		// failed subscribe takes none of the socket's slots.
		s.mu.Lock()
		if s.subs[id] == sid {
			delete(s.subs, id)
		}
		s.mu.Unlock()
	}
	return err
}

// Unsubscribe ends the subscription id and reports whether there was one.
func (s *Session) Unsubscribe(id string) bool {
	s.mu.Lock()
	sid, ok := s.subs[id]
	delete(s.subs, id)
	s.mu.Unlock()
	if ok {
		s.r.remove(sid)
	}
	return ok
}

// Len is the number of the session's subscriptions.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Close ends every subscription of the session; deliver is not called
// after Close returns... except for one delivery the loop may be making at
// that instant.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	ids := make([]SubID, 0, len(s.subs))
	for _, sid := range s.subs {
		ids = append(ids, sid)
	}
	s.subs = nil
	s.mu.Unlock()
	for _, sid := range ids {
		s.r.remove(sid)
	}
	s.r.mu.Lock()
	delete(s.r.sessions, s)
	list := slices.DeleteFunc(s.r.byOwner[s.owner], func(o *Session) bool { return o == s })
	last := len(list) == 0
	if last {
		delete(s.r.byOwner, s.owner)
	} else {
		s.r.byOwner[s.owner] = list
	}
	s.r.mu.Unlock()
	if last && s.r.region != nil {
		s.r.region.bump(s.owner, bumpPresence) // the user's last session here
	}
}

// add indexes rs and, for its stream's first subscription, starts the
// stream's watcher.
func (r *Router) add(ctx context.Context, rs *routerSub) error {
	ref := streamRef{rs.sub.Anchor.Scope, rs.sub.Anchor.Stream}
	r.mu.Lock()
	if err := r.index.Add(rs.sub); err != nil {
		r.mu.Unlock()
		return err
	}
	r.subs[rs.sub.ID] = rs
	r.noteDurableUserLocked(rs, 1)
	// A durable row's anchor is announced like a session's: the peers'
	// changes on it come here, to the row's home, to be matched.
	announce := rs.announced() && r.countLocked(rs.sub.Anchor.Token(), 1)
	if announce {
		defer r.region.announce(rs.sub.Anchor.Token())
	}
	sw := r.watches[ref]
	if sw != nil {
		sw.refs++
		r.mu.Unlock()
		return r.awaitReady(ctx, sw, rs.sub.ID)
	}
	sw = &streamWatch{ref: ref, refs: 1, ready: make(chan struct{}), seqKey: map[uint64]string{}, keySeq: map[string]uint64{}}
	r.watches[ref] = sw
	r.mu.Unlock()

	wctx, cancel := context.WithCancel(r.base.Run())
	w, err := r.cfg.Client.Stream(ref.scope, ref.stream).Watch(wctx, persist.WatchOptions{}, func(e persist.Event) { r.onChange(wctx, sw, e) })
	if err != nil {
		cancel()
		r.mu.Lock()
		r.index.Remove(rs.sub.ID)
		delete(r.subs, rs.sub.ID)
		r.noteDurableUserLocked(rs, -1)
		if rs.announced() {
			r.countLocked(rs.sub.Anchor.Token(), -1) // the announcement deferred above says drop
		}
		if r.watches[ref] == sw {
			delete(r.watches, ref)
		}
		r.mu.Unlock()
		return fmt.Errorf("events: watch %s/%s: %w", ref.scope, ref.stream, err)
	}
	r.mu.Lock()
	sw.w, sw.cancel = w, cancel
	stale := r.watches[ref] != sw // every subscription left while Watch ran
	r.mu.Unlock()
	if stale {
		r.stopWatch(sw)
	}
	return r.awaitReady(ctx, sw, rs.sub.ID)
}

// announced reports whether rs counts among the subscriptions the region
// announces to its peers: a session's or a durable row's, not a peer's
// stand-in.
func (rs *routerSub) announced() bool { return rs.session != nil || rs.durable != nil }

// countLocked moves the count of session subscriptions on tok by d and
// reports whether the region must announce it (it went 0 -> 1 or 1 -> 0,
// and there are peers to tell).
func (r *Router) countLocked(tok string, d int) bool {
	n := r.local[tok] + d
	if n <= 0 {
		delete(r.local, tok)
	} else {
		r.local[tok] = n
	}
	return r.region != nil && (n == 0 || n == 1 && d > 0)
}

// localWatched reports whether a session subscription of this region is
// anchored on tok.
func (r *Router) localWatched(tok string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local[tok] > 0
}

// localTokens lists the tokens this region's sessions are anchored on.
func (r *Router) localTokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.local))
	for t := range r.local {
		out = append(out, t)
	}
	return out
}

// awaitReady waits for sw's first read; when the wait fails, the
// subscription id is removed again.
func (r *Router) awaitReady(ctx context.Context, sw *streamWatch, id SubID) error {
	var done <-chan struct{}
	r.mu.Lock()
	if sw.w != nil {
		done = sw.w.Done()
	}
	r.mu.Unlock()
	var err error
	select {
	case <-sw.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done: // nil, and never ready, while add is still starting the watcher
		err = sw.w.Err()
		if err == nil {
			err = errors.New("the stream's watcher stopped")
		}
	}
	r.remove(id)
	return fmt.Errorf("events: subscribe %s/%s: %w", sw.ref.scope, sw.ref.stream, err)
}

// remove drops a subscription and, after its stream's last, the watcher.
func (r *Router) remove(id SubID) {
	r.mu.Lock()
	rs := r.subs[id]
	if rs == nil {
		r.mu.Unlock()
		return
	}
	delete(r.subs, id)
	r.index.Remove(id)
	r.noteDurableUserLocked(rs, -1)
	if rs.announced() && r.countLocked(rs.sub.Anchor.Token(), -1) {
		defer r.region.announce(rs.sub.Anchor.Token())
	}
	ref := streamRef{rs.sub.Anchor.Scope, rs.sub.Anchor.Stream}
	sw := r.watches[ref]
	var stop *streamWatch
	if sw != nil {
		sw.refs--
		if sw.refs == 0 {
			delete(r.watches, ref)
			if sw.w != nil { // else add is still starting it and will stop it
				stop = sw
			}
		}
	}
	r.mu.Unlock()
	r.forget(id)
	if stop != nil {
		r.stopWatch(stop)
	}
}

// forget asks the loop to drop the subscription's windows and counts.
func (r *Router) forget(id SubID) {
	select {
	case r.in <- routed{ev: Event{ID: string(id)}, count: -1}:
	case <-r.base.Run().Done():
	}
}

func (r *Router) stopWatch(sw *streamWatch) {
	sw.cancel() // a callback blocked on the loop's queue returns
	ctx, cancel := context.WithTimeout(context.Background(), stopWatchTimeout)
	defer cancel()
	if err := sw.w.Stop(ctx); err != nil {
		r.log.Warn("events: stopping a stream's watcher", "scope", sw.ref.scope, "stream", sw.ref.stream, "err", err)
	}
}

// onChange turns a watcher's event into changes for the loop. It runs on
// the watcher's goroutine, which owns sw's key maps.
func (r *Router) onChange(ctx context.Context, sw *streamWatch, e persist.Event) {
	send := func(rt routed) {
		select {
		case r.in <- rt:
		case <-ctx.Done():
		}
	}
	switch e.Kind {
	case persist.EventSet:
		m := e.Msg
		if m.Key != "" {
			if old, ok := sw.keySeq[m.Key]; ok {
				delete(sw.seqKey, old) // replaced: its delete is no event
			}
			sw.keySeq[m.Key] = m.Seq
		}
		sw.seqKey[m.Seq] = m.Key
		if !sw.caughtUp {
			return
		}
		send(routed{ev: Event{
			ID: sw.id(m.Seq), Subject: Subject{sw.ref.scope, sw.ref.stream, m.Key},
			Op: OpSet, Seq: m.Seq, Value: m.Value, TS: m.Time,
		}})
	case persist.EventDelete:
		// A row replaced by a newer one of its key comes as a delete
		// after the set that replaced it (the watcher's order, whether
		// the feed or a read brought them), and is no event: the set is.
		now := r.cfg.Clock.Now().UnixMilli()
		for _, seq := range e.Seqs {
			key, ok := sw.seqKey[seq]
			if !ok {
				continue // a row replaced by a newer one of its key
			}
			delete(sw.seqKey, seq)
			if key != "" && sw.keySeq[key] == seq {
				delete(sw.keySeq, key)
			}
			if !sw.caughtUp {
				continue
			}
			send(routed{ev: Event{
				ID: sw.id(seq) + DeleteIDSuffix, Subject: Subject{sw.ref.scope, sw.ref.stream, key},
				Op: OpDelete, Seq: seq, TS: now,
			}})
		}
	case persist.EventCaughtUp:
		sw.caughtUp = true
		sw.readyOnce.Do(func() { close(sw.ready) })
	case persist.EventSkipped:
		if sw.caughtUp {
			ref := sw.ref
			send(routed{gapAll: &ref, reason: ReasonFeedLoss, count: int(min(e.Count, 1<<31-1))})
		}
	case persist.EventEnded:
		r.log.Warn("events: a stream's watcher ended", "scope", sw.ref.scope, "stream", sw.ref.stream, "err", e.Err)
	}
}

// DeleteIDSuffix ends the id of a delete: the removed row's set is
// STREAM#SEQ, and its delete STREAM#SEQ/delete. A `single` delivery's entry
// is its change's id, so an ack of the set sent again (its answer lost)
// can never settle the delete of the same row, in flight after it.
const DeleteIDSuffix = "/delete"

func (sw *streamWatch) id(seq uint64) string {
	return Subject{Scope: sw.ref.scope, Stream: sw.ref.stream}.String() + "#" + strconv.FormatUint(seq, 10)
}

// loop owns the coalescer and the limiter: it matches each change, holds
// it in its window, and delivers what is due.
func (r *Router) loop(ctx context.Context) {
	defer close(r.done)
	var timer forward.Timer
	var matches []Match
	var due []Coalesced[pending]
	var expired []SubID
	// arm schedules a tick for the earliest window's end. The timer is
	// the config's clock's, so a test's fake clock drives the windows; a
	// window already over ticks at once instead of waiting for a clock
	// that may not move again.
	arm := func() {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		next, ok := r.coal.Next()
		if r.single != nil {
			if exp, eok := r.single.NextExpiry(); eok && (!ok || exp.Before(next)) {
				next, ok = exp, true
			}
		}
		if !ok {
			return
		}
		if d := next.Sub(r.cfg.Clock.Now()); d > 0 {
			timer = r.cfg.Clock.AfterFunc(d, r.wake)
			// The clock may have passed next between the reading and the
			// timer's start; the timer, set from the clock's later now,
			// would then wait a window too long (for a test's clock, which
			// moves once, forever).
			if next.After(r.cfg.Clock.Now()) {
				return
			}
		}
		r.wake()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case rt := <-r.in:
			r.take(rt, &matches)
			// Take what else is queued before re-arming, so a burst costs
			// one timer reset.
			for drained := false; !drained; {
				select {
				case rt := <-r.in:
					r.take(rt, &matches)
				default:
					drained = true
				}
			}
			due = r.flush(due[:0])
			arm()
			r.publishSingle()
		case <-r.tick:
			due = r.flush(due[:0])
			if r.single != nil {
				expired = r.single.Expired(r.cfg.Clock.Now(), expired[:0])
				for _, id := range expired {
					r.dispatch(id)
				}
			}
			arm()
			r.publishSingle()
		}
	}
}

// publishSingle makes the lease table's totals what Stats reads. It runs
// on the loop, which owns the table.
func (r *Router) publishSingle() {
	if r.single == nil {
		return
	}
	w, f := r.single.Totals()
	r.singleBacklog.Store(int64(w))
	r.singleLeases.Store(int64(f))
}

// wake asks the loop to deliver the windows that ended; a tick already
// waiting covers this one.
func (r *Router) wake() {
	select {
	case r.tick <- struct{}{}:
	default:
	}
}

// take puts one change (or a forget, or a feed loss) into the windows,
// and hands what peer regions watch to the region.
func (r *Router) take(rt routed, matches *[]Match) {
	now := r.cfg.Clock.Now()
	switch {
	case rt.do != nil:
		rt.do()
		return
	case rt.count < 0: // forget
		id := SubID(rt.ev.ID)
		r.coal.Drop(id)
		r.lim.Forget(id)
		if r.single != nil {
			r.single.Drop(id)
			delete(r.last, id)
			delete(r.singleTop, id)
			delete(r.singleSaved, id)
			delete(r.singleGen, id)
			delete(r.windowLow, id)
		}
		if r.region != nil {
			r.region.forgetHanded(id)
		}
		return
	case rt.gapAll != nil:
		r.mu.Lock()
		var subs []*Sub
		var remote []string
		for _, rs := range r.subs {
			if rs.sub.Anchor.Scope != rt.gapAll.scope || rs.sub.Anchor.Stream != rt.gapAll.stream {
				continue
			}
			switch {
			case rs.announced(): // a session's, or a durable row's
				subs = append(subs, rs.sub)
			case !rt.remote:
				remote = append(remote, rs.sub.Anchor.Token())
			}
		}
		r.mu.Unlock()
		subj := Subject{Scope: rt.gapAll.scope, Stream: rt.gapAll.stream}
		for _, sub := range subs {
			g := &Gap{Reason: rt.reason, Subject: subj, Sub: sub.ID, Count: rt.count, From: now.UnixMilli(), To: now.UnixMilli()}
			r.coal.AddMerged(now, sub.ID, "\x00gap/"+string(rt.reason), pending{gap: g, sub: sub}, mergeGaps)
		}
		if len(remote) > 0 {
			r.region.forwardGap(remote, subj, rt.reason, rt.count, now.UnixMilli())
		}
		return
	}
	r.changes.Add(1)
	ev := rt.ev
	ev.Coalesced = 1
	*matches = r.index.Match((*matches)[:0], ev.Subject, ev.Op)
	subject := ev.Subject.String()
	var remote []string
	// One copy of the change for every subscription it matches: flush
	// copies it again only for a window that coalesced more than it, and
	// a gateway that sees one event in many deliveries encodes it once.
	var shared *Event
	for _, m := range *matches {
		if tok, ok := remoteToken(m.Sub.ID); ok {
			if !rt.remote { // hop 1: what came from a peer goes no further
				remote = append(remote, tok)
			}
			continue
		}
		if m.Gap != "" {
			g := &Gap{Reason: m.Gap, Subject: ev.Subject, Sub: m.Sub.ID, Count: 1, From: ev.TS, To: ev.TS}
			key := "\x00gap/" + string(m.Gap) + "/" + subject
			r.coal.AddMerged(now, m.Sub.ID, key, pending{gap: g, sub: m.Sub}, mergeGaps)
			r.noteWindow(m.Sub.ID, key, &ev)
			continue
		}
		if shared == nil {
			e := ev
			shared = &e
		}
		r.coal.Add(now, m.Sub.ID, subject, pending{ev: shared, sub: m.Sub})
		r.noteWindow(m.Sub.ID, subject, &ev)
	}
	if len(remote) > 0 {
		r.region.forwardEvent(remote, &ev)
	}
}

// mergeGaps folds a marker into the one already in its window: the
// counts add up, and the span covers both.
func mergeGaps(old, v pending) pending {
	if old.gap == nil || v.gap == nil {
		return v
	}
	g := *v.gap
	g.Count += old.gap.Count
	g.From = min(g.From, old.gap.From)
	g.To = max(g.To, old.gap.To)
	return pending{gap: &g, sub: v.sub}
}

// flush delivers every window that ended, within the rate limits.
func (r *Router) flush(due []Coalesced[pending]) []Coalesced[pending] {
	now := r.cfg.Clock.Now()
	due = r.coal.Due(now, due)
	for _, d := range due {
		r.coalesced.Add(uint64(d.Events - 1))
		low := r.closeWindow(d.Sub, d.Subject)
		r.mu.Lock()
		rs := r.subs[d.Sub]
		r.mu.Unlock()
		if rs == nil || d.Value.sub != nil && d.Value.sub != rs.sub {
			continue // unsubscribed, or replaced, while its window was open
		}
		if d.Value.gap != nil {
			g := *d.Value.gap // the window's markers, summed (mergeGaps)
			g.Sub = SubID(rs.clientID)
			r.deliverGap(rs, &g, low)
			continue
		}
		ev := d.Value.ev // shared by the change's windows: never modified
		if ev.Coalesced != d.Events {
			e := *ev
			e.Coalesced = d.Events
			ev = &e
		}
		limit := r.cfg.BroadcastPerMinute
		if rs.durable != nil && rs.durable.Mode == ModeSingle {
			limit = SinglePerMinute
		}
		ok, gap := r.lim.Allow(now, d.Sub, limit)
		switch {
		case ok:
			r.deliveries.Add(1)
			r.send(rs, Delivery{Sub: rs.clientID, Event: ev}, 0)
		case gap:
			r.rateDrops.Add(uint64(d.Events))
			r.deliverGap(rs, &Gap{Reason: ReasonDeliveryRateLimit, Subject: ev.Subject, Sub: SubID(rs.clientID), Count: d.Events, From: ev.TS, To: ev.TS}, low)
		default:
			r.rateDrops.Add(uint64(d.Events))
		}
	}
	return due
}

// deliverGap counts and sends the marker g; low is as send's.
func (r *Router) deliverGap(rs *routerSub, g *Gap, low uint64) {
	r.gapMu.Lock()
	r.gaps[g.Reason]++
	r.gapMu.Unlock()
	r.send(rs, Delivery{Sub: rs.clientID, Gap: g}, low)
}

// send hands a delivery to its subscription: a session's own, every open
// session of a broadcast row's user, or a `single` row's lease table.
// low, for a marker, is the lowest seq of this region's stream among the
// changes it stands for (0: none known), which a `single` subscription's
// cursor stays below until it is acked (saveCursor). It runs on the loop.
func (r *Router) send(rs *routerSub, d Delivery, low uint64) {
	switch {
	case rs.session != nil:
		rs.session.deliver(d)
	case rs.durable == nil: // a peer's stand-in: forwarded, never delivered here
	case rs.durable.Mode == ModeBroadcast:
		d.Mode = ModeBroadcast
		for _, s := range r.sessionsOf(rs.sub.Owner) {
			s.deliver(d)
		}
		if r.region != nil {
			// And to every peer that may hold a session of the user: at
			// most once, as here; a peer without one answers noSocket.
			var it *forward.Delivery
			for _, p := range r.region.presentPeers(rs.sub.Owner) {
				if it == nil {
					it = encodeDelivery(r.region.cfg.Self, rs.sub.Owner, d)
				}
				r.region.pushDelivery(p, it)
			}
		}
	default:
		now := r.cfg.Clock.Now().UnixMilli()
		if d.Event != nil {
			if d.Event.Op == OpDelete {
				r.single.PushNew(rs.sub.ID, d.Event.ID, pending{ev: d.Event}, d.Event.TS)
			} else {
				r.single.Push(rs.sub.ID, d.Event.ID, pending{ev: d.Event}, d.Event.TS)
			}
			if d.Event.Origin == "" {
				r.noteTop(rs.sub.ID, d.Event.Seq)
			}
		} else {
			r.single.PushMarker(rs.sub.ID, "gap-"+strconv.FormatInt(now, 10)+"-"+string(d.Gap.Reason), d.Gap, pending{gap: d.Gap, low: low}, now)
		}
		r.dispatch(rs.sub.ID)
	}
}
