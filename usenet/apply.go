package usenet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
)

// Bounds of one setMany request: well under persist.MaxBatch and the bus's
// largest message.
const (
	applyBatchEntries = 500
	applyBatchBytes   = 512 << 10
	// applyParallel bounds the read-merge-write loops in flight.
	applyParallel = 8
	// applyRetries bounds the compare-and-set attempts on one record; each
	// conflict means another writer made progress on it.
	applyRetries = 50
)

// ApplyResult counts what one Apply changed.
type ApplyResult struct {
	Binaries  int `json:"binaries"`  // binaries created or changed
	Releases  int `json:"releases"`  // releases (posts) created or changed
	Published int `json:"published"` // visible releases written to the releases stream
	// TooLarge counts the records left as they were because their new
	// state did not fit the bus's largest message (persist.ErrTooLarge):
	// a binary of some 100,000 parts or of very long message-ids, a
	// collection or release of tens of thousands of files. The articles
	// that would have grown them are left out; the rest of the range is
	// written. Failing the range instead failed it on every attempt, with
	// every other post in it, and every later range that added to the
	// record.
	TooLarge int `json:"too_large,omitempty"`
}

// Apply merges bins (a range's binaries, as a Batch gathered them) into the
// stored binaries, then their summaries into the stored releases, and
// publishes every release that is visible after the change. Every write is
// a merge under compare-and-set, so Apply may run again over the same
// articles (a range handed out twice), concurrently with other workers and
// in any order, and the stored records end the same.
//
// A release is published before its record is written: a crash between
// the two leaves the range unfinished, and the next attempt writes the
// record and publishes again. A reader of the releases stream therefore
// keeps, per release, the record of the highest Version it has seen.
func (s *Store) Apply(ctx context.Context, bins []*Binary, now time.Time) (ApplyResult, error) {
	var res ApplyResult
	finals, changed, tooLarge, err := s.applyBinaries(ctx, bins)
	if err != nil {
		return res, err
	}
	res.Binaries = changed
	res.TooLarge = tooLarge

	gap := s.policy.gap()
	deltas := map[string]*Collection{}
	var order []string
	for _, b := range finals {
		if b == nil {
			continue // not stored (too large): its collection keeps what it had
		}
		c := CollectionOf(b, gap)
		if d, ok := deltas[c.ID]; ok {
			d.Merge(c)
			continue
		}
		deltas[c.ID] = &c
		order = append(order, c.ID)
	}
	colls := make([]*Collection, 0, len(order))
	for _, id := range order {
		colls = append(colls, deltas[id])
	}
	var n int
	res.Releases, res.Published, n, err = s.applyCollections(ctx, colls, now)
	res.TooLarge += n
	return res, err
}

// tooLarge logs a record left as it was because its new state did not fit
// the bus's largest message; err says how large it was.
func (s *Store) tooLarge(kind, key string, err error) {
	lifecycle.Logger(s.policy.Logger, "indexer").Warn("usenet: record too large for the bus, left as it was",
		"scope", s.scope, "record", kind, "key", key, "err", err)
}

// applyBinaries merges bins into the binaries KV and returns the stored
// state of each afterwards (nil for one left out as too large), how many
// it changed and how many it left out.
func (s *Store) applyBinaries(ctx context.Context, bins []*Binary) ([]*Binary, int, int, error) {
	conflicts, large, err := createAll(ctx, s.binaries, len(bins), func(i int) (string, any) { return bins[i].ID, bins[i] })
	if err != nil {
		return nil, 0, 0, fmt.Errorf("usenet: store binaries: %w", err)
	}
	created := len(bins) - len(conflicts) - len(large)
	// The created ones are stored as they are; the others as merged below.
	finals := slices.Clone(bins)
	for _, l := range large {
		finals[l.i] = nil
		s.tooLarge("binary", bins[l.i].ID, l.err)
	}
	var mu sync.Mutex
	changed, tooLarge := created, len(large)
	err = parallel(ctx, conflicts, func(ctx context.Context, i int) error {
		b := bins[i]
		final, ch, err := mergeLoop(ctx, s.binaries, b.ID, func(cur *Binary) (bool, error) { return cur.Merge(*b), nil })
		if errors.Is(err, persist.ErrTooLarge) {
			s.tooLarge("binary", b.ID, err)
			mu.Lock()
			finals[i] = nil
			tooLarge++
			mu.Unlock()
			return nil
		}
		if err != nil {
			return fmt.Errorf("usenet: store binary %s: %w", b.ID, err)
		}
		final.base = b.base
		mu.Lock()
		finals[i] = final
		if ch {
			changed++
		}
		mu.Unlock()
		return nil
	})
	return finals, changed, tooLarge, err
}

// applyCollections merges colls into the collections KV, publishing the
// posts that are visible and changed after it; it returns how many posts
// it changed and published, and how many collections it left as they were
// for being too large (the record, or a release it would publish).
func (s *Store) applyCollections(ctx context.Context, colls []*Collection, now time.Time) (int, int, int, error) {
	ms := now.UnixMilli()
	// New collections with nothing to publish first, in batches: most of
	// a range's are. One with a post to publish goes through mergeLoop,
	// which publishes before it writes (see Apply): published before
	// createAll, a post of a collection another writer created meanwhile
	// could replace that writer's newer record in the releases stream.
	var fresh []Collection
	var freshOf, rest []int
	for i, c := range colls {
		f := *c
		if len(f.update(s.policy, ms)) > 0 {
			rest = append(rest, i)
			continue
		}
		fresh = append(fresh, f)
		freshOf = append(freshOf, i)
	}
	conflicts, large, err := createAll(ctx, s.collections, len(fresh), func(i int) (string, any) { return fresh[i].ID, &fresh[i] })
	if err != nil {
		return 0, 0, 0, fmt.Errorf("usenet: store collections: %w", err)
	}
	changed, published, tooLarge := 0, 0, len(large)
	for _, f := range fresh {
		changed += len(f.States)
	}
	for _, i := range conflicts {
		changed -= len(fresh[i].States) // not new after all: merged below
		rest = append(rest, freshOf[i])
	}
	for _, l := range large {
		changed -= len(fresh[l.i].States)
		s.tooLarge("collection", fresh[l.i].ID, l.err)
	}
	var mu sync.Mutex
	err = parallel(ctx, rest, func(ctx context.Context, i int) error {
		d := colls[i]
		var pub []Release
		var n int
		_, ch, err := s.publishingMerge(ctx, d.ID, func(cur *Collection) (bool, []Release, error) {
			if !cur.Merge(*d) {
				return false, nil, nil
			}
			before := slices.Clone(cur.States)
			pub = cur.update(s.policy, ms)
			n = changedStates(before, cur.States)
			return true, pub, nil
		})
		if errors.Is(err, persist.ErrTooLarge) {
			// The record, or a release it was to publish first. A release
			// published before a record refused stays in the stream.
			s.tooLarge("collection", d.ID, err)
			mu.Lock()
			tooLarge++
			mu.Unlock()
			return nil
		}
		if err != nil {
			return fmt.Errorf("usenet: store collection %s: %w", d.ID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if ch {
			changed += n
			published += len(pub)
		}
		return nil
	})
	return changed, published, tooLarge, err
}

// changedStates counts the states of after that are new or of another
// version than in before.
func changedStates(before, after []PostState) int {
	n := 0
	for _, a := range after {
		if !slices.ContainsFunc(before, func(b PostState) bool { return b.ID == a.ID && b.Version == a.Version }) {
			n++
		}
	}
	return n
}

// publishingMerge is mergeLoop on the collection id for a merge that
// publishes: merge reports whether it changed cur and returns the posts to
// publish, which go to the releases stream before the write (see Apply),
// so that no writer that reads the record after it can publish before it.
// An attempt that published and then lost its write (another writer's
// record came first, and mergeLoop tried again) left rows in the stream
// that the stored record need not hold, at versions the winner may have
// published too; the next attempt may have nothing of its own to publish.
// So every attempt after such a loss publishes all the visible posts of
// the record it writes, without de-duplication (publishAgain), and writes
// it even when merge changed nothing: the write's compare-and-set orders
// those rows before any later writer's, as for any publish. It returns the
// record and whether merge changed it.
func (s *Store) publishingMerge(ctx context.Context, id string, merge func(cur *Collection) (bool, []Release, error)) (*Collection, bool, error) {
	lost, published, changed := false, false, false
	final, _, err := mergeLoop(ctx, s.collections, id, func(cur *Collection) (bool, error) {
		lost = lost || published // a second attempt: the last one's write lost
		published = false
		ok, pub, err := merge(cur)
		if err != nil {
			return false, err
		}
		changed = ok
		switch {
		case lost:
			published = true
			return true, s.publishAgain(ctx, cur.visible(s.policy))
		case !ok || len(pub) == 0:
			return ok, nil
		}
		published = true
		return true, s.publish(ctx, pub)
	})
	if err != nil {
		return nil, false, err
	}
	return final, changed, nil
}

// publish writes rels to the releases stream, keyed by id. A retried write
// of the same record is de-duplicated by a hash of its value.
func (s *Store) publish(ctx context.Context, rels []Release) error {
	return s.publishRows(ctx, rels, true)
}

// publishAgain is publish without the de-duplication: the rows it writes
// were most likely published before, and then replaced by rows of an
// attempt that lost its write (publishingMerge), so a msgID seen within
// the window would leave those in place. A retry of it writes the same
// rows again, which replace their own.
func (s *Store) publishAgain(ctx context.Context, rels []Release) error {
	return s.publishRows(ctx, rels, false)
}

// publishRows is publish, with msgIDs (dedup) or without.
func (s *Store) publishRows(ctx context.Context, rels []Release, dedup bool) error {
	var entries []persist.Entry
	for _, r := range rels {
		v, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("usenet: encode release %s: %w", r.ID, err)
		}
		e := persist.Entry{Key: r.ID, Value: v}
		if dedup {
			sum := sha256.Sum256(v)
			e.MsgID = r.ID + "-" + hex.EncodeToString(sum[:8])
		}
		entries = append(entries, e)
	}
	single := false // after a batch too large: one release per request
	for len(entries) > 0 {
		n := 1
		if !single {
			n = batchLen(entries)
		}
		out, err := s.releases.SetMany(ctx, entries[:n])
		if errors.Is(err, persist.ErrTooLarge) && n > 1 {
			single = true
			continue
		}
		if err != nil {
			return fmt.Errorf("usenet: publish releases: %w", err)
		}
		for i, o := range out {
			if o.Err != nil {
				return fmt.Errorf("usenet: publish release %s: %w", entries[i].Key, o.Err)
			}
		}
		entries = entries[n:]
	}
	return nil
}

// batchLen is how many of entries fit one setMany request.
func batchLen(entries []persist.Entry) int {
	size := 0
	for i, e := range entries {
		size += len(e.Value) + len(e.Key) + 64
		if i > 0 && (i >= applyBatchEntries || size > applyBatchBytes) {
			return i
		}
	}
	return len(entries)
}

// refused is a record createAll did not write, and why.
type refused struct {
	i   int
	err error
}

// createAll writes n records that must not exist yet (compare-and-set on
// seq 0), in batches, and returns the indexes of those that did exist and
// of those too large for the bus (persist.ErrTooLarge), which it leaves
// out. A batch refused as too large is written again one record at a
// time, so that one record too large refuses only itself.
func createAll(ctx context.Context, kv *persist.KV, n int, rec func(i int) (key string, v any)) ([]int, []refused, error) {
	entries := make([]persist.Entry, n)
	zero := uint64(0)
	for i := range n {
		key, v := rec(i)
		b, hdr, err := encodeRecord(v)
		if err != nil {
			return nil, nil, fmt.Errorf("encode %s: %w", key, err)
		}
		entries[i] = persist.Entry{Key: key, Value: b, Headers: hdr, PrevSeq: &zero}
	}
	var conflicts []int
	var large []refused
	singlesTo := 0 // entries before it go one per request
	for off := 0; off < n; {
		k := 1
		if off >= singlesTo {
			k = batchLen(entries[off:])
		}
		out, err := kv.Stream().SetMany(ctx, entries[off:off+k])
		switch {
		case errors.Is(err, persist.ErrTooLarge) && k > 1:
			singlesTo = off + k
			continue
		case errors.Is(err, persist.ErrTooLarge):
			large = append(large, refused{off, err})
			off++
			continue
		case err != nil:
			return nil, nil, err
		}
		for j, o := range out {
			switch {
			case o.Err == nil:
			case errors.Is(o.Err, persist.ErrWrongLastSequence):
				conflicts = append(conflicts, off+j)
			case errors.Is(o.Err, persist.ErrTooLarge):
				large = append(large, refused{off + j, o.Err})
			default:
				return nil, nil, fmt.Errorf("%s: %w", entries[off+j].Key, o.Err)
			}
		}
		off += k
	}
	return conflicts, large, nil
}

// mergeLoop reads key, applies merge to it and writes it back under
// compare-and-set until no other writer came between, or merge reports no
// change. It returns the record as stored afterwards and whether it wrote.
func mergeLoop[T any](ctx context.Context, kv *persist.KV, key string, merge func(*T) (bool, error)) (*T, bool, error) {
	for range applyRetries {
		var cur T
		var prev uint64
		m, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, persist.ErrNotFound):
		case err != nil:
			return nil, false, err
		default:
			if err := decodeRecord(m, &cur); err != nil {
				return nil, false, fmt.Errorf("decode: %w", err)
			}
			prev = m.Seq
		}
		ch, err := merge(&cur)
		if err != nil {
			return nil, false, err
		}
		if !ch {
			return &cur, false, nil
		}
		v, hdr, err := encodeRecord(&cur)
		if err != nil {
			return nil, false, fmt.Errorf("encode: %w", err)
		}
		_, err = kv.Set(ctx, key, v, persist.SetOptions{PrevSeq: &prev, Headers: hdr})
		if errors.Is(err, persist.ErrWrongLastSequence) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return &cur, true, nil
	}
	return nil, false, fmt.Errorf("%d writers in a row came between read and write", applyRetries)
}

// parallel runs fn for each index with at most applyParallel in flight and
// returns the first error, cancelling the rest.
func parallel(ctx context.Context, idx []int, fn func(context.Context, int) error) error {
	if len(idx) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, applyParallel)
	for _, i := range idx {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
