package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/persist"
)

// Defaults of PresenceConfig, the seed system's.
const (
	// PresenceTTLDefault is how long a presence row lives unless refreshed:
	// a region that dies without removing its rows leaves them this long.
	PresenceTTLDefault = 48 * time.Hour
	// PresenceRefreshDefault is the least time between two writes of one
	// row while connections stay.
	PresenceRefreshDefault = 12 * time.Hour
	// LeaveMinDefault and LeaveMaxDefault bound the random delay between
	// the last connection's close and the row's removal: a reload, or a
	// rolling deploy that moves sockets, reconnects within it and writes
	// nothing.
	LeaveMinDefault = 30 * time.Second
	LeaveMaxDefault = 60 * time.Second
)

// MaxPresenceApps bounds the apps one user may have present in a region at
// once: each holds a row in persist (for its TTL, up to 48 h, if the
// region dies) and an entry here, and a client names its app per
// connection (?app=), so without a bound one user varying it would grow
// both without end. A real user's browser tabs of a few apps stay far
// below 16. An app counts from its first connection's Join until its row
// is removed (the delayed leave included), so a client may have to wait
// out the leave delay of an app it closed before a new one is admitted.
const MaxPresenceApps = 16

// ErrTooManyApps is returned by Presence.Join for a connection of an app
// new to its user while the user has MaxPresenceApps apps present in the
// region: no row is written for it.
var ErrTooManyApps = fmt.Errorf("events: too many apps present for one user (at most %d)", MaxPresenceApps)

// PresenceKey is what one presence row is about: a user's app, connected
// in a region.
type PresenceKey struct{ User, App, Region string }

// PresenceStore keeps the presence rows.
type PresenceStore interface {
	// Put writes the row of k, connected since connectedAt (unix
	// milliseconds), to live ttl.
	Put(ctx context.Context, k PresenceKey, connectedAt int64, ttl time.Duration) error
	// Remove deletes the row of k if it is still the one written with
	// connectedAt, and reports whether it did.
	Remove(ctx context.Context, k PresenceKey, connectedAt int64) (bool, error)
}

// PresenceConfig configures a Presence.
type PresenceConfig struct {
	// Region is this region's name, in every row it writes. Required.
	Region string
	// Store keeps the rows. Required.
	Store PresenceStore
	// TTL, Refresh, LeaveMin and LeaveMax: zero means the defaults above.
	TTL, Refresh       time.Duration
	LeaveMin, LeaveMax time.Duration
	// Clock times the delayed leaves. Nil means the wall clock.
	Clock forward.Clock
	// Jitter returns a number in [0, 1) that places a leave's delay
	// between LeaveMin and LeaveMax. Nil means math/rand/v2.
	Jitter func() float64
	// Logger receives store failures of delayed leaves (a Join's failure
	// is its caller's). Nil means slog.Default().
	Logger *slog.Logger
}

// Presence tracks this region's connections per (user, app) and keeps one
// presence row for each that has any: the first connection writes it, the
// rows are refreshed at most every Refresh, and the last connection's
// close removes it after a random delay between LeaveMin and LeaveMax —
// unless a connection came back in between (a reload writes nothing) — and
// only if the row is still the one this region wrote. Safe for concurrent
// use; Close stops the pending leaves.
type Presence struct {
	cfg PresenceConfig
	ctx context.Context // of the delayed leaves' store calls; ends at Close
	end context.CancelFunc
	wg  sync.WaitGroup

	// Counters of Stats.
	writes, removes, reloads, failures, refused atomic.Uint64

	mu     sync.Mutex
	closed bool
	users  map[presenceUser]*presenceState
	// apps counts each user's entries in users: the apps it has present
	// (or whose row waits for its delayed leave), bounded by
	// MaxPresenceApps.
	apps map[string]int
	// over counts the connections of each (user, app) that Join refused
	// (ErrTooManyApps) and that have not left: their Leave uncounts them
	// here, so it never uncounts a connection of the app admitted since.
	// It holds an entry per open refused connection at most.
	over    map[presenceUser]int
	refresh forward.Timer // the next Refresh of its own (refreshLoop)
}

type presenceUser struct{ user, app string }

type presenceState struct {
	conns       int
	connectedAt int64     // of the row written, 0 while none is
	written     time.Time // when it was last written
	writing     bool      // a Join is writing it
	leave       forward.Timer
	gen         uint64 // counts leaves scheduled, so a stale one does nothing
}

// NewPresence returns a tracker with no connections.
func NewPresence(cfg PresenceConfig) (*Presence, error) {
	switch {
	case cfg.Region == "":
		return nil, errors.New("events: PresenceConfig.Region is empty")
	case cfg.Store == nil:
		return nil, errors.New("events: PresenceConfig.Store is nil")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = PresenceTTLDefault
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = PresenceRefreshDefault
	}
	if cfg.LeaveMin <= 0 {
		cfg.LeaveMin = LeaveMinDefault
	}
	if cfg.LeaveMax <= 0 {
		cfg.LeaveMax = LeaveMaxDefault
	}
	if cfg.LeaveMax < cfg.LeaveMin {
		return nil, errors.New("events: PresenceConfig.LeaveMax is below LeaveMin")
	}
	if cfg.Clock == nil {
		cfg.Clock = forward.WallClock
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, end := context.WithCancel(context.Background())
	p := &Presence{cfg: cfg, ctx: ctx, end: end, users: make(map[presenceUser]*presenceState), apps: make(map[string]int), over: make(map[presenceUser]int)}
	p.mu.Lock()
	p.scheduleRefreshLocked()
	p.mu.Unlock()
	return p, nil
}

// refreshEvery is how often a Presence runs Refresh itself: often enough
// that a Join whose write failed is written within a minute, and a row
// within a minute of its Refresh, and no more (a pass over its users in
// memory writes nothing until one is due).
func (p *Presence) refreshEvery() time.Duration { return min(p.cfg.Refresh/12, time.Minute) }

func (p *Presence) scheduleRefreshLocked() {
	if !p.closed {
		p.refresh = p.cfg.Clock.AfterFunc(p.refreshEvery(), p.refreshLoop)
	}
}

// refreshLoop runs Refresh and schedules the next one, until Close.
// Without it a connection that stays lost its row at its TTL (a leave
// announced for a user still there), and a failed first write was never
// made again.
func (p *Presence) refreshLoop() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	if err := p.Refresh(p.ctx); err != nil && p.ctx.Err() == nil {
		p.cfg.Logger.Warn("presence: refresh failed", "err", err)
	}
	p.mu.Lock()
	p.scheduleRefreshLocked()
	p.mu.Unlock()
}

// Join counts a connection of user's app. The first one (with no row
// written, and none pending removal) writes the row; a row older than
// Refresh is written again. A failed write is returned, and the next Join
// or Refresh tries again. The first connection of an app while the user
// has MaxPresenceApps others present is refused (ErrTooManyApps): it
// writes nothing and is not present. The connection counts in every case
// (after Close too), so every Join is paired with a Leave.
func (p *Presence) Join(ctx context.Context, user, app string) error {
	k := presenceUser{user, app}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	st := p.users[k]
	if st == nil {
		if p.apps[user] >= MaxPresenceApps {
			p.over[k]++
			p.mu.Unlock()
			p.refused.Add(1)
			return fmt.Errorf("presence of %q (%s): %w", user, app, ErrTooManyApps)
		}
		st = &presenceState{}
		p.users[k] = st
		p.apps[user]++
	}
	st.conns++
	if p.closed {
		p.mu.Unlock()
		return errors.New("events: presence is closed")
	}
	if st.leave != nil {
		// A connection came back before the leave: the row stays.
		p.reloads.Add(1)
		st.leave.Stop()
		st.leave = nil
		st.gen++
	}
	if st.writing || (st.connectedAt != 0 && now.Sub(st.written) < p.cfg.Refresh) {
		p.mu.Unlock()
		return nil
	}
	connectedAt := st.connectedAt
	if connectedAt == 0 {
		connectedAt = now.UnixMilli()
	}
	st.writing = true
	p.mu.Unlock()

	err := p.cfg.Store.Put(ctx, PresenceKey{user, app, p.cfg.Region}, connectedAt, p.cfg.TTL)

	p.count(err)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wroteLocked(k, st, connectedAt, now, err)
	if err != nil {
		return fmt.Errorf("presence of %q (%s): %w", user, app, err)
	}
	return nil
}

// wroteLocked ends a write of k's row that ended with err. Leave leaves a
// row being written to its writer, so when every connection left
// meanwhile the writer schedules the removal, whether or not its write
// succeeded: a failed refresh leaves the row written before it, and a
// failed first write may have stored the row all the same (the removal
// only takes the row of this connectedAt).
func (p *Presence) wroteLocked(k presenceUser, st *presenceState, connectedAt int64, now time.Time, err error) {
	st.writing = false
	if err == nil {
		st.connectedAt, st.written = connectedAt, now
	}
	if st.conns > 0 || st.leave != nil {
		return
	}
	if st.connectedAt == 0 {
		st.connectedAt = connectedAt
	}
	p.scheduleLeaveLocked(k, st)
}

// Leave uncounts a connection of user's app; the last one schedules the
// row's removal after a random delay.
func (p *Presence) Leave(user, app string) {
	k := presenceUser{user, app}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.over[k]; n > 0 {
		// A refused connection's. Connections of one app are alike: when
		// one admitted later is still counted, it stands for the refused
		// one still open, which is as present.
		if n == 1 {
			delete(p.over, k)
		} else {
			p.over[k] = n - 1
		}
		return
	}
	st := p.users[k]
	if st == nil || st.conns == 0 {
		return
	}
	st.conns--
	if st.conns > 0 || p.closed {
		return
	}
	if st.connectedAt == 0 && !st.writing {
		p.dropLocked(k) // no row was written: nothing to remove
		return
	}
	if !st.writing {
		p.scheduleLeaveLocked(k, st)
	}
}

// dropLocked forgets k's entry, which gives its place among its user's
// MaxPresenceApps back. p.mu is held.
func (p *Presence) dropLocked(k presenceUser) {
	delete(p.users, k)
	if p.apps[k.user]--; p.apps[k.user] <= 0 {
		delete(p.apps, k.user)
	}
}

func (p *Presence) scheduleLeaveLocked(k presenceUser, st *presenceState) {
	d := p.cfg.LeaveMin + time.Duration(p.cfg.Jitter()*float64(p.cfg.LeaveMax-p.cfg.LeaveMin))
	st.gen++
	gen := st.gen
	st.leave = p.cfg.Clock.AfterFunc(d, func() { p.expire(k, gen) })
}

// expire removes k's row if its leave is still the pending one.
func (p *Presence) expire(k presenceUser, gen uint64) {
	p.mu.Lock()
	st := p.users[k]
	if p.closed || st == nil || st.gen != gen || st.conns > 0 {
		p.mu.Unlock()
		return
	}
	p.dropLocked(k)
	connectedAt := st.connectedAt
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	removed, err := p.cfg.Store.Remove(p.ctx, PresenceKey{k.user, k.app, p.cfg.Region}, connectedAt)
	if err != nil && p.ctx.Err() == nil {
		// The row expires with its TTL.
		p.failures.Add(1)
		p.cfg.Logger.Warn("presence: remove failed", "user", k.user, "app", k.app, "err", err)
	}
	if removed {
		p.removes.Add(1)
	}
}

// Refresh writes again every row older than Refresh whose connections
// stay, and every row a Join failed to write; it returns the first error.
// A Presence calls it itself every minute (refreshLoop), until Close.
func (p *Presence) Refresh(ctx context.Context) error {
	now := p.cfg.Clock.Now()
	type todo struct {
		k           presenceUser
		connectedAt int64
	}
	var list []todo
	p.mu.Lock()
	for k, st := range p.users {
		if st.conns > 0 && !st.writing && (st.connectedAt == 0 || now.Sub(st.written) >= p.cfg.Refresh) {
			ca := st.connectedAt
			if ca == 0 {
				ca = now.UnixMilli()
			}
			st.writing = true
			list = append(list, todo{k, ca})
		}
	}
	p.mu.Unlock()
	var first error
	for _, t := range list {
		err := p.cfg.Store.Put(ctx, PresenceKey{t.k.user, t.k.app, p.cfg.Region}, t.connectedAt, p.cfg.TTL)
		p.count(err)
		p.mu.Lock()
		if st := p.users[t.k]; st != nil {
			p.wroteLocked(t.k, st, t.connectedAt, now, err)
		}
		p.mu.Unlock()
		if err != nil && first == nil {
			first = fmt.Errorf("presence of %q (%s): %w", t.k.user, t.k.app, err)
		}
	}
	return first
}

// count counts a row write that ended with err.
func (p *Presence) count(err error) {
	if err != nil {
		p.failures.Add(1)
		return
	}
	p.writes.Add(1)
}

// PresenceStats is what a Presence did and holds; see Presence.Stats.
type PresenceStats struct {
	Present     int    // (user, app) pairs with a connection here now
	Connections int    // connections of those now (not those Join refused)
	Writes      uint64 // rows written: first connections and refreshes
	Removes     uint64 // rows removed by a last connection's delayed leave
	Reloads     uint64 // delayed leaves called off by a connection coming back
	Failures    uint64 // row writes and removals the store refused
	// Refused counts connections Join refused (ErrTooManyApps): their
	// user had MaxPresenceApps other apps present.
	Refused uint64
}

// Stats is p's counts for /metrics.
func (p *Presence) Stats() PresenceStats {
	st := PresenceStats{Writes: p.writes.Load(), Removes: p.removes.Load(), Reloads: p.reloads.Load(), Failures: p.failures.Load(), Refused: p.refused.Load()}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.users {
		if u.conns > 0 {
			st.Present++
			st.Connections += u.conns
		}
	}
	return st
}

// Connections is the number of connections of user's app that keep it
// present (not those Join refused).
func (p *Presence) Connections(user, app string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.users[presenceUser{user, app}]; st != nil {
		return st.conns
	}
	return 0
}

// Close stops the pending leaves and waits for those running. The rows
// stay: a region that stops (a restart, a deploy) keeps its users present
// until they reconnect elsewhere or the rows' TTL ends.
func (p *Presence) Close() {
	p.mu.Lock()
	p.closed = true
	if p.refresh != nil {
		p.refresh.Stop()
	}
	for _, st := range p.users {
		if st.leave != nil {
			st.leave.Stop()
			st.leave = nil
		}
	}
	p.mu.Unlock()
	p.end()
	p.wg.Wait()
}

// PresenceScopeDefault is the persist scope of PersistPresence's rows.
const PresenceScopeDefault = "presence"

// PersistPresence keeps presence rows in persist: one stream per user in
// Scope (the anchor presence/USER), one key per app and region
// ("APP/REGION"), each a JSON row {"connectedAt": ms} with a TTL. Its
// writes are events like any other: a subscription on presence/USER hears
// joins (set) and leaves (delete).
type PersistPresence struct {
	Client *persist.Client
	// Scope is where the rows live; "" means PresenceScopeDefault.
	Scope string
}

type presenceRow struct {
	ConnectedAt int64  `json:"connectedAt"`
	Region      string `json:"region"`
	App         string `json:"app"`
}

// kv is user's stream of rows. It is Cold: a user's rows are written when
// the first connection of an app opens and removed after the last one
// closes, so the server closes the stream once each request is served
// instead of keeping a file and ~200 KiB open per connected user.
func (s PersistPresence) kv(user string) *persist.KV {
	scope := s.Scope
	if scope == "" {
		scope = PresenceScopeDefault
	}
	return s.Client.KV(scope, user, persist.Cold())
}

// PresenceRowKey is the key of k's row in its user's stream.
func PresenceRowKey(k PresenceKey) string { return k.App + "/" + k.Region }

// Put implements PresenceStore. The stream's allow_msg_ttl is turned on at
// its first row.
func (s PersistPresence) Put(ctx context.Context, k PresenceKey, connectedAt int64, ttl time.Duration) error {
	body, err := json.Marshal(presenceRow{ConnectedAt: connectedAt, Region: k.Region, App: k.App})
	if err != nil {
		return err
	}
	kv := s.kv(k.User)
	_, err = kv.Set(ctx, PresenceRowKey(k), body, persist.SetOptions{TTL: ttl})
	if persist.CodeOf(err) == persist.CodeBadRequest {
		// Most likely a stream that does not allow message TTLs yet.
		on := true
		if _, cerr := kv.Stream().UpdateConfig(ctx, persist.ConfigUpdate{AllowMsgTTL: &on}); cerr != nil {
			return fmt.Errorf("%w (allowing message TTLs: %v)", err, cerr)
		}
		_, err = kv.Set(ctx, PresenceRowKey(k), body, persist.SetOptions{TTL: ttl})
	}
	return err
}

// Remove implements PresenceStore: the row is deleted by its seq, so a row
// written again since (by a new first connection) is left alone.
func (s PersistPresence) Remove(ctx context.Context, k PresenceKey, connectedAt int64) (bool, error) {
	kv := s.kv(k.User)
	m, err := kv.Get(ctx, PresenceRowKey(k))
	if errors.Is(err, persist.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var row presenceRow
	if err := json.Unmarshal(m.Value, &row); err != nil || row.ConnectedAt != connectedAt {
		return false, nil
	}
	seqs, err := kv.Stream().Delete(ctx, persist.Delete{Seqs: []uint64{m.Seq}})
	return len(seqs) == 1, err
}

// PresenceRow is one row List read: where a user is connected, and since
// when (unix milliseconds: the region's first connection of the app).
type PresenceRow struct {
	PresenceKey
	ConnectedAt int64
}

// List returns user's presence rows: where the user is connected.
func (s PersistPresence) List(ctx context.Context, user string) ([]PresenceRow, error) {
	kv := s.kv(user)
	keys, err := kv.Keys(ctx)
	if err != nil {
		return nil, err
	}
	var out []PresenceRow
	for _, key := range keys {
		m, err := kv.Get(ctx, key)
		if errors.Is(err, persist.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var row presenceRow
		if json.Unmarshal(m.Value, &row) == nil {
			out = append(out, PresenceRow{PresenceKey{User: user, App: row.App, Region: row.Region}, row.ConnectedAt})
		}
	}
	return out, nil
}
