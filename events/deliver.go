package events

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
)

// Durable deliveries across regions (docs/events.md, "Durable deliveries
// across regions"). A durable row is held by the region whose persist
// stores it (its home): that region's router matches it — against its own
// changes, and against its peers' changes of the row's anchor, which it
// watches like a session's — and keeps its `single` lease table. A
// delivery goes to the user's sessions in the home region and, as a
// forward.Delivery item, to every peer not known to lack a socket of the
// user (broadcast), or to exactly one of those targets (`single`). The
// peer hands it to its sessions of the user, or answers noSocket, which
// marks the peer absent for the user for PresenceCacheTTL and sends a
// `single` delivery on at once. A client's ack of a remote delivery goes
// back as a forward.Ack item to the home region, which settles the lease.

// Defaults of the cross-region delivery state.
const (
	// PresenceCacheTTL is how long a peer that answered noSocket for a user
	// is passed over for the user's deliveries (the seed system's region
	// cache holds 60 s): a presence bump from the peer ends it sooner.
	PresenceCacheTTL = 60 * time.Second
	// RemoteEntryTTL is how long a region remembers a `single` delivery
	// that came from a peer, so its session's ack can be sent back; an ack
	// later than that is unknown-entry (the lease ran out long before, and
	// the delivery came again).
	RemoteEntryTTL = 10 * time.Minute
)

// The scopes of a forward.Bump, the seed's.
const (
	bumpPresence     = "presence"
	bumpSubscription = "subscription"
)

// userKey is a user's number on the forward wire, whose items and replies
// name users by an int64 (the seed's user ids). Users are names here: the
// name travels in the subscription id ("USER/ID"), and the number lets a
// noSocket reply or a bump, which carry nothing else, name a user — a
// region maps it back to the users whose rows it holds. Two names of one
// number (FNV-1a, 63 bits) would share their prunes and bumps: a probe
// more or fewer, never a delivery to the wrong user.
func userKey(user string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(user))
	k := int64(h.Sum64() &^ (1 << 63))
	if k == 0 {
		k = 1
	}
	return k
}

// remoteDelivery is the event of a forward.Delivery: the delivered event
// (or gap marker) with its `single` attempt. It carries id, subject, op and
// ts at its top level, which is what forward.GapPolicy keeps when it turns
// a shed delivery into a marker (op "gap").
type remoteDelivery struct {
	ID        string `json:"id,omitempty"`
	Subject   string `json:"subject,omitempty"`
	Op        string `json:"op"` // set, del or gap
	Seq       uint64 `json:"seq,omitempty"`
	Value     string `json:"value,omitempty"`
	Enc       string `json:"enc,omitempty"`
	Omitted   bool   `json:"omitted,omitempty"`
	TS        int64  `json:"ts"`
	Coalesced int    `json:"coalesced,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Count     int    `json:"count,omitempty"`
	From      int64  `json:"from,omitempty"`
	To        int64  `json:"to,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
}

// encodeDelivery is d, a delivery of user's durable subscription d.Sub
// held by region self, as the forward queue carries it.
func encodeDelivery(self, user string, d Delivery) *forward.Delivery {
	v := remoteDelivery{Attempt: d.Attempt}
	switch {
	case d.Gap != nil:
		g := d.Gap
		v.ID, v.Op, v.Reason, v.Count, v.From, v.To, v.TS = d.Entry, remoteGap, string(g.Reason), g.Count, g.From, g.To, g.To
		if g.Subject.Scope != "" {
			v.Subject = g.Subject.String()
		}
	case d.Event != nil:
		ev := d.Event
		v.ID, v.Subject, v.Seq, v.TS, v.Coalesced, v.Op = ev.ID, ev.Subject.String(), ev.Seq, ev.TS, ev.Coalesced, remoteDel
		if ev.Op == OpSet {
			v.Op = remoteSet
			v.Value, v.Enc, v.Omitted = crossingValue(ev.Value)
		}
	}
	b, _ := json.Marshal(v) // strings and numbers always encode
	fd := &forward.Delivery{UserID: userKey(user), SubID: user + "/" + d.Sub, Event: b, Origin: self}
	if d.Mode == ModeSingle {
		fd.AckRequired, fd.AckID = true, d.Entry
	}
	return fd
}

// splitRowKey splits "USER/ID", the subscription id of a delivery or an
// ack item, and checks both parts as a durable row does.
func splitRowKey(s string) (user, id string, ok bool) {
	user, id, ok = strings.Cut(s, "/")
	if !ok || user == "" || len(user) > 128 || id == "" || len(id) > 128 {
		return "", "", false
	}
	return user, id, true
}

// decodeDelivery reads a peer's delivery item: the user it is for and the
// delivery as a session gets it. ok is false for one that is not ours, or
// whose user number does not match its user.
func decodeDelivery(fd *forward.Delivery) (user string, d Delivery, ok bool) {
	user, id, ok := splitRowKey(fd.SubID)
	if !ok || userKey(user) != fd.UserID {
		return "", Delivery{}, false
	}
	var v remoteDelivery
	if json.Unmarshal(fd.Event, &v) != nil {
		return "", Delivery{}, false
	}
	d = Delivery{Sub: id, Mode: ModeBroadcast, Attempt: max(v.Attempt, 1)}
	if fd.AckRequired {
		if fd.AckID == "" {
			return "", Delivery{}, false
		}
		d.Mode, d.Entry = ModeSingle, fd.AckID
	}
	var subj Subject
	if v.Subject != "" {
		var err error
		if subj, err = ParseSubject(v.Subject); err != nil {
			return "", Delivery{}, false
		}
	}
	switch v.Op {
	case remoteGap:
		r := Reason(v.Reason)
		if !slices.Contains(Reasons, r) {
			return "", Delivery{}, false
		}
		from, to := v.From, v.To
		if from == 0 && to == 0 { // a marker the queue made: its event's time
			from, to = v.TS, v.TS
		}
		d.Gap = &Gap{Reason: r, Subject: subj, Sub: SubID(id), Count: max(v.Count, 1), From: from, To: to}
		return user, d, true
	case remoteSet, remoteDel:
	default:
		return "", Delivery{}, false
	}
	if v.Subject == "" || v.ID == "" {
		return "", Delivery{}, false
	}
	ev := &Event{ID: v.ID, Subject: subj, Op: OpDelete, Seq: v.Seq, TS: v.TS, Coalesced: max(v.Coalesced, 1)}
	if v.Op == remoteSet {
		ev.Op = OpSet
		switch {
		case v.Omitted:
		case v.Enc == "base64":
			b, err := base64.StdEncoding.DecodeString(v.Value)
			if err != nil {
				return "", Delivery{}, false
			}
			ev.Value = b
		default:
			ev.Value = []byte(v.Value)
		}
	}
	d.Event = ev
	return user, d, true
}

// presentPeers are the peers a delivery of user's goes to: every peer but
// those that answered noSocket for the user within PresenceCacheTTL (and
// sent no presence bump since).
func (g *region) presentPeers(user string) []string {
	now := g.clk.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	gone := g.absent[user]
	if len(gone) == 0 {
		return g.cfg.Peers
	}
	out := make([]string, 0, len(g.cfg.Peers))
	for _, p := range g.cfg.Peers {
		if until, ok := gone[p]; ok && now.Before(until) {
			continue
		}
		delete(gone, p)
		out = append(out, p)
	}
	if len(gone) == 0 {
		delete(g.absent, user)
	}
	return out
}

// setAbsent marks (or, with absent false, unmarks) peer as holding no
// socket of user.
func (g *region) setAbsent(user, peer string, absent bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !absent {
		delete(g.absent[user], peer)
		if len(g.absent[user]) == 0 {
			delete(g.absent, user)
		}
		return
	}
	if g.absent[user] == nil {
		g.absent[user] = map[string]time.Time{}
	}
	g.absent[user][peer] = g.clk.Now().Add(PresenceCacheTTL)
}

// bump tells every peer that user's presence or durable subscriptions
// moved here.
func (g *region) bump(user, scope string) {
	b := &forward.Bump{UserID: userKey(user), Generation: g.gen.Add(1), Scope: scope, Durable: scope == bumpSubscription}
	for _, p := range g.cfg.Peers {
		g.cfg.Push(p, b)
		g.bumpsOut.Add(1)
	}
}

// pushDelivery sends a delivery item to peer. A `single` one is noted as
// handed to peer: only a peer it went to may ack it (receiveAck). It runs
// on the loop.
func (g *region) pushDelivery(peer string, it *forward.Delivery) {
	if it.AckRequired {
		h := g.handed[it.SubID]
		if h == nil || h.entry != it.AckID {
			h = &handedOut{entry: it.AckID}
			g.handed[it.SubID] = h
		}
		if !slices.Contains(h.peers, peer) {
			h.peers = append(h.peers, peer)
		}
	}
	g.cfg.Push(peer, it)
	g.deliveriesOut.Add(1)
}

// handedOut is the `single` delivery of a durable subscription last sent
// to peers: its entry, and every peer an attempt of it went to. A peer
// that had an attempt may ack it after its lease went elsewhere (its
// client did get it); one that never had it may not.
type handedOut struct {
	entry string
	peers []string
}

// handedTo reports whether the `single` delivery entry of the
// subscription "USER/ID" went to peer. It runs on the loop.
func (g *region) handedTo(peer, subID, entry string) bool {
	h := g.handed[subID]
	return h != nil && h.entry == entry && slices.Contains(h.peers, peer)
}

// forgetHanded forgets what went to peers for the subscription id, gone.
// It runs on the loop.
func (g *region) forgetHanded(id SubID) {
	if key, ok := strings.CutPrefix(string(id), durablePrefix); ok {
		delete(g.handed, key)
	}
}

// remoteKey names a `single` delivery that came from a peer: the region
// holding its lease, and the user's subscription there.
type remoteKey struct{ origin, user, sub string }

type remoteEntry struct {
	entry string
	acked bool
	at    time.Time
}

// noteDurableUserLocked counts rs's user among the users whose rows the
// router holds, by wire number. r.mu is held.
func (r *Router) noteDurableUserLocked(rs *routerSub, d int) {
	if rs.durable == nil {
		return
	}
	k := userKey(rs.sub.Owner)
	m := r.durableUsers[k]
	if m == nil {
		m = map[string]int{}
		r.durableUsers[k] = m
	}
	if m[rs.sub.Owner] += d; m[rs.sub.Owner] <= 0 {
		delete(m, rs.sub.Owner)
		if len(m) == 0 {
			delete(r.durableUsers, k)
		}
	}
}

// durableUsersOf returns the users of wire number k whose rows the router
// holds.
func (r *Router) durableUsersOf(k int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.durableUsers[k]))
	for u := range r.durableUsers[k] {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// postCtx hands work to the loop unless ctx (a peer's request) ends first.
func (r *Router) postCtx(ctx context.Context, rt routed) {
	select {
	case r.in <- rt:
	case <-ctx.Done():
	case <-r.base.Run().Done():
	}
}

// receiveDelivery takes a peer's delivery item: noSocket when no session
// of its user is open here; else it goes to them (all, or one for a
// `single` one) from the loop.
func (r *Router) receiveDelivery(ctx context.Context, peer string, fd *forward.Delivery) (noSocket bool) {
	if r.region == nil {
		return false
	}
	user, d, ok := decodeDelivery(fd)
	if !ok {
		r.region.badItems.Add(1)
		return false
	}
	r.region.deliveriesIn.Add(1)
	if len(r.sessionsOf(user)) == 0 {
		r.region.noSocketOut.Add(1)
		return true
	}
	r.postCtx(ctx, routed{do: func() { r.deliverRemote(peer, user, d) }})
	return false
}

// deliverRemote hands a peer's delivery to user's sessions. A session that
// closed since the item came leaves a `single` one to its lease. It runs
// on the loop.
func (r *Router) deliverRemote(origin, user string, d Delivery) {
	sessions := r.sessionsOf(user)
	if len(sessions) == 0 {
		return
	}
	if d.Mode == ModeSingle && !r.rememberRemote(remoteKey{origin, user, d.Sub}, d.Entry) {
		return // its home hands it out again when its lease ends
	}
	if d.Gap != nil {
		r.gapMu.Lock()
		r.gaps[d.Gap.Reason]++
		r.gapMu.Unlock()
	}
	if d.Event != nil {
		nameOrigin(d.Event, origin)
	}
	if d.Mode != ModeSingle {
		for _, s := range sessions {
			s.deliver(d)
		}
		return
	}
	d.Entry = remoteEntryID(origin, d.Entry)
	sessions[(d.Attempt-1)%len(sessions)].deliver(d)
}

// rememberRemote keeps entry, a peer's `single` delivery of k, for its
// ack, and reports whether it may be handed out: not when k is new and its
// peer has MaxRemoteEntries remembered already (counted, and logged once a
// round). It runs on the loop.
func (r *Router) rememberRemote(k remoteKey, entry string) bool {
	if r.remoteIn[k] == nil {
		g := r.region
		if r.remoteInBy[k.origin] >= g.cfg.MaxRemoteEntries {
			g.entriesRefused.Add(1)
			g.mu.Lock()
			warn := !g.warnedEntries[k.origin]
			g.warnedEntries[k.origin] = true
			g.mu.Unlock()
			if warn {
				r.log.Warn("events: a peer region sends `single` deliveries of more subscriptions than this region remembers; the new ones are refused until older ones expire",
					"peer", k.origin, "max_remote_entries", g.cfg.MaxRemoteEntries, "user", k.user, "sub", k.sub)
			}
			return false
		}
		r.remoteInBy[k.origin]++
	}
	r.remoteIn[k] = &remoteEntry{entry: entry, at: r.cfg.Clock.Now()}
	return true
}

// forgetRemote drops k's remembered delivery. It runs on the loop.
func (r *Router) forgetRemote(k remoteKey) {
	if _, ok := r.remoteIn[k]; !ok {
		return
	}
	delete(r.remoteIn, k)
	if r.remoteInBy[k.origin]--; r.remoteInBy[k.origin] <= 0 {
		delete(r.remoteInBy, k.origin)
	}
}

// nameOrigin names ev, a change a peer delivered, as a change of that
// peer's data: ID@PEER with Origin set, as the session path names a peer's
// event, so it is never taken for this region's change of the same seq. A
// change the peer had itself heard from another region keeps that one's
// name (the "@" after its seq).
func nameOrigin(ev *Event, peer string) {
	if i := strings.LastIndexByte(ev.ID, '#'); i >= 0 {
		if _, from, ok := strings.Cut(ev.ID[i:], "@"); ok {
			ev.Origin = from
			return
		}
	}
	ev.ID, ev.Origin = ev.ID+"@"+peer, peer
}

// remoteEntryID is the entry a peer's `single` delivery is handed out
// under here: the peer's entry with the peer's name before it. An entry
// names a change of its home's stream ("scope/stream#seq"), and two
// regions that both hold a row of the user's subscription (a client
// subscribes in whichever region it reaches) have streams of the same
// names with seqs of their own, so the same entry can come from two homes
// at once; the name keeps the ack of one from being taken for the other.
// A local entry never begins with "@" (a scope or "gap-" does), and a
// region's name has no "/".
func remoteEntryID(peer, entry string) string { return "@" + peer + "/" + entry }

// splitRemoteEntry undoes remoteEntryID; ok is false for a local entry.
func splitRemoteEntry(id string) (peer, entry string, ok bool) {
	rest, ok := strings.CutPrefix(id, "@")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// ackRemote sends user's ack of entry of subscription sub back to the
// region that delivered it, if one did: entry is what this region handed
// out (remoteEntryID), and ok is false when no peer's delivery of that
// entry came to this region for user. A second ack of it is a no-op. It
// runs on the loop.
func (r *Router) ackRemote(user, sub, entry string) bool {
	if r.region == nil {
		return false
	}
	peer, entry, ok := splitRemoteEntry(entry)
	if !ok {
		return false
	}
	for _, p := range r.region.cfg.Peers {
		re := r.remoteIn[remoteKey{p, user, sub}]
		if p != peer || re == nil || re.entry != entry {
			continue
		}
		if !re.acked {
			re.acked = true
			r.region.cfg.Push(p, &forward.Ack{UserID: userKey(user), SubID: user + "/" + sub, EntryID: entry})
			r.region.acksOut.Add(1)
		}
		return true
	}
	return false
}

// receiveAck takes a peer's ack of a `single` delivery this region holds
// the lease of: it settles it and the next goes out. An ack of an entry not
// in flight, or that never went to that peer, is refused (counted).
func (r *Router) receiveAck(ctx context.Context, peer string, a *forward.Ack) {
	if r.region == nil {
		return
	}
	user, id, ok := splitRowKey(a.SubID)
	if !ok || userKey(user) != a.UserID || r.single == nil {
		r.region.acksRefused.Add(1)
		return
	}
	sid := durableID(user, id)
	r.postCtx(ctx, routed{do: func() {
		// A peer acks what its sessions were handed: an ack of a delivery
		// held by a session here, or by another peer only, would settle a
		// lease the peer never had.
		if !r.region.handedTo(peer, a.SubID, a.EntryID) {
			r.region.acksRefused.Add(1)
			return
		}
		dup, err := r.single.Ack(sid, a.EntryID)
		if err != nil {
			r.region.acksRefused.Add(1)
			return
		}
		r.region.acksIn.Add(1)
		if !dup {
			r.acks.Add(1)
			r.saveCursor(sid)
			r.dispatch(sid)
		}
	}})
}

// receiveBump takes a peer's bump: a presence bump ends the peer's
// absence for the users of its number whose rows this region holds, and
// what waits for them goes out; a subscription bump (a durable row of the
// user's removed in the peer) forgets the deliveries from the peer this
// region remembers for the user's acks.
func (r *Router) receiveBump(ctx context.Context, peer string, b *forward.Bump) {
	if r.region == nil || !slices.Contains(r.region.cfg.Peers, peer) {
		return
	}
	r.region.bumpsIn.Add(1)
	switch b.Scope {
	case bumpPresence:
		if r.durable == nil {
			return
		}
		for _, u := range r.durableUsersOf(b.UserID) {
			r.region.setAbsent(u, peer, false)
			r.postCtx(ctx, routed{do: func() { r.dispatchOwner(u) }})
		}
	case bumpSubscription:
		if !b.Durable {
			return
		}
		r.postCtx(ctx, routed{do: func() {
			for k := range r.remoteIn {
				if k.origin == peer && userKey(k.user) == b.UserID {
					r.forgetRemote(k)
				}
			}
		}})
	}
}

// onNoSocket takes a peer's noSocket: the peer holds no socket of the
// users of these numbers, so it is passed over for their deliveries, and
// a `single` delivery in flight there goes to the next target now.
func (r *Router) onNoSocket(peer string, refs []forward.SocketRef) {
	for _, ref := range refs {
		for _, u := range r.durableUsersOf(ref.UserID) {
			r.region.setAbsent(u, peer, true)
			r.region.noSocket.Add(1)
			r.post(routed{do: func() { r.redispatchFrom(peer, u) }})
		}
	}
}

// redispatchFrom hands out again user's `single` deliveries in flight at
// peer. It runs on the loop.
func (r *Router) redispatchFrom(peer, user string) {
	if r.single == nil {
		return
	}
	now := r.cfg.Clock.Now()
	for _, id := range r.singleSubsOf(user) {
		if _, busy := r.single.InFlight(id); busy && r.last[id].session == nil && r.last[id].peer == peer {
			r.single.Release(now, id)
			r.dispatch(id)
		}
	}
}

// singleSubsOf lists user's `single` durable subscriptions, sorted.
func (r *Router) singleSubsOf(user string) []SubID {
	r.mu.Lock()
	var ids []SubID
	for id, rs := range r.subs {
		if rs.durable != nil && rs.durable.Mode == ModeSingle && rs.sub.Owner == user {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// sweepRemote forgets peers' deliveries older than RemoteEntryTTL and
// sends out what waits for users whose peers' absence ended (a bump lost
// on the way would otherwise leave it waiting for the user's next
// session). It runs on the loop.
func (r *Router) sweepRemote() {
	now := r.cfg.Clock.Now()
	for k, re := range r.remoteIn {
		if now.Sub(re.at) >= RemoteEntryTTL {
			r.forgetRemote(k)
		}
	}
	if r.single == nil {
		return
	}
	r.mu.Lock()
	var ids []SubID
	for id, rs := range r.subs {
		if rs.durable != nil && rs.durable.Mode == ModeSingle {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		if _, busy := r.single.InFlight(id); busy || r.single.Waiting(id) > 0 {
			r.dispatch(id)
		}
	}
}

// QueueLosses turns what a forward queue to the peers sheds or loses into
// gap markers (docs/events.md): event items into one marker per stream
// (ShedToGaps), broadcast deliveries into one marker per (peer,
// subscription) (forward.GapPolicy); a `single` delivery gets none, since
// it stays leased in its home region and comes again when the lease ends.
// Plug it in with QueueConfig{OnOverflow: l.Overflow, OnTaken: l.Taken,
// OnLost: l.Lost}.
type QueueLosses struct {
	shed, lost func(peer string, items []forward.Item) []forward.Item
	policy     *forward.GapPolicy
}

// NewQueueLosses returns the loss policy of a region's queue. cfg
// configures the delivery markers (forward.GapConfig); its reasons
// default to ReasonBacklogOverflow and ReasonSendFailed, which the event
// markers carry too, and its Clock stamps both.
func NewQueueLosses(cfg forward.GapConfig) *QueueLosses {
	if cfg.Reason == "" {
		cfg.Reason = string(ReasonBacklogOverflow)
	}
	if cfg.LostReason == "" {
		cfg.LostReason = string(ReasonSendFailed)
	}
	return &QueueLosses{
		shed:   ShedToGaps(Reason(cfg.Reason), cfg.Clock),
		lost:   ShedToGaps(Reason(cfg.LostReason), cfg.Clock),
		policy: forward.NewGapPolicy(cfg),
	}
}

// Overflow is a forward.QueueConfig.OnOverflow.
func (l *QueueLosses) Overflow(peer string, dropped []forward.Item) []forward.Item {
	return append(l.shed(peer, dropped), l.policy.Overflow(peer, dropped)...)
}

// Lost is a forward.QueueConfig.OnLost.
func (l *QueueLosses) Lost(peer string, lost []forward.Item, err error) []forward.Item {
	return append(l.lost(peer, lost), l.policy.Lost(peer, lost, err)...)
}

// Taken is a forward.QueueConfig.OnTaken.
func (l *QueueLosses) Taken(peer string, items []forward.Item) { l.policy.Taken(peer, items) }

// Stats are the delivery markers' counters (forward.GapStats).
func (l *QueueLosses) Stats() forward.GapStats { return l.policy.Stats() }
