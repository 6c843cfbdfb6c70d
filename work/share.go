package work

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
)

// Sharing the provider's connections.
//
// Every process that talks to the provider keeps one ShareEntry in the
// source's share table, a single record written by compare-and-set on its
// seq. Because every change goes through that one record, the invariant
//
//	sum of Using over the entries <= Limit, at every instant, and
//	no process's pool holds more connections than its Using
//
// holds by construction: a process raises its Using only inside the write
// that checks the total against the others' Using (so two processes cannot
// both grow into the same free connection), resizes its pool only after
// that write, and lowers its Using only to what its pool still holds once
// the pool was resized down (connections in use finish their commands
// first). Grants, computed by every process from the same table, only say
// where each Using should head.

// ErrShareConfig: a ShareConfig is unusable.
var ErrShareConfig = errors.New("work: share: invalid config")

// ShareConfig configures a Share.
type ShareConfig struct {
	// Name names the process in the table, for display. Required. It
	// need not be unique: every Share is its own participant (see
	// ShareEntry.ID), so two processes started with the same name share
	// the limit like any two others.
	Name string
	// Priority weighs the process's part of what is left after every
	// minimum (PriorityCoordinator, PriorityProber, PriorityWorker). Zero
	// gets extra connections only when every positive priority is at its
	// Max. It counts within ±PriorityMax (see Grants).
	Priority int
	// Min is granted before any priority counts, when the minimums fit.
	Min int
	// Max caps the grant. Zero means Limit.
	Max int
	// Limit is the provider's connection limit for the account, the same
	// in every process of the source. Required, at least 1.
	Limit int
	// Every is the round: how often Run heartbeats and recomputes. Zero
	// means ShareEveryDefault.
	Every time.Duration
	// TTL is how long the entry lives without a heartbeat before another
	// writer drops it. Zero means 3×Every. At most ShareTTLMax.
	TTL time.Duration
}

// ShareTTLMax bounds a share entry's TTL: every reader counts a longer
// ttl_ms as ShareTTLMax, so that an entry a buggy participant wrote with a
// TTL of years (or one that overflows a time.Duration) still leaves the
// table, and its connections go to the others, at most this long after its
// last heartbeat. A ShareConfig whose TTL (3×Every unless set) is above it
// is refused: its own entry would be dropped between its renewals.
const ShareTTLMax = 10 * time.Minute

// PriorityMax bounds a share entry's priority: Grants counts a priority
// above it as PriorityMax and one below −PriorityMax as −PriorityMax, so
// that the weighting's products cannot overflow (a priority of
// math.MaxInt, written by a buggy participant, took every connection from
// an equal one). The priorities in use (PriorityCoordinator and the
// others) are far inside it.
const PriorityMax = 1000

func (c ShareConfig) withDefaults() ShareConfig {
	if c.Every <= 0 {
		c.Every = ShareEveryDefault
	}
	if c.TTL <= 0 {
		c.TTL = 3 * c.Every
	}
	if c.Max <= 0 || c.Max > c.Limit {
		c.Max = c.Limit
	}
	return c
}

func (c ShareConfig) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: Name is required", ErrShareConfig)
	case c.Limit < 1:
		return fmt.Errorf("%w: Limit %d, want at least 1", ErrShareConfig, c.Limit)
	case c.Min < 0 || c.Max < 0:
		return fmt.Errorf("%w: negative Min %d or Max %d", ErrShareConfig, c.Min, c.Max)
	case c.Max > 0 && c.Min > c.Max:
		return fmt.Errorf("%w: Min %d above Max %d", ErrShareConfig, c.Min, c.Max)
	case c.TTL > ShareTTLMax:
		return fmt.Errorf("%w: TTL %v above ShareTTLMax %v", ErrShareConfig, c.TTL, ShareTTLMax)
	case c.TTL <= 0 && c.Every > ShareTTLMax/3:
		return fmt.Errorf("%w: Every %v makes a TTL (3×Every) above ShareTTLMax %v", ErrShareConfig, c.Every, ShareTTLMax)
	}
	return nil
}

// ShareResult is what one round changed: the grant before and after.
type ShareResult struct {
	Was, Granted int
}

// Share is one process's part of the provider's connections: it registers
// the process in the share table, heartbeats it, and sizes the process's
// pool to what the table lets it hold. Its methods are safe for concurrent
// use; Round and Leave run one at a time.
type Share struct {
	st   *Store
	pool *nntp.Pool
	cfg  ShareConfig
	id   string // ShareEntry.ID of this Share's entry

	// now is the clock entries are stamped and judged stale by (tests
	// move it).
	now func() time.Time

	round  sync.Mutex // serialises Round and Leave
	lastOK time.Time  // the last successful write of the entry; under round

	obsMu sync.Mutex // protects observed
	// observed is, per entry key, the Seen last read and when (by this
	// process's monotonic clock) it was first read with that value.
	// Staleness is judged by it, not by comparing another host's Seen with
	// the local wall clock: clocks a second apart would otherwise have the
	// host ahead drop the other's entry at every write when the TTL is
	// short, and the host behind keep a dead one for as long as it is ahead.
	observed map[string]observation

	mu      sync.Mutex // protects granted and using
	granted int
	using   int
}

// observation is when an entry's heartbeat was last seen to change.
type observation struct {
	seen int64     // the entry's Seen
	at   time.Time // local, monotonic
}

// NewShare returns the share of the process cfg.Name. pool is the pool
// the share sizes; it is resized to zero at once, so it opens nothing until
// the first Round grants it connections, and from then on only the Share
// may Resize it. pool may be nil for a participant that only reports: it is
// counted in the table, and its Using follows its grant directly, but it
// must hold no connections on the strength of it.
func NewShare(st *Store, pool *nntp.Pool, cfg ShareConfig) (*Share, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	id, err := newShareID()
	if err != nil {
		return nil, err
	}
	if pool != nil {
		pool.Resize(0)
	}
	return &Share{st: st, pool: pool, cfg: cfg, id: id, now: time.Now, observed: map[string]observation{}}, nil
}

// newShareID returns a random entry id: a name is not enough to tell two
// processes apart (the same shard started twice, a restart while the old
// process still drains), and one adopting the other's entry would stop
// counting the other's connections.
func newShareID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("work: share: entry id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// key identifies the entry's participant: its ID, or its Name for an entry
// written without one.
func (e ShareEntry) key() string {
	if e.ID != "" {
		return e.ID
	}
	return e.Name
}

// Granted is the grant of the last round.
func (s *Share) Granted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted
}

// Using is the Using of the entry as last written: how many connections
// the process may hold.
func (s *Share) Using() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.using
}

func (s *Share) set(granted, using int) {
	s.mu.Lock()
	s.granted, s.using = granted, using
	s.mu.Unlock()
}

func (s *Share) resize(n int) {
	if s.pool != nil {
		s.pool.Resize(n)
	}
}

// Round runs one round: it reads the table, drops the entries this
// process has seen go unrenewed for longer than their TTL, renews its own
// entry, computes the
// grants, and moves its Using towards its grant — raised, as far as the
// others' Using leaves room, in the write itself; lowered only to what its
// pool still holds after being resized down — then sizes its pool to
// match. It retries when another process wrote the table first.
//
// When rounds keep failing for half the TTL, so that the others may soon
// drop the entry and hand its connections on, the pool is resized to zero
// until a round succeeds. A round is given min(Every, TTL/2), but at least
// shareRoundMin: one blocked on an unreachable store must end, or the pool
// would never be shrunk before the others hand its connections on
// (resizing the pool does not wait for connections to close).
func (s *Share) Round(ctx context.Context) (ShareResult, error) {
	s.round.Lock()
	defer s.round.Unlock()
	ctx, cancel := context.WithTimeout(ctx, roundDeadline(s.cfg))
	defer cancel()
	res, err := s.roundLocked(ctx)
	if err != nil {
		if !s.lastOK.IsZero() && time.Since(s.lastOK) >= s.cfg.TTL/2 {
			s.resize(0)
		}
		return res, err
	}
	s.lastOK = time.Now()
	return res, nil
}

// shareRoundMin is the least time a round is given: below it a store that
// is merely slow would fail every round and shrink the pool to zero.
const shareRoundMin = time.Second

// roundDeadline is how long one round may take. With the self-limit
// checked when a failed round ends, the pool is shrunk at the latest
// TTL/2 plus this after the last good round; min(Every, TTL/2) keeps that
// within the TTL (with the default TTL of 3 rounds, 2.5 rounds).
func roundDeadline(cfg ShareConfig) time.Duration {
	return max(min(cfg.Every, cfg.TTL/2), shareRoundMin)
}

func (s *Share) roundLocked(ctx context.Context) (ShareResult, error) {
	was := s.Granted()
	for {
		tbl, err := s.st.ShareTable(ctx)
		if err != nil {
			return ShareResult{Was: was, Granted: was}, fmt.Errorf("work: share round: %w", err)
		}
		now := s.now()
		entries, own := s.prune(tbl.Val, now)
		s.renew(&own, now)
		g := Grants(append(entries, own), s.cfg.Limit)[s.id]
		others := 0
		for _, e := range entries {
			// Each entry counts between nothing and the whole limit, and
			// so does the sum: a negative Using, or Usings whose sum
			// overflows, written by a broken or hostile participant would
			// otherwise count the others as holding less than they do,
			// and this process would grow into connections still open.
			others = min(others+min(max(e.Using, 0), s.cfg.Limit), s.cfg.Limit)
		}
		target := max(min(g, s.cfg.Limit-others), 0)
		if s.pool == nil {
			own.Using = target
		} else {
			// Before the write the pool may only shrink. Using then counts
			// what it still holds (commands in flight finish first; a later
			// round lowers it further): that is below the old Using unless
			// another process dropped this entry as stale while the pool
			// held connections, and then the table had better tell the
			// truth, so that the others shrink instead of growing.
			if target < s.pool.Stats().Size {
				s.pool.Resize(target)
			}
			own.Using = max(target, s.pool.Stats().Open())
		}
		own.Granted = g
		_, err = s.st.PutShareTable(ctx, sortEntries(append(entries, own)), tbl.Seq)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return ShareResult{Was: was, Granted: was}, fmt.Errorf("work: share round: %w", err)
		}
		// Only now may the pool grow: the table counts what it grows into.
		s.resize(target)
		s.set(g, own.Using)
		return ShareResult{Was: was, Granted: g}, nil
	}
}

// prune returns the entries of others still alive at now, and the
// process's own entry (a new one if absent, or if dropped as stale by
// another process — then its pool may hold more than the table counts, and
// the round shrinks it to what fits). Only the entry with this Share's ID
// is its own: another with the same Name is another process's.
func (s *Share) prune(tbl []ShareEntry, now time.Time) (others []ShareEntry, own ShareEntry) {
	own = ShareEntry{Name: s.cfg.Name, ID: s.id}
	var rest []ShareEntry
	for _, e := range tbl {
		if e.ID == s.id {
			own = e
		} else {
			rest = append(rest, e)
		}
	}
	return s.live(rest, now), own
}

// live returns the entries whose heartbeat (Seen) changed within their TTL
// by this process's clock: an entry is dropped only once this process has
// read the same Seen for longer than its TTL. One first read now counts as
// just renewed, so a process that has only just started waits a TTL
// before it takes a dead entry's connections.
func (s *Share) live(es []ShareEntry, now time.Time) []ShareEntry {
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	var out []ShareEntry
	present := make(map[string]bool, len(es))
	for _, e := range es {
		k := e.key()
		present[k] = true
		o, ok := s.observed[k]
		if !ok || o.seen != e.Seen {
			o = observation{seen: e.Seen, at: now}
			s.observed[k] = o
		}
		if now.Sub(o.at) <= entryTTL(e) {
			out = append(out, e)
		}
	}
	// Forget the entries gone from the table: one that comes back is new.
	for k := range s.observed {
		if !present[k] {
			delete(s.observed, k)
		}
	}
	return out
}

// renew refreshes the process's entry from its config and pool.
func (s *Share) renew(e *ShareEntry, now time.Time) {
	e.Priority, e.Min, e.Max = s.cfg.Priority, s.cfg.Min, s.cfg.Max
	e.TTL = s.cfg.TTL.Milliseconds()
	// Strictly increasing, even when the wall clock stands still or steps
	// back: the others see the entry renewed by Seen changing.
	e.Seen = max(now.UnixMilli(), e.Seen+1)
	if s.pool != nil {
		e.TooMany = s.pool.Stats().TooMany
	}
}

// entryTTL is the entry's TTL (an entry without one lives
// 3×ShareEveryDefault), at most ShareTTLMax.
func entryTTL(e ShareEntry) time.Duration {
	if e.TTL <= 0 {
		return 3 * ShareEveryDefault
	}
	// Compared in milliseconds: a ttl_ms near math.MaxInt64 overflows
	// the conversion (to a negative TTL, which dropped a live entry at
	// once), and one of years pinned a dead entry's connections for good.
	if e.TTL > ShareTTLMax.Milliseconds() {
		return ShareTTLMax
	}
	return time.Duration(e.TTL) * time.Millisecond
}

// staleByWallClock: the entry's heartbeat is older than its TTL by the
// local wall clock. Only for a reader with no history of the table (see
// ShareTable); participants judge by Share.live.
func staleByWallClock(e ShareEntry, now time.Time) bool {
	return now.Sub(time.UnixMilli(e.Seen)) > entryTTL(e)
}

func sortEntries(es []ShareEntry) []ShareEntry {
	slices.SortFunc(es, func(a, b ShareEntry) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return es
}

// Leave resizes the pool to zero, waits for its commands in flight to
// finish and its connections to close, then removes its entry (not another
// process's of the same Name), so that the others grow into its
// connections at their next round. While it waits it renews the entry
// with what the pool still holds, at least every min(Every, TTL/3): the
// round loop has stopped by then, and an entry left unrenewed for its TTL
// would be dropped by the others, who would grow into connections still
// open (commands in flight on a slow server, QUITs unanswered). When ctx
// ends before the pool is empty the entry stays as last written, still
// counting what was open. A later Round registers the process again.
func (s *Share) Leave(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()
	if s.pool != nil {
		s.pool.Resize(0)
		every := max(min(s.cfg.Every, s.cfg.TTL/3), time.Millisecond)
		for {
			open := s.pool.Stats().Open()
			if open == 0 {
				break
			}
			// A failed renewal does not end the wait: the connections
			// close all the same, and the entry still counts them until
			// its TTL.
			_ = s.holdLocked(ctx, open)
			wctx, cancel := context.WithTimeout(ctx, every)
			err := s.pool.WaitOpen(wctx, 0)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("work: share leave: %w", err)
			}
		}
	}
	// The pool's size is zero and it is empty: it opens nothing more.
	for {
		tbl, err := s.st.ShareTable(ctx)
		if err != nil {
			return fmt.Errorf("work: share leave: %w", err)
		}
		entries, _ := s.prune(tbl.Val, s.now())
		_, err = s.st.PutShareTable(ctx, sortEntries(entries), tbl.Seq)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("work: share leave: %w", err)
		}
		s.set(0, 0)
		return nil
	}
}

// holdLocked renews the entry of a leaving process with a grant of zero
// and Using the connections its pool still holds. Under s.round.
func (s *Share) holdLocked(ctx context.Context, using int) error {
	ctx, cancel := context.WithTimeout(ctx, roundDeadline(s.cfg))
	defer cancel()
	for {
		tbl, err := s.st.ShareTable(ctx)
		if err != nil {
			return fmt.Errorf("work: share leave: renew: %w", err)
		}
		now := s.now()
		entries, own := s.prune(tbl.Val, now)
		s.renew(&own, now)
		own.Using, own.Granted = using, 0
		_, err = s.st.PutShareTable(ctx, sortEntries(append(entries, own)), tbl.Seq)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("work: share leave: renew: %w", err)
		}
		s.set(0, using)
		return nil
	}
}

// Table reads the share table, without the entries this process has seen
// go unrenewed for longer than their TTL, and the grants every participant
// computes from it (keyed as Grants keys them).
func (s *Share) Table(ctx context.Context) ([]ShareEntry, map[string]int, error) {
	tbl, err := s.st.ShareTable(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("work: share table: %w", err)
	}
	var own, rest []ShareEntry
	for _, e := range tbl.Val {
		if e.ID == s.id {
			own = append(own, e)
		} else {
			rest = append(rest, e)
		}
	}
	live := sortEntries(append(own, s.live(rest, s.now())...))
	return live, Grants(live, s.cfg.Limit), nil
}

// Grants splits limit connections among the entries: every entry first
// gets its Min (when the minimums exceed the limit, the higher priority
// first, then by name and ID; the last one served may get part of its Min), then
// what is left goes by Priority, in proportion to it (Sainte-Laguë's
// divisor method over the connections beyond each Min; ties to the higher
// priority, then by name and ID), each capped at its Max (zero or above limit
// means limit; a Max under Min counts as Min), what capping leaves going to
// the others. Entries with a Priority of zero or less share only what every
// positive priority left. A priority counts within ±PriorityMax (one
// beyond it as the bound). No entry's grant falls when another leaves.
// The sum never exceeds limit, and it is limit unless every entry is at its
// Max. The result is keyed by each entry's ID, or its Name for an entry
// without an ID (entries of one Name but different IDs are different
// participants). It depends on the entries only, not their order: of a
// repeated key the most recently seen entry counts.
func Grants(entries []ShareEntry, limit int) map[string]int {
	type part struct {
		name     string
		key      string
		prio     int
		min, max int
		got      int
	}
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b ShareEntry) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.key(), b.key()), cmp.Compare(b.Seen, a.Seen),
			cmp.Compare(b.Priority, a.Priority), cmp.Compare(b.Min, a.Min), cmp.Compare(b.Max, a.Max))
	})
	es = slices.CompactFunc(es, func(a, b ShareEntry) bool { return a.key() == b.key() })
	out := make(map[string]int, len(es))
	limit = max(limit, 0)
	ps := make([]*part, 0, len(es))
	for _, e := range es {
		// Clamped before the weighting multiplies it (see PriorityMax).
		prio := min(max(e.Priority, -PriorityMax), PriorityMax)
		p := &part{name: e.Name, key: e.key(), prio: prio, min: max(e.Min, 0), max: e.Max}
		if p.max <= 0 || p.max > limit {
			p.max = limit
		}
		p.min = min(p.min, limit)
		p.max = max(p.max, p.min)
		ps = append(ps, p)
	}
	byPriority := func(ps []*part) []*part {
		qs := slices.Clone(ps)
		slices.SortStableFunc(qs, func(a, b *part) int { return cmp.Compare(b.prio, a.prio) }) // names stay in order
		return qs
	}

	// Minimums first.
	left := limit
	for _, p := range byPriority(ps) {
		p.got = min(p.min, left)
		left -= p.got
	}

	// Then the rest, one connection at a time, to the entry with the
	// highest Priority/(2·extra+1), extra being what it got beyond its Min
	// (Sainte-Laguë's divisor method: proportional, and no entry loses a
	// connection when another leaves or the limit grows). Entries at their
	// Max are skipped; those with no positive priority share equally once
	// every positive one is full.
	weight := func(p *part, positive bool) int {
		if positive {
			return p.prio
		}
		return 1
	}
	better := func(a, b *part, positive bool) bool {
		qa := weight(a, positive) * (2*(b.got-b.min) + 1)
		qb := weight(b, positive) * (2*(a.got-a.min) + 1)
		if qa != qb {
			return qa > qb
		}
		if a.prio != b.prio {
			return a.prio > b.prio
		}
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.key, b.key)) < 0
	}
	for ; left > 0; left-- {
		positive := slices.ContainsFunc(ps, func(p *part) bool { return p.got < p.max && p.prio > 0 })
		var best *part
		for _, p := range ps {
			if p.got < p.max && (p.prio > 0 || !positive) && (best == nil || better(p, best, positive)) {
				best = p
			}
		}
		if best == nil {
			break // every entry is at its Max
		}
		best.got++
	}
	for _, p := range ps {
		out[p.key] = p.got
	}
	return out
}
