package usenet

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/switchyard-dev/switchyard/work"
)

// Counters are running totals of what indexers did, for monitoring (see
// Counted; web/metrics exports them). The zero value is ready; methods are
// safe for concurrent use.
type Counters struct {
	ranges, articles, skipped, binaries, releases, published, unmatched, tooLarge atomic.Int64
}

// CounterStats is a snapshot of Counters.
type CounterStats struct {
	Ranges    int64 // ranges indexed to the end
	Articles  int64 // overview lines (articles, i.e. parts) indexed
	Skipped   int64 // lines that were not usable overview lines
	Binaries  int64 // binaries created or changed
	Releases  int64 // releases created or changed
	Published int64 // visible releases written to the releases stream
	// Unmatched counts the articles left out for having neither a file
	// name nor a part counter (see Unmatched). Per group it is in the
	// ranges' results (work status), not here: group names must not
	// become metric labels.
	Unmatched int64
	// TooLarge counts the records left as they were because their new
	// state did not fit the bus's largest message (see
	// ApplyResult.TooLarge): each means articles left out.
	TooLarge int64
}

// Stats returns the totals.
func (c *Counters) Stats() CounterStats {
	return CounterStats{
		Ranges: c.ranges.Load(), Articles: c.articles.Load(), Skipped: c.skipped.Load(),
		Binaries: c.binaries.Load(), Releases: c.releases.Load(), Published: c.published.Load(),
		Unmatched: c.unmatched.Load(), TooLarge: c.tooLarge.Load(),
	}
}

// add counts one range's result.
func (c *Counters) add(r RangeResult) {
	c.ranges.Add(1)
	c.articles.Add(int64(r.Articles))
	c.skipped.Add(int64(r.Skipped))
	c.binaries.Add(int64(r.Binaries))
	c.releases.Add(int64(r.Releases))
	c.published.Add(int64(r.Published))
	c.unmatched.Add(int64(r.Unmatched))
	c.tooLarge.Add(int64(r.TooLarge))
}

// Counted wraps ix so that every range it indexes to the end adds its
// RangeResult to c. It reads the result the range records, so it needs no
// hook inside the indexer and costs one small decode per range, nothing
// per line.
func Counted(ix work.Indexer, c *Counters) work.Indexer {
	return countedIndexer{ix, c}
}

type countedIndexer struct {
	work.Indexer
	c *Counters
}

func (ci countedIndexer) Begin(ctx context.Context, r work.Range) (work.RangeIndex, error) {
	ri, err := ci.Indexer.Begin(ctx, r)
	if err != nil {
		return nil, err
	}
	return countedRange{ri, ci.c}, nil
}

type countedRange struct {
	work.RangeIndex
	c *Counters
}

func (cr countedRange) End(ctx context.Context) (json.RawMessage, error) {
	raw, err := cr.RangeIndex.End(ctx)
	if err != nil {
		return raw, err
	}
	var res RangeResult
	// A result of another shape (another indexer) counts the range only.
	_ = json.Unmarshal(raw, &res)
	cr.c.add(res)
	return raw, nil
}
