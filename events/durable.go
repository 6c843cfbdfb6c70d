package events

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// The modes of a durable subscription.
const (
	// ModeBroadcast: every open session of the user gets each delivery.
	ModeBroadcast = "broadcast"
	// ModeSingle: exactly one open session of the user gets each delivery,
	// under a lease, and the next only after its ack (at least once).
	ModeSingle = "single"
)

// Defaults of DurableConfig.
const (
	// DurableScopeDefault and DurableStreamDefault hold the rows: one key
	// USER/ID per durable subscription.
	DurableScopeDefault  = "events"
	DurableStreamDefault = "subscriptions"
	// DurableQuotaDefault bounds one user's durable subscriptions.
	DurableQuotaDefault = 100
	// DurableCursorStreamDefault holds, in the rows' scope, the cursor of
	// each `single` subscription: one key USER/ID (see resume.go).
	DurableCursorStreamDefault = "single-cursors"
)

// Errors of the durable store.
var (
	// ErrQuota: the user holds DurableConfig.Quota durable subscriptions.
	ErrQuota = errors.New("events: durable subscription quota reached")
	// ErrBadRow: a row that is not a durable subscription (bad user, id,
	// anchor, filter or mode).
	ErrBadRow = errors.New("events: bad durable subscription")
)

// DurableConfig configures durable subscriptions.
type DurableConfig struct {
	// Scope and Stream hold the rows. Empty means DurableScopeDefault and
	// DurableStreamDefault.
	Scope, Stream string
	// CursorStream holds the `single` subscriptions' cursors, in Scope.
	// Empty means DurableCursorStreamDefault.
	CursorStream string
	// Quota bounds one user's rows. Zero means DurableQuotaDefault.
	Quota int
	// Lease and Backlog configure `single` delivery (SingleConfig). Zero
	// means LeaseDefault and BacklogDefault.
	Lease   time.Duration
	Backlog int
}

func (c DurableConfig) withDefaults() DurableConfig {
	if c.Scope == "" {
		c.Scope = DurableScopeDefault
	}
	if c.Stream == "" {
		c.Stream = DurableStreamDefault
	}
	if c.CursorStream == "" {
		c.CursorStream = DurableCursorStreamDefault
	}
	if c.Quota == 0 {
		c.Quota = DurableQuotaDefault
	}
	return c
}

// DurableRow is one durable subscription as stored.
type DurableRow struct {
	User    string   `json:"user"`
	ID      string   `json:"id"`
	Anchor  string   `json:"anchor"`
	Ops     []string `json:"ops,omitempty"`
	Glob    string   `json:"glob,omitempty"`
	Mode    string   `json:"mode"`
	Created int64    `json:"created"` // unix milliseconds
	// Gen names a `single` row's cursor: Put sets a new one on a row that
	// starts its cursor afresh and keeps the replaced row's on one that
	// takes its cursor over (continues). The cursor row carries it, and a
	// router's save of a cursor of another Gen is dropped: the row it was
	// made for is gone, replaced or deleted, and its last saves may still
	// be on their way. Put ignores the Gen it is given; "" (a row stored
	// before Gen was) matches a cursor without one.
	Gen string `json:"gen,omitempty"`
}

// key is the row's key in the stream.
func (d DurableRow) key() string { return d.User + "/" + d.ID }

// sameAs reports whether o asks for the subscription d is: the same user,
// id, anchor, filter and mode, whenever either was made.
func (d DurableRow) sameAs(o DurableRow) bool {
	return d.User == o.User && d.ID == o.ID && d.Anchor == o.Anchor && slices.Equal(d.Ops, o.Ops) && d.Glob == o.Glob && d.Mode == o.Mode
}

// parse checks the row and returns its anchor and filter.
func (d DurableRow) parse() (Anchor, Filter, error) {
	if d.User == "" || len(d.User) > 128 || strings.Contains(d.User, "/") {
		return Anchor{}, Filter{}, fmt.Errorf("%w: user %q: want 1 to 128 bytes without '/'", ErrBadRow, d.User)
	}
	if d.ID == "" || len(d.ID) > 128 {
		return Anchor{}, Filter{}, fmt.Errorf("%w: id: want 1 to 128 bytes", ErrBadRow)
	}
	// The row is stored under USER/ID: an id persist refuses in a key (a
	// control character, whitespace at an end) is the row's fault, not
	// the store's, and is no better on a retry.
	if err := persist.ValidKey(d.key()); err != nil {
		return Anchor{}, Filter{}, fmt.Errorf("%w: id %q: %v", ErrBadRow, d.ID, err)
	}
	if d.Mode != ModeBroadcast && d.Mode != ModeSingle {
		return Anchor{}, Filter{}, fmt.Errorf("%w: mode %q: want %s or %s", ErrBadRow, d.Mode, ModeBroadcast, ModeSingle)
	}
	a, err := ParseAnchor(d.Anchor)
	if err != nil {
		return Anchor{}, Filter{}, fmt.Errorf("%w: %v", ErrBadRow, err)
	}
	f, err := ParseFilter(d.Ops, d.Glob)
	if err != nil {
		return Anchor{}, Filter{}, fmt.Errorf("%w: %v", ErrBadRow, err)
	}
	return a, f, nil
}

// DurableStore reads and writes durable subscription rows in persist. The
// routers of a region follow the rows' stream, so a row written through
// any of them (or a command) is live in all of them.
type DurableStore struct {
	Client *persist.Client
	Config DurableConfig
}

func (s DurableStore) kv() *persist.KV {
	c := s.Config.withDefaults()
	return s.Client.KV(c.Scope, c.Stream)
}

// Put stores row (its Created set now if zero), replacing the user's row
// of the same id; a row that asks for what the stored one does is left as
// it is (sameAs). A new row past the user's quota is ErrQuota. The quota
// is checked against the rows stored when Put reads them: two Puts racing
// from two processes may both pass.
func (s DurableStore) Put(ctx context.Context, row DurableRow) error {
	a, f, err := row.parse()
	if err != nil {
		return err
	}
	// Stored as the filter holds them: an op named many times takes one
	// entry, not one per time the client named it.
	row.Ops = nil
	for _, o := range f.Ops {
		row.Ops = append(row.Ops, string(o))
	}
	rows, err := s.List(ctx, row.User)
	if err != nil {
		return err
	}
	var replaced *DurableRow
	for _, r := range rows {
		if r.ID != row.ID {
			continue
		}
		if r.sameAs(row) {
			// The subscription stands as asked: writing it again would
			// make every router replace it, dropping a `single` one's
			// delivery in flight and sending it again. A client that
			// subscribes again after a reconnect changes nothing.
			return nil
		}
		replaced = &r
	}
	c := s.Config.withDefaults()
	if q := c.Quota; replaced == nil && len(rows) >= q {
		return fmt.Errorf("%w (%d for %s)", ErrQuota, q, row.User)
	}
	row.Gen = "" // Put's to set: the cursor's, of a `single` row
	if row.Mode == ModeSingle && continues(replaced, a) {
		row.Gen = replaced.Gen // the same cursor, saved on by the new row
	} else if row.Mode == ModeSingle {
		// A new `single` row starts its cursor at its stream's end now,
		// before the row is stored: a router starting the row reads back
		// from there, so every change committed after Put returns is
		// delivered, even one made before a router has the row live. A
		// row that replaces a broadcast one, or a `single` one in another
		// stream, starts so too: there is no cursor, or one of the other
		// stream's seqs.
		inv, err := s.Client.Stream(a.Scope, a.Stream).Inventory(ctx)
		if err != nil {
			return fmt.Errorf("events: store durable subscription: its stream's end: %w", err)
		}
		// A cursor of its own: the saves still on their way for the row
		// it replaces (or a deleted one of its id) are of another Gen, and
		// are dropped rather than written over it.
		row.Gen = rand.Text()
		b, err := json.Marshal(cursorRow{Seq: inv.Seq, Gen: row.Gen})
		if err != nil {
			return err
		}
		if _, err := s.Client.KV(c.Scope, c.CursorStream).Set(ctx, row.key(), b, persist.SetOptions{}); err != nil {
			return fmt.Errorf("events: store durable subscription: its cursor: %w", err)
		}
	}
	if row.Created == 0 {
		row.Created = time.Now().UnixMilli()
	}
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	if _, err := s.kv().Set(ctx, row.key(), b, persist.SetOptions{}); err != nil {
		return fmt.Errorf("events: store durable subscription: %w", err)
	}
	return nil
}

// continues reports whether a `single` row anchored at a replaces old and
// takes its cursor over: old is a `single` row in the same stream (with
// another anchor in it, or another filter), whose unsettled changes the
// new row delivers as it resumes.
func continues(old *DurableRow, a Anchor) bool {
	if old == nil || old.Mode != ModeSingle {
		return false
	}
	oa, _, err := old.parse()
	return err == nil && oa.Scope == a.Scope && oa.Stream == a.Stream
}

// Delete removes the user's row id and reports whether there was one.
func (s DurableStore) Delete(ctx context.Context, user, id string) (bool, error) {
	key := DurableRow{User: user, ID: id}.key()
	if persist.ValidKey(key) != nil {
		// No row can be stored under it (Put refuses it): asking the
		// store would only fail, and the failure read as a retry.
		return false, nil
	}
	ok, err := s.kv().Delete(ctx, key)
	if err != nil {
		return false, fmt.Errorf("events: delete durable subscription: %w", err)
	}
	return ok, nil
}

// List returns the user's rows.
func (s DurableStore) List(ctx context.Context, user string) ([]DurableRow, error) {
	kv := s.kv()
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, persist.ErrNotFound) {
		return nil, fmt.Errorf("events: list durable subscriptions: %w", err)
	}
	var out []DurableRow
	for _, k := range keys {
		if !strings.HasPrefix(k, user+"/") {
			continue
		}
		m, err := kv.Get(ctx, k)
		if errors.Is(err, persist.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("events: list durable subscriptions: %w", err)
		}
		var row DurableRow
		if json.Unmarshal(m.Value, &row) == nil {
			out = append(out, row)
		}
	}
	return out, nil
}

// durablePrefix starts the ids of durable subscriptions in the index.
const durablePrefix = "\x00durable/"

func durableID(user, id string) SubID { return SubID(durablePrefix + user + "/" + id) }

// durables is a router's follower of the rows.
type durables struct {
	cfg   DurableConfig
	store DurableStore

	mu sync.Mutex
	w  *persist.Watcher

	// Owned by the watcher's callback: the key of each live row's seq, the
	// seq of each key's live row, and the Gen of each key's last `single`
	// row (the cursor a delete of the key removes).
	seqKey map[uint64]string
	keySeq map[string]uint64
	keyGen map[string]string
}

func newDurables(c *persist.Client, cfg DurableConfig) (*durables, error) {
	if cfg.Quota < 0 || cfg.Lease < 0 || cfg.Backlog < 0 {
		return nil, errors.New("events: negative DurableConfig field")
	}
	cfg = cfg.withDefaults()
	return &durables{cfg: cfg, store: DurableStore{Client: c, Config: cfg}, seqKey: map[uint64]string{}, keySeq: map[string]uint64{}, keyGen: map[string]string{}}, nil
}

// follow watches the rows' stream: every row (the history included) is
// indexed, and a deleted one removed.
func (d *durables) follow(ctx context.Context, r *Router) error {
	w, err := r.cfg.Client.Stream(d.cfg.Scope, d.cfg.Stream).Watch(ctx, persist.WatchOptions{}, func(e persist.Event) { d.onRow(ctx, r, e) })
	if err != nil {
		return fmt.Errorf("events: follow durable subscriptions: %w", err)
	}
	d.mu.Lock()
	d.w = w
	d.mu.Unlock()
	return nil
}

func (d *durables) stop() {
	d.mu.Lock()
	w := d.w
	d.mu.Unlock()
	if w != nil {
		ctx, cancel := context.WithTimeout(context.Background(), stopWatchTimeout)
		defer cancel()
		_ = w.Stop(ctx)
	}
}

// onRow applies one change of the rows. It runs on the watcher's
// goroutine, one change at a time, so a row's set and delete apply in
// order; starting a row's stream watcher waits here.
func (d *durables) onRow(ctx context.Context, r *Router, e persist.Event) {
	switch e.Kind {
	case persist.EventSet:
		d.seqKey[e.Msg.Seq] = e.Msg.Key
		d.keySeq[e.Msg.Key] = e.Msg.Seq
		var row DurableRow
		if err := json.Unmarshal(e.Msg.Value, &row); err != nil || row.key() != e.Msg.Key {
			r.log.Warn("events: a durable subscription row that is not one", "key", e.Msg.Key)
			return
		}
		a, f, err := row.parse()
		if err != nil {
			r.log.Warn("events: a durable subscription row that is not one", "key", e.Msg.Key, "err", err)
			return
		}
		id := durableID(row.User, row.ID)
		r.remove(id) // a row written again replaces the one before
		if row.Mode == ModeSingle {
			d.keyGen[e.Msg.Key] = row.Gen
			// The loop saves the new row's cursor under its Gen from
			// here on: after the old row's forget, before any change
			// of the new row reaches it. What it saves before, for the
			// old row, carries the old row's.
			r.post(routed{do: func() { r.singleGen[id] = row.Gen }})
		}
		rs := &routerSub{sub: &Sub{ID: id, Owner: row.User, Anchor: a, Filter: f}, durable: &row, clientID: row.ID}
		if err := r.add(ctx, rs); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("events: a durable subscription could not start", "user", row.User, "id", row.ID, "err", err)
			}
			return
		}
		if row.Mode == ModeSingle {
			r.resume(ctx, rs)
		}
	case persist.EventDelete:
		for _, seq := range e.Seqs {
			key, ok := d.seqKey[seq]
			delete(d.seqKey, seq)
			if !ok {
				continue
			}
			// A row replaced by a newer one of its key was replaced by
			// the set; only a delete of the live row removes it.
			if d.keySeq[key] != seq {
				continue
			}
			delete(d.keySeq, key)
			gen, single := d.keyGen[key]
			delete(d.keyGen, key)
			if user, id, ok := strings.Cut(key, "/"); ok {
				r.remove(durableID(user, id))
				// The cursor goes too (a row made again later starts
				// afresh), handed to the saver by the loop, behind the
				// row's forget: every cursor of the row is saved on the
				// loop, by work queued before the forget (an ack, a
				// window, a resume), so the removal comes after the last
				// of them. Handed over from here it could come before
				// one, which then wrote the deleted row's cursor back.
				// The saver holds it as accepted meanwhile: a stop that
				// ends the loop first still removes the cursor, after
				// the loop's last save (cursorSaver.finish). Only the
				// deleted row's Gen is removed, not the cursor of a row
				// stored again since.
				if single {
					r.saver.accept(key, gen)
					r.post(routed{do: func() { r.saver.del(key, gen) }})
				}
				if r.region != nil {
					// The peers forget the deliveries of the user's they
					// hold for acks: this row's can no longer be settled.
					r.region.bump(user, bumpSubscription)
				}
			}
		}
	}
}

// sessionsOf is user's open sessions.
func (r *Router) sessionsOf(user string) []*Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byOwner[user])
}

// post hands work to the loop.
func (r *Router) post(rt routed) {
	select {
	case r.in <- rt:
	case <-r.base.Run().Done():
	}
}

// dispatch hands a `single` subscription's next delivery (or its delivery
// again, after its lease ran out) to one open session of its user, here or
// (as a delivery item) in a peer region that may hold one: the next one
// along on each attempt, so a redelivery goes to another session when
// there is one. With no target it waits. It runs on the loop.
func (r *Router) dispatch(id SubID) {
	r.mu.Lock()
	rs := r.subs[id]
	var sessions []*Session
	if rs != nil {
		sessions = slices.Clone(r.byOwner[rs.sub.Owner])
	}
	r.mu.Unlock()
	if rs == nil || rs.durable == nil {
		return
	}
	var peers []string
	if r.region != nil {
		peers = r.region.presentPeers(rs.sub.Owner)
	}
	targets := len(sessions) + len(peers)
	if targets == 0 {
		return
	}
	e, ok := r.single.Next(r.cfg.Clock.Now(), id)
	if !ok {
		return
	}
	d := Delivery{Sub: rs.clientID, Mode: ModeSingle, Entry: e.ID, Attempt: e.Attempt, Event: e.Value.ev}
	if e.Gap != nil {
		g := *e.Gap
		g.Sub = SubID(rs.clientID)
		d.Gap = &g
		// The lease table's own markers (backlog_overflow, with no value)
		// are counted when first delivered; the router's (Value.gap) were
		// when they were made (deliverGap, resume).
		if e.Attempt == 1 && e.Value.gap == nil {
			r.gapMu.Lock()
			r.gaps[ReasonBacklogOverflow]++
			r.gapMu.Unlock()
		}
	}
	if e.Attempt > 1 {
		r.redelivered.Add(1)
	}
	// The targets are the user's sessions here, then the peers that may
	// hold one; each delivery takes the one after the subscription's last
	// (the first when the last is gone), so a redelivery goes elsewhere
	// when there is an elsewhere, and deliveries take turns.
	i := 0
	if last, ok := r.last[id]; ok {
		for j := range targets {
			if j < len(sessions) && sessions[j] == last.session || j >= len(sessions) && last.session == nil && peers[j-len(sessions)] == last.peer {
				i = (j + 1) % targets
				break
			}
		}
	}
	if i < len(sessions) {
		r.last[id] = target{session: sessions[i]}
		sessions[i].deliver(d)
		return
	}
	peer := peers[i-len(sessions)]
	r.last[id] = target{peer: peer}
	r.region.pushDelivery(peer, encodeDelivery(r.region.cfg.Self, rs.sub.Owner, d))
}

// target is where a `single` delivery went: a session here, or a peer.
type target struct {
	session *Session
	peer    string
}

// dispatchOwner dispatches every `single` subscription of user.
func (r *Router) dispatchOwner(user string) {
	r.mu.Lock()
	var ids []SubID
	for id, rs := range r.subs {
		if rs.durable != nil && rs.durable.Mode == ModeSingle && rs.sub.Owner == user {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		r.dispatch(id)
	}
}

// Ack settles the `single` delivery entry of the session's user's durable
// subscription sub, and the next goes out. Acking the entry settled last
// again is a no-op (a client resending acks after a reconnect); any other
// entry — one never delivered, another user's, one whose lease ran out and
// was handed out again is still the one to ack — is ErrUnknownEntry.
func (s *Session) Ack(ctx context.Context, sub, entry string) error {
	r := s.r
	if r.single == nil && r.region == nil {
		return fmt.Errorf("%w: this region keeps no durable subscriptions", ErrUnknownEntry)
	}
	if peer, own, ok := splitRemoteEntry(entry); ok && r.region != nil && peer == r.region.cfg.Self {
		// This region's own delivery, handed out by a peer under its
		// name: the client reconnected here and sent its acks again.
		entry = own
	}
	id := durableID(s.owner, sub)
	done := make(chan error, 1)
	r.post(routed{do: func() {
		dup, err := false, fmt.Errorf("%w: this region keeps no durable subscriptions", ErrUnknownEntry)
		if r.single != nil {
			dup, err = r.single.Ack(id, entry)
		}
		if err == nil && !dup {
			r.acks.Add(1)
			r.saveCursor(id)
			r.dispatch(id)
		}
		if errors.Is(err, ErrUnknownEntry) && r.ackRemote(s.owner, sub, entry) {
			// A peer's delivery, given to this user here: the ack goes
			// back to the region holding the lease.
			err = nil
		}
		done <- err
	}})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.base.Run().Done():
		return ErrSessionClosed
	}
}

// Durables is the router's store of durable subscriptions, nil without
// them.
func (r *Router) Durables() *DurableStore {
	if r.durable == nil {
		return nil
	}
	return &r.durable.store
}
