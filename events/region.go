package events

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/forward"
)

// Defaults of RegionConfig.
const (
	// AnnounceDefault is how often a region tells its peers again every
	// anchor token its sessions watch, so a peer that restarted (or lost a
	// watch item) learns them without waiting for a change.
	AnnounceDefault = 30 * time.Second
	// MaxRemoteValueBytes is the largest value an event carries to another
	// region; a larger one crosses without it (the far side reads it with a
	// get), which keeps every item within the forward queue's bound.
	MaxRemoteValueBytes = 96 << 10
	// StandInTimeoutDefault bounds starting the stream watcher a peer's
	// watch needs (RegionConfig.StandInTimeout).
	StandInTimeoutDefault = 30 * time.Second
	// MaxRemoteTokensDefault bounds the anchor tokens one peer watches
	// here (RegionConfig.MaxRemoteTokens).
	MaxRemoteTokensDefault = 100_000
	// MaxRemoteEntriesDefault bounds the `single` deliveries of one peer
	// this region remembers for its sessions' acks
	// (RegionConfig.MaxRemoteEntries). They are one per (user,
	// subscription) delivered to within RemoteEntryTTL: a real load stays
	// far below it (a user holds at most DurableQuotaDefault rows, and
	// only the users connected here count), while a peer sending without
	// end holds at most this many.
	MaxRemoteEntriesDefault = 100_000
)

// RegionConfig joins a router to its peer regions over the forward queue
// (docs/events.md, "Across regions"). The router announces the anchor
// tokens its sessions watch (watch add when the first session subscribes
// on one, drop after the last, and every token again each Announce), and
// keeps, per token, the peers that announced it: a change matching a token
// a peer watches goes to that peer as a session-only event item, which the
// peer matches against its own session subscriptions and never forwards
// again. A peer answers noWatch for tokens it no longer watches, which
// prunes them; an announcement not renewed within RemoteTTL expires.
//
// Durable rows are held by the region that stores them: their anchors are
// announced like sessions', and their deliveries go to the user's sessions
// in the peers as delivery items, acked back as ack items, with presence
// and subscription bumps and noSocket replies keeping track of where the
// user is (deliver.go).
type RegionConfig struct {
	// Self is this region's name. Required.
	Self string
	// Peers are the other regions' names (not Self). Required.
	Peers []string
	// Push queues an item for a peer: a forward.PeerQueue's Push.
	// Required.
	Push func(peer string, it forward.Item)
	// Announce is how often every watched token is announced again. Zero
	// means AnnounceDefault.
	Announce time.Duration
	// RemoteTTL is how long a peer's announcement holds without renewal.
	// Zero means three Announce periods.
	RemoteTTL time.Duration
	// StandInTimeout bounds starting the stream watcher of a token a peer
	// watches (its first read, when persist is slow or down); one that
	// fails is started again at the peer's next announcement. Zero means
	// StandInTimeoutDefault.
	StandInTimeout time.Duration
	// MaxRemoteTokens bounds the anchor tokens one peer may watch here at
	// once. Each costs an entry, a stand-in subscription and, on a stream
	// not yet watched, a stream watcher, for as long as the peer renews
	// it: a peer announcing without end (a bug, an older build) would
	// otherwise hold this region's memory and watchers without bound. An
	// announcement of a new token past it is refused, counted
	// (RegionStats.RemoteRefused) and logged at most once a round per
	// peer; renewals of the tokens held go on. Zero means
	// MaxRemoteTokensDefault.
	MaxRemoteTokens int
	// MaxRemoteEntries bounds the `single` deliveries from one peer the
	// region remembers at once, by (user, subscription), for
	// RemoteEntryTTL, so that a session's ack goes back to the peer. A
	// peer sending deliveries of ever new subscriptions for users
	// connected here (a bug, or whoever holds the forward secret) would
	// otherwise grow that memory at its send rate. A delivery past it of
	// a subscription not remembered is not handed to a session, counted
	// (RegionStats.RemoteEntriesRefused) and logged at most once a round
	// per peer; its home region hands it out again when its lease ends,
	// so a `single` delivery still comes at least once, once the peer's
	// remembered deliveries age out. Zero means MaxRemoteEntriesDefault.
	MaxRemoteEntries int
}

// RegionStats counts what a region exchanged with its peers.
type RegionStats struct {
	EventsOut  uint64 // event items pushed to peers
	EventsIn   uint64 // event items received from peers
	WatchesOut uint64 // watch items pushed (add and drop, announcements included)
	WatchesIn  uint64 // watch items received
	NoWatch    uint64 // tokens pruned on a peer's noWatch
	Expired    uint64 // peer announcements that expired unrenewed
	Remote     int    // (token, peer) pairs watched remotely now
	// RemoteRefused counts peers' announcements of a new token refused
	// because the peer held MaxRemoteTokens already.
	RemoteRefused uint64
	// RemoteEntriesRefused counts peers' `single` deliveries not handed
	// to a session because their peer had MaxRemoteEntries remembered
	// here already.
	RemoteEntriesRefused uint64
	// RemoteByPeer is Remote by peer: the tokens each peer watches here.
	RemoteByPeer map[string]int
	GapMarkers   uint64 // gap marker items pushed in place of shed or lost events
	GapsFromFar  uint64 // gap marker items received

	// Durable deliveries (docs/events.md, "Durable deliveries across
	// regions").
	DeliveriesOut uint64 // delivery items pushed to peers
	DeliveriesIn  uint64 // delivery items received
	NoSocketOut   uint64 // of those, answered noSocket (no session of the user here)
	NoSocket      uint64 // (user, peer) pairs marked absent on a peer's noSocket
	AcksOut       uint64 // ack items pushed to the region holding the lease
	AcksIn        uint64 // ack items that settled (or re-settled) a lease here
	AcksRefused   uint64 // ack items for no delivery in flight here
	BumpsOut      uint64 // bump items pushed (presence and subscription)
	BumpsIn       uint64 // bump items received
	BadItems      uint64 // delivery items received that were not ours
}

// region is a router's side of its peers.
type region struct {
	cfg RegionConfig
	clk forward.Clock
	r   *Router

	mu      sync.Mutex
	remote  map[string]map[string]time.Time // token -> peer -> when its announcement expires
	held    map[string]int                  // peer -> the tokens of remote it watches (bounded by MaxRemoteTokens)
	warned  map[string]bool                 // peers whose refusal was logged this round
	absent  map[string]map[string]time.Time // user -> peer that answered noSocket -> until when it is passed over
	handed  map[string]*handedOut           // "USER/ID" -> its `single` delivery sent to peers (deliver.go); owned by the router's loop
	timer   forward.Timer
	stopped bool

	// warnedEntries are the peers whose deliveries' refusal (past
	// MaxRemoteEntries) was logged this round; under mu.
	warnedEntries map[string]bool

	gen atomic.Int64 // of the bumps: from the start's unix milliseconds, so a restart's are larger

	eventsOut, eventsIn, watchesOut, watchesIn, noWatch, expired, gapsOut, gapsIn    atomic.Uint64
	deliveriesOut, deliveriesIn, noSocketOut, noSocket, acksOut, acksIn, acksRefused atomic.Uint64
	bumpsOut, bumpsIn, badItems, remoteRefused, entriesRefused                       atomic.Uint64
}

func newRegion(cfg RegionConfig, clk forward.Clock) (*region, error) {
	switch {
	case cfg.Self == "":
		return nil, errors.New("events: RegionConfig.Self is required")
	case len(cfg.Peers) == 0:
		return nil, errors.New("events: RegionConfig.Peers is empty (a region of its own needs no RegionConfig)")
	case cfg.Push == nil:
		return nil, errors.New("events: RegionConfig.Push is required")
	case slices.Contains(cfg.Peers, cfg.Self):
		return nil, fmt.Errorf("events: region %q is among its own peers", cfg.Self)
	case cfg.Announce < 0 || cfg.RemoteTTL < 0:
		return nil, errors.New("events: negative RegionConfig period")
	case cfg.MaxRemoteTokens < 0:
		return nil, errors.New("events: negative RegionConfig.MaxRemoteTokens")
	case cfg.MaxRemoteEntries < 0:
		return nil, errors.New("events: negative RegionConfig.MaxRemoteEntries")
	}
	if cfg.MaxRemoteTokens == 0 {
		cfg.MaxRemoteTokens = MaxRemoteTokensDefault
	}
	if cfg.MaxRemoteEntries == 0 {
		cfg.MaxRemoteEntries = MaxRemoteEntriesDefault
	}
	if cfg.Announce == 0 {
		cfg.Announce = AnnounceDefault
	}
	if cfg.RemoteTTL == 0 {
		cfg.RemoteTTL = 3 * cfg.Announce
	}
	g := &region{cfg: cfg, clk: clk, remote: map[string]map[string]time.Time{}, held: map[string]int{}, warned: map[string]bool{}, warnedEntries: map[string]bool{}, absent: map[string]map[string]time.Time{}, handed: map[string]*handedOut{}}
	g.gen.Store(clk.Now().UnixMilli())
	return g, nil
}

// start asks every peer for its announcements (a sync: a region that
// restarted holds none, and its writes would reach the peers' sessions
// only from their next round, up to Announce later, lost without a gap
// until then), announces what is watched now and schedules the periodic
// rounds.
func (g *region) start(context.Context) {
	for _, p := range g.cfg.Peers {
		g.cfg.Push(p, &forward.Watch{Op: watchSync})
		g.watchesOut.Add(1)
	}
	g.round()
}

// watchSync is the watch op of a region that started: its peers announce
// their tokens to it at once (docs/forward.md).
const watchSync = "sync"

func (g *region) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.timer != nil {
		g.timer.Stop()
	}
}

// round announces every local token to every peer, expires what peers
// stopped renewing, and schedules the next round.
func (g *region) round() {
	for _, tok := range g.r.localTokens() {
		g.push(&forward.Watch{Op: "add", Token: tok})
	}
	var gone []string
	now := g.clk.Now()
	g.mu.Lock()
	clear(g.warned)
	clear(g.warnedEntries)
	for tok, peers := range g.remote {
		for p, until := range peers {
			if now.After(until) {
				delete(peers, p)
				g.unholdLocked(p)
				g.expired.Add(1)
			}
		}
		if len(peers) == 0 {
			delete(g.remote, tok)
			gone = append(gone, tok)
		}
	}
	if !g.stopped {
		g.timer = g.clk.AfterFunc(g.cfg.Announce, g.round)
	}
	g.mu.Unlock()
	for _, tok := range gone {
		g.r.removeRemote(tok)
	}
	g.r.post(routed{do: g.r.sweepRemote})
}

// push sends a watch item to every peer.
func (g *region) push(w *forward.Watch) {
	for _, p := range g.cfg.Peers {
		g.cfg.Push(p, w)
		g.watchesOut.Add(1)
	}
}

// announce tells the peers whether this region's sessions watch tok now.
func (g *region) announce(tok string) {
	op := "drop"
	if g.r.localWatched(tok) {
		op = "add"
	}
	g.push(&forward.Watch{Op: op, Token: tok})
}

// onWatch takes a peer's announcement.
func (g *region) onWatch(_ context.Context, peer string, w *forward.Watch) {
	if !slices.Contains(g.cfg.Peers, peer) {
		return
	}
	g.watchesIn.Add(1)
	if w.Op == watchSync {
		// The peer started with none of our announcements: it gets them
		// now, not at our next round.
		for _, tok := range g.r.localTokens() {
			g.cfg.Push(peer, &forward.Watch{Op: "add", Token: tok})
			g.watchesOut.Add(1)
		}
		return
	}
	if _, err := ParseAnchor(w.Token); err != nil {
		return // not a token of ours: nothing can match it
	}
	if w.Op == "drop" {
		g.drop(peer, w.Token)
		return
	}
	g.mu.Lock()
	peers := g.remote[w.Token]
	if _, renewal := peers[peer]; !renewal {
		if g.held[peer] >= g.cfg.MaxRemoteTokens {
			warn := !g.warned[peer]
			g.warned[peer] = true
			g.mu.Unlock()
			g.remoteRefused.Add(1)
			if warn {
				g.r.log.Warn("events: a peer region announces more tokens than it may watch here; the new ones are refused",
					"peer", peer, "max_remote_tokens", g.cfg.MaxRemoteTokens, "anchor", w.Token)
			}
			return
		}
		g.held[peer]++
	}
	first := peers == nil
	if first {
		peers = map[string]time.Time{}
		g.remote[w.Token] = peers
	}
	peers[peer] = g.clk.Now().Add(g.cfg.RemoteTTL)
	g.mu.Unlock()
	if first {
		g.r.addRemote(w.Token)
	}
}

// unholdLocked counts one token fewer watched by peer. g.mu is held.
func (g *region) unholdLocked(peer string) {
	if g.held[peer]--; g.held[peer] <= 0 {
		delete(g.held, peer)
	}
}

// drop forgets that peer watches tok.
func (g *region) drop(peer, tok string) bool {
	g.mu.Lock()
	peers := g.remote[tok]
	_, had := peers[peer]
	if had {
		delete(peers, peer)
		g.unholdLocked(peer)
	}
	last := had && len(peers) == 0
	if last {
		delete(g.remote, tok)
	}
	g.mu.Unlock()
	if last {
		g.r.removeRemote(tok)
	}
	return had
}

// forget drops every peer's watch of tok, whose stand-in failed to
// start.
func (g *region) forget(tok string) {
	g.mu.Lock()
	for p := range g.remote[tok] {
		g.unholdLocked(p)
	}
	delete(g.remote, tok)
	g.mu.Unlock()
}

// wants reports whether some peer still watches tok.
func (g *region) wants(tok string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.remote[tok]) > 0
}

// onReply prunes the tokens a peer said it no longer watches.
func (g *region) onReply(peer string, rep forward.Reply) {
	for _, w := range rep.NoWatch {
		if g.drop(peer, w.Token) {
			g.noWatch.Add(1)
		}
	}
}

// peersFor returns the peers that watch any of toks.
func (g *region) peersFor(toks []string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, tok := range toks {
		for p := range g.remote[tok] {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// forwardEvent sends ev to every peer watching one of toks, once each.
func (g *region) forwardEvent(toks []string, ev *Event) {
	peers := g.peersFor(toks)
	if len(peers) == 0 {
		return
	}
	it := encodeRemote(ev)
	for _, p := range peers {
		g.cfg.Push(p, it)
		g.eventsOut.Add(1)
	}
}

// forwardGap sends a gap marker for the stream subj to every peer watching
// one of toks.
func (g *region) forwardGap(toks []string, subj Subject, reason Reason, count int, ts int64) {
	for _, p := range g.peersFor(toks) {
		g.cfg.Push(p, gapItem(subj, reason, count, ts))
		g.gapsOut.Add(1)
	}
}

func (g *region) stats() RegionStats {
	st := RegionStats{
		EventsOut: g.eventsOut.Load(), EventsIn: g.eventsIn.Load(), WatchesOut: g.watchesOut.Load(), WatchesIn: g.watchesIn.Load(),
		NoWatch: g.noWatch.Load(), Expired: g.expired.Load(), GapMarkers: g.gapsOut.Load(), GapsFromFar: g.gapsIn.Load(),
		DeliveriesOut: g.deliveriesOut.Load(), DeliveriesIn: g.deliveriesIn.Load(), NoSocketOut: g.noSocketOut.Load(), NoSocket: g.noSocket.Load(),
		AcksOut: g.acksOut.Load(), AcksIn: g.acksIn.Load(), AcksRefused: g.acksRefused.Load(),
		BumpsOut: g.bumpsOut.Load(), BumpsIn: g.bumpsIn.Load(), BadItems: g.badItems.Load(), RemoteRefused: g.remoteRefused.Load(),
		RemoteEntriesRefused: g.entriesRefused.Load(),
	}
	st.RemoteByPeer = make(map[string]int, len(g.cfg.Peers))
	g.mu.Lock()
	for _, peers := range g.remote {
		st.Remote += len(peers)
		for p := range peers {
			st.RemoteByPeer[p]++
		}
	}
	g.mu.Unlock()
	return st
}

// remotePrefix starts the ids (and owners) of the router's stand-ins for
// peers' watches: one subscription per remotely watched token, whose
// matches are forwarded instead of delivered.
const remotePrefix = "\x00remote/"

func remoteToken(id SubID) (string, bool) {
	return strings.CutPrefix(string(id), remotePrefix)
}

// addRemote indexes a stand-in for a peer's watch of tok and starts its
// stream's watcher, in the background: the receiver that handed over the
// announcement is waiting for its reply.
func (r *Router) addRemote(tok string) {
	a, err := ParseAnchor(tok)
	if err != nil {
		return
	}
	id := SubID(remotePrefix + tok)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(r.base.Run(), cmp.Or(r.region.cfg.StandInTimeout, StandInTimeoutDefault))
		defer cancel()
		err := r.add(ctx, &routerSub{sub: &Sub{ID: id, Owner: string(id), Anchor: a}})
		switch {
		case errors.Is(err, ErrDuplicateSub):
		case err != nil:
			if r.base.Run().Err() == nil {
				r.log.Warn("events: watching for a peer region", "anchor", tok, "err", err)
			}
			// Forgotten, so the peers' next announcement of the token is
			// a first one again, which starts the stand-in again: kept,
			// the announcements only renewed a token nothing forwarded.
			r.region.forget(tok)
		case !r.region.wants(tok):
			r.remove(id) // dropped while its watcher started
		}
	}()
}

func (r *Router) removeRemote(tok string) { r.remove(SubID(remotePrefix + tok)) }

// Sink is what the region's forward.Receiver hands peers' items to: watch
// announcements, events to match against this region's sessions,
// deliveries of peers' durable subscriptions for this region's sessions
// (noSocket when the user has none here), acks of deliveries whose lease
// this region holds, and bumps.
func (r *Router) Sink() forward.Sink {
	return forward.SinkFuncs{
		WatchFunc: func(ctx context.Context, peer string, w *forward.Watch) {
			if r.region != nil {
				r.region.onWatch(ctx, peer, w)
			}
		},
		EventFunc:   r.receive,
		DeliverFunc: r.receiveDelivery,
		AckFunc:     r.receiveAck,
		BumpFunc:    r.receiveBump,
	}
}

// OnReply is the forward.SenderConfig.OnReply of the region's sender: a
// peer's noWatch prunes what it no longer watches, its noSocket the
// peer from the users' delivery targets.
func (r *Router) OnReply(peer string, rep forward.Reply) {
	if r.region != nil {
		r.region.onReply(peer, rep)
		if len(rep.NoSocket) > 0 {
			r.onNoSocket(peer, rep.NoSocket)
		}
	}
}

// RegionStats returns the region's counters (zero without peers).
func (r *Router) RegionStats() RegionStats {
	if r.region == nil {
		return RegionStats{}
	}
	return r.region.stats()
}

// receive takes a peer's event: it goes to this region's session
// subscriptions and the durable rows it is the home of (hop 1: never
// forwarded again), and the reply names the event's anchor tokens nothing
// here watches, so the peer prunes them.
func (r *Router) receive(ctx context.Context, peer string, e *forward.Event) []string {
	ev, gap, ok := decodeRemote(e)
	if !ok {
		return nil
	}
	// Named as the peer's change: a home matches it against its durable
	// rows beside its own stream's changes, whose ids and seqs are of
	// another stream.
	ev.ID, ev.Origin = ev.ID+"@"+peer, peer
	if r.region != nil {
		r.region.eventsIn.Add(1)
	}
	rt := routed{ev: ev, remote: true}
	var noWatch []string
	if gap != nil {
		if r.region != nil {
			r.region.gapsIn.Add(1)
		}
		ref := streamRef{ev.Subject.Scope, ev.Subject.Stream}
		rt = routed{gapAll: &ref, reason: gap.Reason, count: gap.Count, remote: true}
	} else {
		toks := ev.Subject.Anchors(nil)
		for _, tok := range toks {
			if !r.localWatched(tok) {
				noWatch = append(noWatch, tok)
			}
		}
		if len(noWatch) == len(toks) {
			return noWatch // nothing here can take it
		}
	}
	select {
	case r.in <- rt:
	case <-ctx.Done():
	case <-r.base.Run().Done():
	}
	return noWatch
}

// remoteValue is the value of a forwarded change's kv part: the stored
// value (text, or base64 when it is not UTF-8), or, for a gap marker,
// its reason and count.
type remoteValue struct {
	Seq     uint64 `json:"seq,omitempty"`
	Value   string `json:"value,omitempty"`
	Enc     string `json:"enc,omitempty"`
	Omitted bool   `json:"omitted,omitempty"` // the value's form was over MaxRemoteValueBytes (crossingValue)
	Reason  string `json:"reason,omitempty"`
	Count   int    `json:"count,omitempty"`
}

// The kv ops of forwarded changes: the seed's set and del, and gap for a
// marker standing where a region could not deliver (reason and count in
// the value), which the seed's items cannot say.
const (
	remoteSet = "set"
	remoteDel = "del"
	remoteGap = "gap"
)

// maxGapCount bounds the count of a peer's gap marker, as a feed loss's
// is bounded (onChange): far more than a queue can shed, and sums of such
// markers stay within an int.
const maxGapCount = 1<<31 - 1

// encodeRemote is ev as the forward queue carries it: a session-only kv
// event whose key is the subject.
func encodeRemote(ev *Event) *forward.Event {
	v := remoteValue{Seq: ev.Seq}
	op := remoteDel
	if ev.Op == OpSet {
		op = remoteSet
		v.Value, v.Enc, v.Omitted = crossingValue(ev.Value)
	}
	b, _ := json.Marshal(v) // strings and numbers always encode
	return &forward.Event{Family: "kv", ID: ev.ID, TS: ev.TS, KV: &forward.KVChange{KVKey: ev.Subject.String(), Op: op, Value: b}}
}

// crossingValue is how a set's value crosses to a peer: text as it is,
// anything else in base64, and nothing (omitted: the far side reads it
// with a get) when that form, escaped as JSON, is over
// MaxRemoteValueBytes. The bound is on what the item carries, which keeps
// every item within the forward queue's: a 96 KiB binary value is 128
// KiB in base64, and each '<' of a text 6 bytes as JSON.
func crossingValue(value []byte) (text, enc string, omitted bool) {
	if utf8.Valid(value) {
		if jsonTextLen(value) > MaxRemoteValueBytes {
			return "", "", true
		}
		return string(value), "", false
	}
	if base64.StdEncoding.EncodedLen(len(value)) > MaxRemoteValueBytes {
		return "", "", true
	}
	return base64.StdEncoding.EncodeToString(value), "base64", false
}

// jsonTextLen bounds from above the length of valid UTF-8 text inside a
// JSON string as encoding/json writes it (HTML characters escaped).
func jsonTextLen(b []byte) int {
	n := len(b)
	for i, c := range b {
		switch {
		case c == '"' || c == '\\':
			n++
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5 // \u00XX
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			n += 3 // U+2028 and U+2029 are written \u2028, \u2029
		}
	}
	return n
}

// gapItem is a marker for subj's stream.
func gapItem(subj Subject, reason Reason, count int, ts int64) *forward.Event {
	b, _ := json.Marshal(remoteValue{Reason: string(reason), Count: count})
	stream := Subject{Scope: subj.Scope, Stream: subj.Stream}.String()
	return &forward.Event{Family: "kv", ID: "gap:" + stream + "#" + strconv.FormatInt(ts, 10), TS: ts, KV: &forward.KVChange{KVKey: stream, Op: remoteGap, Value: b}}
}

// decodeRemote reads a peer's event item; ok is false for one that is
// not ours (another family, a key that is no subject, an unknown op, an
// id beginning with '@').
func decodeRemote(e *forward.Event) (ev Event, gap *Gap, ok bool) {
	if e.Family != "kv" || e.KV == nil {
		return Event{}, nil, false
	}
	// A change's id begins with its scope. One beginning with '@' would
	// become, as ID@PEER, an entry of a home's `single` row that reads as
	// a peer's delivery handed out under its home's name (remoteEntryID):
	// "@HOME/…" is taken for the home's own entry "…", and never acked.
	if strings.HasPrefix(e.ID, "@") {
		return Event{}, nil, false
	}
	// Any key persist takes crosses, not only those an anchor may name.
	subj, err := ParseSubject(e.KV.KVKey)
	if err != nil {
		return Event{}, nil, false
	}
	var v remoteValue
	if len(e.KV.Value) > 0 && json.Unmarshal(e.KV.Value, &v) != nil {
		return Event{}, nil, false
	}
	ev = Event{ID: e.ID, Subject: subj, Seq: v.Seq, TS: e.TS}
	switch e.KV.Op {
	case remoteSet:
		ev.Op = OpSet
		switch {
		case v.Omitted:
		case v.Enc == "base64":
			b, err := base64.StdEncoding.DecodeString(v.Value)
			if err != nil {
				return Event{}, nil, false
			}
			ev.Value = b
		default:
			ev.Value = []byte(v.Value)
		}
	case remoteDel:
		ev.Op = OpDelete
	case remoteGap:
		r := Reason(v.Reason)
		if !slices.Contains(Reasons, r) || v.Count < 1 {
			return Event{}, nil, false
		}
		// Bounded as a feed loss's count is: the markers of one window
		// add up (mergeGaps), and a peer's near the largest int wrapped
		// the sum to a negative count.
		count := min(v.Count, maxGapCount)
		return ev, &Gap{Reason: r, Subject: subj, Count: count, From: e.TS, To: e.TS}, true
	default:
		return Event{}, nil, false
	}
	return ev, nil, true
}

// ShedToGaps is the OnOverflow (and, with ReasonSendFailed, OnLost) of
// the queue to the peers: the events it drops for a peer become one gap
// marker per stream, carrying how many were lost, so the far side's
// subscribers in those streams learn of it. Other items are left to the
// queue's own accounting.
func ShedToGaps(reason Reason, clk forward.Clock) func(peer string, dropped []forward.Item) []forward.Item {
	if clk == nil {
		clk = forward.WallClock
	}
	return func(_ string, dropped []forward.Item) []forward.Item {
		counts := map[string]int{}
		first := map[string]int64{} // the earliest loss of each stream, unix ms
		var order []string
		for _, it := range dropped {
			e, ok := it.(*forward.Event)
			if !ok {
				continue
			}
			ev, g, ok := decodeRemote(e)
			if !ok {
				continue
			}
			n := 1
			if g != nil {
				n = g.Count
			}
			stream := Subject{Scope: ev.Subject.Scope, Stream: ev.Subject.Stream}.String()
			if _, seen := counts[stream]; !seen {
				order = append(order, stream)
			}
			counts[stream] += n
			// A marker shed or lost again keeps the time of the first
			// event it stands for: stamped when re-made, it said the loss
			// happened when the link came back.
			if ts := ev.TS; ts > 0 && (first[stream] == 0 || ts < first[stream]) {
				first[stream] = ts
			}
		}
		now := clk.Now().UnixMilli()
		out := make([]forward.Item, 0, len(order))
		for _, stream := range order {
			a, _ := ParseAnchor(stream)
			ts := first[stream]
			if ts == 0 {
				ts = now
			}
			out = append(out, gapItem(a.Subject, reason, counts[stream], ts))
		}
		return out
	}
}
