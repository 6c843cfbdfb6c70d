package persist

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// TombstoneTTLDefault is how long a key deleted through a LiveKV stays in
// the stream as a tombstone before the server expires it.
const TombstoneTTLDefault = time.Hour

// liveKVMergeRounds bounds the merge-and-retry rounds of one LiveKV write:
// each round means another writer changed the key meanwhile.
const liveKVMergeRounds = 16

// HdrTombstone is the user header that marks a keyed message as the deletion
// of its key (LiveKV.Delete).
const HdrTombstone = "Kv-Deleted"

// HdrContentEncoding is the user header that says a value is compressed
// already (its value names how, for the application): the server stores
// such values as they are instead of trying zstd on them.
const HdrContentEncoding = "Content-Encoding"

// ErrClosed is returned by a Client, LiveKV or LocalStream used after Close.
var ErrClosed = errors.New("persist: handle closed")

// LiveKVOptions configure a LiveKV.
type LiveKVOptions struct {
	// Merge, if set, resolves a local write that raced a remote one: every
	// write is then a compare-and-set on the seq the local value was based
	// on, and when another writer got there first Merge receives the key,
	// the local value and the remote one (nil for a deleted or absent key)
	// and returns the value to write instead (nil deletes the key). Nil
	// means last writer wins, in the order the server committed the writes.
	Merge func(key string, local, remote []byte) []byte
	// TombstoneTTL is how long a deletion stays in the stream as a
	// tombstone. Zero means TombstoneTTLDefault.
	TombstoneTTL time.Duration
	// Ephemeral keeps the stream in the server's memory only.
	Ephemeral bool
	// WatchBuffer is the feed buffer of the underlying watcher. Zero means
	// WatchBufferDefault.
	WatchBuffer int
}

// KVEntry is a key's value in a LiveKV.
type KVEntry struct {
	Value []byte
	// Seq is the seq of the last value of the key seen on the feed, the
	// token for a compare-and-set; 0 when the key has none.
	Seq uint64
	// Pending is set while a local write of the key is not yet on the feed.
	Pending bool
}

// KVSetOptions are the optional parts of a LiveKV write.
type KVSetOptions struct {
	// PrevSeq, when set, is a compare-and-set on the key's seq (KVEntry.Seq;
	// 0 means the key must not exist, a tombstone counting as absent). A
	// conflict returns ErrWrongLastSequence; Merge is not called.
	PrevSeq *uint64
	// TTL expires the value after this long.
	TTL time.Duration
}

// LiveKV is a key-value view of a stream with a local copy kept current
// from the stream's change feed: Get and Keys are answered locally, and a
// local write shows at once (Pending) while it is being saved.
//
// Deletions are tombstones: a keyed message with an empty value and the
// header HdrTombstone, written with a TTL (TombstoneTTL), so that a delete
// is an ordinary keyed write: it takes part in compare-and-set and in
// Merge, and every watcher learns which key it deleted. The server expires
// the tombstone after its TTL; this is why LiveKV turns allow_msg_ttl on
// for its stream. A key removed otherwise (a plain KV.Delete, a limit) also
// disappears from the copy.
//
// After the feed resyncs (EventResynced), the watcher hands over the
// deletions and sets the copy missed, so the copy equals the stream once
// EventCaughtUp follows. It is safe for concurrent use.
type LiveKV struct {
	kv   *KV
	opts LiveKVOptions
	w    *Watcher

	mu      sync.Mutex
	cur     map[string]kvItem // what the feed says
	bySeq   map[uint64]string // seq -> key, for deletes by seq
	pending map[string]*kvPending
	// seen is the highest seq of a set the feed delivered: a saved write at
	// or below it has been applied (and maybe replaced or deleted since),
	// or was gone before the watcher could deliver it.
	seen   uint64
	closed bool

	ready     chan struct{} // closed at the first EventCaughtUp
	readyOnce sync.Once

	beforeSave func()           // tests: runs before each write is sent
	afterSave  func(seq uint64) // tests: runs when a write was committed, before its result is recorded
}

type kvItem struct {
	seq   uint64
	value []byte
	tomb  bool
}

// kvPending is a local write of a key not yet seen on the feed.
type kvPending struct {
	value []byte
	tomb  bool
	wait  uint64 // the seq it was saved at; 0 while unsaved
}

// LiveKV opens a live key-value copy of the stream name in scope. It turns
// on allow_msg_ttl for the stream (tombstones need it) and returns once the
// copy holds every key the stream had.
func (c *Client) LiveKV(ctx context.Context, scope, name string, opts LiveKVOptions) (*LiveKV, error) {
	if opts.TombstoneTTL < 0 {
		return nil, fmt.Errorf("live kv: negative TombstoneTTL %s", opts.TombstoneTTL)
	}
	if opts.TombstoneTTL == 0 {
		opts.TombstoneTTL = TombstoneTTLDefault
	}
	var so []StreamOption
	if opts.Ephemeral {
		so = append(so, Ephemeral())
	}
	lk := &LiveKV{
		kv: c.KV(scope, name, so...), opts: opts,
		cur: map[string]kvItem{}, bySeq: map[uint64]string{}, pending: map[string]*kvPending{},
		ready: make(chan struct{}),
	}
	cfg, err := lk.kv.s.Config(ctx)
	if err != nil {
		return nil, fmt.Errorf("live kv: %w", err)
	}
	if !cfg.AllowMsgTTL {
		if _, err := lk.kv.s.UpdateConfig(ctx, ConfigUpdate{AllowMsgTTL: ptr(true)}); err != nil {
			return nil, fmt.Errorf("live kv: %w", err)
		}
	}
	// The watcher lives until Close, not until the opening ctx ends.
	w, err := lk.kv.s.Watch(context.WithoutCancel(ctx), WatchOptions{Buffer: opts.WatchBuffer}, lk.apply)
	if err != nil {
		return nil, fmt.Errorf("live kv: %w", err)
	}
	lk.w = w
	select {
	case <-lk.ready:
		return lk, nil
	case <-w.Done():
		return nil, fmt.Errorf("live kv: watcher ended: %w", w.Err())
	case <-ctx.Done():
		_ = w.Stop(context.Background())
		return nil, fmt.Errorf("live kv: %w", ctx.Err())
	}
}

// apply is the watcher's callback.
func (lk *LiveKV) apply(ev Event) {
	switch ev.Kind {
	case EventCaughtUp:
		lk.readyOnce.Do(func() { close(lk.ready) })
		return
	case EventResynced:
		// The events that follow carry what changed; nothing to reset.
		return
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	switch ev.Kind {
	case EventSkipped:
		// Every seq up to Last was delivered or is skipped: a saved write
		// the feed never showed up to there was removed first.
		lk.seen = max(lk.seen, ev.Last)
		for k, p := range lk.pending {
			if p.wait != 0 && p.wait <= ev.Last {
				delete(lk.pending, k)
			}
		}
	case EventSet:
		m := ev.Msg
		lk.seen = max(lk.seen, m.Seq)
		// Sets come in seq order: a saved write below this one that the feed
		// never showed was removed first; its key shows what the feed says.
		for k, p := range lk.pending {
			if p.wait != 0 && p.wait < m.Seq {
				delete(lk.pending, k)
			}
		}
		if m.Key == "" {
			return
		}
		if old, ok := lk.cur[m.Key]; ok {
			delete(lk.bySeq, old.seq)
		}
		lk.cur[m.Key] = kvItem{seq: m.Seq, value: m.Value, tomb: m.Headers[HdrTombstone] != ""}
		lk.bySeq[m.Seq] = m.Key
		if p := lk.pending[m.Key]; p != nil && p.wait != 0 && m.Seq >= p.wait {
			delete(lk.pending, m.Key)
		}
	case EventDelete:
		for _, seq := range ev.Seqs {
			key, ok := lk.bySeq[seq]
			if !ok {
				continue
			}
			delete(lk.bySeq, seq)
			if it, ok := lk.cur[key]; ok && it.seq == seq {
				delete(lk.cur, key)
			}
		}
	}
}

// Get returns the local value of key: a pending local write if there is
// one, else the last value seen on the feed. ok is false for an absent or
// deleted key.
func (lk *LiveKV) Get(key string) (e KVEntry, ok bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	it, have := lk.cur[key]
	if have {
		e.Seq = it.seq
	}
	if p := lk.pending[key]; p != nil {
		e.Value, e.Pending = p.value, true
		return e, !p.tomb
	}
	if !have || it.tomb {
		return KVEntry{Seq: e.Seq}, false
	}
	e.Value = it.value
	return e, true
}

// Keys returns the keys Get would find, sorted.
func (lk *LiveKV) Keys() []string {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	keys := make([]string, 0, len(lk.cur)+len(lk.pending))
	for k, it := range lk.cur {
		if p := lk.pending[k]; (p == nil && !it.tomb) || (p != nil && !p.tomb) {
			keys = append(keys, k)
		}
	}
	for k, p := range lk.pending {
		if _, seen := lk.cur[k]; !seen && !p.tomb {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Set writes value under key. The local copy shows it at once; Set returns
// once the server committed it (or refused it: the local copy then reverts).
func (lk *LiveKV) Set(ctx context.Context, key string, value []byte, opts KVSetOptions) (SetResult, error) {
	if value == nil {
		value = []byte{}
	}
	return lk.write(ctx, key, value, false, opts)
}

// Delete deletes key by writing its tombstone (see LiveKV). opts.PrevSeq
// makes it conditional; opts.TTL is ignored.
func (lk *LiveKV) Delete(ctx context.Context, key string, opts KVSetOptions) (SetResult, error) {
	return lk.write(ctx, key, nil, true, opts)
}

func (lk *LiveKV) write(ctx context.Context, key string, value []byte, tomb bool, opts KVSetOptions) (SetResult, error) {
	if key == "" {
		return SetResult{}, Errorf(CodeBadRequest, "empty key")
	}
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return SetResult{}, ErrClosed
	}
	p := &kvPending{value: value, tomb: tomb}
	lk.pending[key] = p
	it, have := lk.cur[key]
	var prev *uint64
	switch {
	case opts.PrevSeq != nil:
		v := *opts.PrevSeq
		if v == 0 && have && it.tomb {
			v = it.seq // "must not exist": a tombstone is absent
		}
		prev = &v
	case lk.opts.Merge != nil:
		v := uint64(0)
		if have {
			v = it.seq
		}
		prev = &v
	}
	lk.mu.Unlock()

	for round := 0; ; round++ {
		if lk.beforeSave != nil {
			lk.beforeSave()
		}
		so := SetOptions{PrevSeq: prev, MsgID: newMsgID(), TTL: opts.TTL}
		if tomb {
			so.TTL = lk.opts.TombstoneTTL
			so.Headers = map[string]string{HdrTombstone: "true"}
		}
		res, err := lk.kv.Set(ctx, key, value, so)
		if err == nil && lk.afterSave != nil {
			lk.afterSave(res.Seq)
		}
		if err == nil {
			lk.mu.Lock()
			if lk.pending[key] == p {
				if lk.seen >= res.Seq {
					// The feed got there first (the feed is published before
					// the reply): cur already says what became of the write.
					delete(lk.pending, key)
				} else {
					p.wait = res.Seq
				}
			}
			lk.mu.Unlock()
			return res, nil
		}
		if lk.opts.Merge == nil || opts.PrevSeq != nil || !errors.Is(err, ErrWrongLastSequence) || round+1 >= liveKVMergeRounds {
			lk.dropPending(key, p)
			return SetResult{}, err
		}
		// Another writer got there first: merge with what it wrote.
		var remote []byte
		var remoteSeq uint64
		m, gerr := lk.kv.Get(ctx, key)
		switch {
		case gerr == nil:
			remoteSeq = m.Seq
			if m.Headers[HdrTombstone] == "" {
				remote = m.Value
			}
		case !errors.Is(gerr, ErrNotFound):
			lk.dropPending(key, p)
			return SetResult{}, fmt.Errorf("live kv: merge %q: %w", key, gerr)
		}
		var local []byte
		if !tomb {
			local = value
		}
		merged := lk.opts.Merge(key, local, remote)
		value, tomb = merged, merged == nil
		prev = &remoteSeq
		lk.mu.Lock()
		if lk.pending[key] == p {
			p.value, p.tomb = value, tomb
		}
		lk.mu.Unlock()
	}
}

// dropPending forgets the local write p of key unless a newer one replaced it.
func (lk *LiveKV) dropPending(key string, p *kvPending) {
	lk.mu.Lock()
	if lk.pending[key] == p {
		delete(lk.pending, key)
	}
	lk.mu.Unlock()
}

// Watcher is the watcher that feeds the copy (for its LastSeq and Resyncs;
// its Done and Err tell when it ended for good, after which the copy no
// longer follows the stream).
func (lk *LiveKV) Watcher() *Watcher { return lk.w }

// Close stops following the feed. Writes in flight finish on their own
// contexts; later ones return ErrClosed. It is idempotent.
func (lk *LiveKV) Close() error {
	lk.mu.Lock()
	lk.closed = true
	lk.mu.Unlock()
	return lk.w.Stop(context.Background())
}

// newMsgID returns a random msgID: 128 bits, so two writers never share one.
func newMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
