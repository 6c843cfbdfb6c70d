package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
)

// RangeState is where a range is in its life.
type RangeState string

// The states of a range. A range moves planned → spooled → leased → done;
// a failed attempt sends it back to spooled, and the last allowed one to
// failed.
const (
	StatePlanned RangeState = "planned" // cut by the planner, not yet fetched
	StateSpooled RangeState = "spooled" // its overview lines are in its spool
	StateLeased  RangeState = "leased"  // a worker holds it (see Lease)
	StateDone    RangeState = "done"    // indexed; its spool is removed
	StateFailed  RangeState = "failed"  // out of attempts; Missed says what was never read
)

// States lists every RangeState, in life order.
var States = []RangeState{StatePlanned, StateSpooled, StateLeased, StateDone, StateFailed}

// Range kinds: history ranges reach back from where a group was first seen,
// tail ranges follow its new articles.
const (
	KindHistory = "history"
	KindTail    = "tail"
)

// Group is what the planner knows of one newsgroup of a source.
type Group struct {
	Name string `json:"name"`
	// Low and High are the group's article numbers at the last probe.
	Low  int64 `json:"low"`
	High int64 `json:"high"`
	// PlannedThrough is the highest article a range covers; 0 before the
	// first plan. Planning is a compare-and-set on the group record, so
	// two planners never cut the same articles.
	PlannedThrough int64 `json:"planned_through"`
	// HistoryFrom is the lowest article a range covers.
	HistoryFrom int64 `json:"history_from,omitempty"`
	// Depth is the history depth the group was planned with.
	Depth int64 `json:"depth,omitempty"`
	// Pending are ranges this record claims that are not yet written to
	// the ranges KV: the planner writes the claim first, then the ranges,
	// then clears it, so a planner that dies in between loses nothing
	// (the next one writes them).
	Pending []Range `json:"pending,omitempty"`
	// ProbedAt is when Low/High were read, unix milliseconds.
	ProbedAt int64 `json:"probed_at,omitempty"`
	// Retired sums the group's done ranges that were retired: their
	// records deleted LeaseConfig.RetainDone after they finished, so that
	// reading the ranges costs the live work, not the whole history.
	// Status adds it to what the records still there say.
	Retired Retired `json:"retired,omitzero"`
	// Retiring are the ranges Retired counts whose records may not be
	// deleted yet: the retirer raises Retired and lists them here in one
	// compare-and-set, deletes them, then clears the list, so a retirer
	// that dies in between neither loses nor repeats a count (Status
	// leaves a range listed here out, and the next retirement deletes it).
	Retiring []uint64 `json:"retiring,omitempty"`
}

// Retired sums what the retired done ranges of a group said.
type Retired struct {
	// Ranges is how many were retired.
	Ranges int64 `json:"ranges"`
	// Articles sums their sizes (article numbers, as Status.Articles).
	Articles int64 `json:"articles"`
	// Unmatched sums the "unmatched" counts of their results.
	Unmatched int64 `json:"unmatched,omitempty"`
}

// Range is a run of article numbers of one group, the unit of work.
type Range struct {
	ID    uint64     `json:"id"`
	Group string     `json:"group"`
	First int64      `json:"first"`
	Last  int64      `json:"last"`
	Kind  string     `json:"kind"`
	State RangeState `json:"state"`
	// Attempts counts the leases taken on the range.
	Attempts int `json:"attempts,omitempty"`
	// Articles is how many overview lines the spool holds (articles the
	// server no longer has are simply absent).
	Articles int64 `json:"articles,omitempty"`
	// Chunks is how many spool messages hold them.
	Chunks int `json:"chunks,omitempty"`
	// Holder is the worker that leased it last.
	Holder string `json:"holder,omitempty"`
	// Missed lists, for a failed range, the article runs never read.
	Missed [][2]int64 `json:"missed,omitempty"`
	// Error is the last failure's reason.
	Error string `json:"error,omitempty"`
	// Result is what the Indexer returned for it, recorded under the fence
	// of the lease that finished it.
	Result json.RawMessage `json:"result,omitempty"`
	// Updated is the time of the last change, unix milliseconds.
	Updated int64 `json:"updated,omitempty"`
}

// Size is the number of article numbers the range covers.
func (r Range) Size() int64 { return r.Last - r.First + 1 }

// Lease is a worker's hold on a range. Its persist seq is the fencing
// token: every change to the lease is a compare-and-set on it, and the
// entry expires with its TTL unless heartbeats renew it.
type Lease struct {
	Range  uint64 `json:"range"`
	Holder string `json:"holder"`
	// Progress is the last article handed to the indexer.
	Progress int64 `json:"progress,omitempty"`
	// ReadAll says the holder handed every line to the indexer.
	ReadAll bool `json:"read_all,omitempty"`
	// Finished says the holder finished under its token: Result is the
	// indexer's, and the range is done even if the holder died before
	// marking it (see Leases.Settle).
	Finished bool            `json:"finished,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	// Expires is when the entry expires unless renewed, unix milliseconds.
	Expires int64 `json:"expires"`
}

// ShareEntry is one process's registration in the connection budget.
type ShareEntry struct {
	// Name is the process's name, for display: two processes may carry the
	// same one (a shard restarted while the old one still drains).
	Name string `json:"name"`
	// ID identifies the Share that wrote the entry, random per NewShare:
	// only that Share renews, resizes or removes it, so an entry of another
	// process with the same Name stays a participant of its own until it
	// leaves or expires. An entry without one is keyed by its Name.
	ID       string `json:"id,omitempty"`
	Priority int    `json:"priority"`
	Min      int    `json:"min"`
	Max      int    `json:"max"`
	// Using is how many connections the process may hold now: raised only
	// in the same compare-and-set that checks the total, lowered once its
	// pool has shrunk.
	Using int `json:"using"`
	// Granted is the grant the process computed at its last round.
	Granted int `json:"granted"`
	// TooMany counts "too many connections" refusals its pool met.
	TooMany int64 `json:"too_many,omitempty"`
	// Seen is its last heartbeat, unix milliseconds; entries older than
	// their TTL are dropped by the next writer.
	Seen int64 `json:"seen"`
	TTL  int64 `json:"ttl_ms"`
}

// BrokenRecord is a record of a source's state whose value does not decode
// (written by hand, damaged, or by an incompatible version). Readers of a
// whole stream skip it, so that one record does not stop the source:
// Status lists it for the operator to mend or delete. A lease entry that
// does not decode still holds its range, which no Acquire can take until
// the entry expires or is removed (a lease is created with "must not
// exist").
type BrokenRecord struct {
	Stream string `json:"stream"`
	Key    string `json:"key"`
	Seq    uint64 `json:"seq"`
	Error  string `json:"error"`
}

// Versioned is a record and the persist seq it was read at: the token for
// a compare-and-set.
type Versioned[T any] struct {
	Seq uint64
	Val T
}

// ErrConflict: another process changed the record first.
var ErrConflict = errors.New("work: record changed concurrently")

// ErrFenced: the caller's lease is no longer the range's lease (it expired
// and was taken, or another holder finished the range).
var ErrFenced = errors.New("work: lease lost (fenced)")

// Names of the streams of a source's scope.
const (
	streamGroups = "groups"
	streamRanges = "ranges"
	streamLeases = "leases"
	streamShares = "shares"
	streamMeta   = "meta"
	keyNextID    = "next-range-id"
	keyShares    = "table"
	spoolPrefix  = "spool-"
)

var sourceRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,100}$`)

// ValidSource checks a source name: [a-z0-9][a-z0-9_-]{0,100}, so that
// "work-" and it make a persist scope.
func ValidSource(source string) error {
	if !sourceRe.MatchString(source) {
		return fmt.Errorf("work: invalid source %q: want [a-z0-9][a-z0-9_-]{0,100}", source)
	}
	return nil
}

// Scope is the persist scope that holds a source's state.
func Scope(source string) string { return "work-" + source }

// Store reads and writes a source's work state in persist.
type Store struct {
	c      *persist.Client
	source string
	scope  string
	groups *persist.KV
	ranges *persist.KV
	leases *persist.KV
	shares *persist.KV
	meta   *persist.KV

	log         *slog.Logger
	undecodable atomic.Int64 // broken records seen, each (stream, key, seq) once
	brokenMu    sync.Mutex
	brokenSeen  map[string]uint64 // stream/key → the seq of it last logged
}

// NewStore returns the store of source, which must match
// [a-z0-9][a-z0-9_-]{0,100} (it names a persist scope).
func NewStore(c *persist.Client, source string) (*Store, error) {
	if err := ValidSource(source); err != nil {
		return nil, err
	}
	sc := Scope(source)
	return &Store{
		c: c, source: source, scope: sc,
		groups: c.KV(sc, streamGroups),
		ranges: c.KV(sc, streamRanges),
		leases: c.KV(sc, streamLeases),
		shares: c.KV(sc, streamShares),
		meta:   c.KV(sc, streamMeta),
		log:    lifecycle.Logger(nil, "work"),
	}, nil
}

// Undecodable counts the records that did not decode which this store's
// reads skipped, each version of a record once (see BrokenRecord).
func (s *Store) Undecodable() int64 { return s.undecodable.Load() }

// broken logs and counts a record that does not decode, once per version
// of it: every read of the stream meets it again, every round.
func (s *Store) broken(b BrokenRecord) {
	id := b.Stream + "/" + b.Key
	s.brokenMu.Lock()
	seen, ok := s.brokenSeen[id]
	if !ok || seen != b.Seq {
		if s.brokenSeen == nil {
			s.brokenSeen = map[string]uint64{}
		}
		s.brokenSeen[id] = b.Seq
	}
	s.brokenMu.Unlock()
	if ok && seen == b.Seq {
		return
	}
	s.undecodable.Add(1)
	s.log.Error("work: skipping a record that does not decode", "source", s.source, "stream", b.Stream, "key", b.Key, "seq", b.Seq, "err", b.Error)
}

// Source is the source's name.
func (s *Store) Source() string { return s.source }

// Client is the persist client under the store.
func (s *Store) Client() *persist.Client { return s.c }

// Init lets the lease stream expire its entries (TTL), so a dead worker's
// lease returns to the pool, and records the source in the list of sources
// (ListSources). It is idempotent.
func (s *Store) Init(ctx context.Context) error {
	if _, err := s.leases.Stream().UpdateConfig(ctx, persist.ConfigUpdate{AllowMsgTTL: ptr(true)}); err != nil {
		return fmt.Errorf("work: init leases: %w", err)
	}
	// Written once: a coordinator's every start would otherwise add a
	// message to the list's stream.
	kv := sourcesKV(s.c)
	if _, err := kv.Get(ctx, s.source); errors.Is(err, persist.ErrNotFound) {
		if _, err := kv.Set(ctx, s.source, []byte(s.scope), persist.SetOptions{}); err != nil {
			return fmt.Errorf("work: record source: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("work: read sources: %w", err)
	}
	return nil
}

// SourcesScope and SourcesKV are where the names of the sources whose
// coordinator has started are kept, one key each (the value is the
// source's scope): what `switchyard work status` shows without --source.
const (
	SourcesScope = "work"
	SourcesKV    = "sources"
)

func sourcesKV(c *persist.Client) *persist.KV { return c.KV(SourcesScope, SourcesKV) }

// ListSources returns the sources whose coordinator has started, sorted.
func ListSources(ctx context.Context, c *persist.Client) ([]string, error) {
	keys, err := sourcesKV(c).Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("work: list sources: %w", err)
	}
	slices.Sort(keys)
	return keys, nil
}

// Spool is the stream that holds range id's overview lines, one message
// per fetched chunk, keyed by the chunk's first article so that fetching a
// chunk again replaces it.
func (s *Store) Spool(id uint64) *persist.Stream {
	return s.c.Stream(s.scope, spoolPrefix+strconv.FormatUint(id, 10))
}

// rangeKey sorts like the id.
func rangeKey(id uint64) string { return fmt.Sprintf("%012d", id) }

// Group reads one group's record.
func (s *Store) Group(ctx context.Context, name string) (Versioned[Group], error) {
	return getJSON[Group](ctx, s.groups, name)
}

// Groups reads every group's record, by name; records that do not decode
// are left out (see BrokenRecord).
func (s *Store) Groups(ctx context.Context) ([]Versioned[Group], error) {
	v, _, err := listJSON[Group](ctx, s, s.groups)
	return v, err
}

// PutGroup writes g with a compare-and-set on prev (0: must not exist) and
// returns the new seq.
func (s *Store) PutGroup(ctx context.Context, g Group, prev uint64) (uint64, error) {
	return casJSON(ctx, s.groups, g.Name, g, prev, 0)
}

// Range reads one range.
func (s *Store) Range(ctx context.Context, id uint64) (Versioned[Range], error) {
	return getJSON[Range](ctx, s.ranges, rangeKey(id))
}

// Ranges reads every range, by id; records that do not decode are left
// out (see BrokenRecord).
func (s *Store) Ranges(ctx context.Context) ([]Versioned[Range], error) {
	v, _, err := listJSON[Range](ctx, s, s.ranges)
	return v, err
}

// PutRange writes r with a compare-and-set on prev (0: must not exist).
func (s *Store) PutRange(ctx context.Context, r Range, prev uint64) (uint64, error) {
	r.Updated = time.Now().UnixMilli()
	return casJSON(ctx, s.ranges, rangeKey(r.ID), r, prev, 0)
}

// deleteRange removes range id's record (no error if it is gone already).
func (s *Store) deleteRange(ctx context.Context, id uint64) error {
	if _, err := s.ranges.Delete(ctx, rangeKey(id)); err != nil {
		return fmt.Errorf("work: delete range %d: %w", id, err)
	}
	return nil
}

// Lease reads range id's lease.
func (s *Store) Lease(ctx context.Context, id uint64) (Versioned[Lease], error) {
	return getJSON[Lease](ctx, s.leases, rangeKey(id))
}

// Leases reads every live lease, by range id; entries that do not decode
// are left out (see BrokenRecord). Their ranges stay held all the same:
// taking a range creates its lease entry with "must not exist".
func (s *Store) Leases(ctx context.Context) ([]Versioned[Lease], error) {
	v, _, err := listJSON[Lease](ctx, s, s.leases)
	return v, err
}

// PutLease writes l with a compare-and-set on prev (0: must not exist) and
// a TTL; the new seq is the lease's token from then on.
func (s *Store) PutLease(ctx context.Context, l Lease, prev uint64, ttl time.Duration) (uint64, error) {
	l.Expires = time.Now().Add(ttl).UnixMilli()
	return casJSON(ctx, s.leases, rangeKey(l.Range), l, prev, ttl)
}

// DropLease removes range id's lease if its token is still seq.
func (s *Store) DropLease(ctx context.Context, seq uint64) error {
	if _, err := s.leases.Stream().Delete(ctx, persist.Delete{Seqs: []uint64{seq}}); err != nil {
		return fmt.Errorf("work: drop lease: %w", err)
	}
	return nil
}

// AllocIDs reserves n consecutive range ids and returns the first.
func (s *Store) AllocIDs(ctx context.Context, n int) (uint64, error) {
	for {
		cur, err := getJSON[uint64](ctx, s.meta, keyNextID)
		if err != nil && !errors.Is(err, persist.ErrNotFound) {
			return 0, fmt.Errorf("work: alloc ids: %w", err)
		}
		next := max(cur.Val, 1)
		_, err = casJSON(ctx, s.meta, keyNextID, next+uint64(n), cur.Seq, 0)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("work: alloc ids: %w", err)
		}
		return next, nil
	}
}

// ShareTable reads the connection budget's table (nil and seq 0 when no
// process has registered yet).
func (s *Store) ShareTable(ctx context.Context) (Versioned[[]ShareEntry], error) {
	v, err := getJSON[[]ShareEntry](ctx, s.shares, keyShares)
	if errors.Is(err, persist.ErrNotFound) {
		return Versioned[[]ShareEntry]{}, nil
	}
	return v, err
}

// PutShareTable writes the table with a compare-and-set on prev.
func (s *Store) PutShareTable(ctx context.Context, t []ShareEntry, prev uint64) (uint64, error) {
	return casJSON(ctx, s.shares, keyShares, t, prev, 0)
}

func getJSON[T any](ctx context.Context, kv *persist.KV, key string) (Versioned[T], error) {
	m, err := kv.Get(ctx, key)
	if err != nil {
		return Versioned[T]{}, err
	}
	var v T
	if err := json.Unmarshal(m.Value, &v); err != nil {
		return Versioned[T]{}, fmt.Errorf("work: decode %s/%s: %w", kv.Stream().Name(), key, err)
	}
	return Versioned[T]{Seq: m.Seq, Val: v}, nil
}

// listJSON reads every record of kv. A record that does not decode is
// returned apart, and logged and counted once, rather than failing the
// read: one such record would otherwise stop every reader of the stream.
func listJSON[T any](ctx context.Context, s *Store, kv *persist.KV) ([]Versioned[T], []BrokenRecord, error) {
	var out []Versioned[T]
	var broken []BrokenRecord
	_, err := kv.Stream().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key == "" {
			return nil
		}
		var v T
		if err := json.Unmarshal(m.Value, &v); err != nil {
			b := BrokenRecord{Stream: kv.Stream().Name(), Key: m.Key, Seq: m.Seq, Error: err.Error()}
			s.broken(b)
			broken = append(broken, b)
			return nil
		}
		out = append(out, Versioned[T]{Seq: m.Seq, Val: v})
		return nil
	})
	return out, broken, err
}

// casJSON writes v under key if the key's seq is still prev (0: absent);
// ErrConflict otherwise.
func casJSON(ctx context.Context, kv *persist.KV, key string, v any, prev uint64, ttl time.Duration) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("work: encode %s/%s: %w", kv.Stream().Name(), key, err)
	}
	r, err := kv.Set(ctx, key, b, persist.SetOptions{PrevSeq: &prev, TTL: ttl})
	if errors.Is(err, persist.ErrWrongLastSequence) {
		return 0, fmt.Errorf("%w: %s/%s", ErrConflict, kv.Stream().Name(), key)
	}
	if err != nil {
		return 0, err
	}
	return r.Seq, nil
}

func ptr[T any](v T) *T { return &v }
