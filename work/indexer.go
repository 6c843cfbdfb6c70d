package work

import (
	"context"
	"encoding/json"
	"fmt"
)

// Indexer turns a range's overview lines into whatever the application
// keeps. A worker calls Begin once per lease, Line for every spooled line
// in article order, then End; End's result is recorded in the range under
// the lease's fence. A range can be handed out again (after a lease
// expired, a failure or a release), so only the result of the lease that
// finished counts: an indexer with side effects must make them keyed by
// the range, or apply them from the recorded results.
type Indexer interface {
	Begin(ctx context.Context, r Range) (RangeIndex, error)
}

// RangeIndex indexes one leased range. A worker that loses the lease or
// stops mid-range drops it without calling End.
type RangeIndex interface {
	Line(ctx context.Context, article int64, line []byte) error
	End(ctx context.Context) (json.RawMessage, error)
}

// GroupCount is what CountingIndexer records of one group: how many
// articles it saw and the sum of their ArticleDigest, so an article seen
// twice and one never seen both change it.
type GroupCount struct {
	Articles int64  `json:"articles"`
	Sum      uint64 `json:"sum"`
}

// Add adds b's articles to a.
func (a *GroupCount) Add(b GroupCount) {
	a.Articles += b.Articles
	a.Sum += b.Sum
}

// ArticleDigest is a 64-bit mix of a group's name and an article number
// (FNV-1a of the name, folded with the number through SplitMix64's
// finalizer), so that sums of digests tell sets of articles apart.
func ArticleDigest(group string, article int64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(group); i++ {
		h ^= uint64(group[i])
		h *= 1099511628211
	}
	x := h ^ (uint64(article) + 0x9e3779b97f4a7c15)
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ExpectedCount is the GroupCount of a group's articles, each seen once.
func ExpectedCount(group string, articles []int64) GroupCount {
	var c GroupCount
	for _, a := range articles {
		c.Add(GroupCount{Articles: 1, Sum: ArticleDigest(group, a)})
	}
	return c
}

// CountingIndexer counts the articles of each range and sums their
// digests; its result is a JSON map from group to GroupCount. It stands in
// for a real indexer in tests and checks.
type CountingIndexer struct{}

// Begin implements Indexer.
func (CountingIndexer) Begin(_ context.Context, r Range) (RangeIndex, error) {
	return &countingRange{group: r.Group}, nil
}

type countingRange struct {
	group string
	c     GroupCount
}

func (cr *countingRange) Line(_ context.Context, article int64, _ []byte) error {
	cr.c.Add(GroupCount{Articles: 1, Sum: ArticleDigest(cr.group, article)})
	return nil
}

func (cr *countingRange) End(context.Context) (json.RawMessage, error) {
	b, err := json.Marshal(map[string]GroupCount{cr.group: cr.c})
	if err != nil {
		return nil, fmt.Errorf("work: counting indexer: %w", err)
	}
	return b, nil
}

// SumResults adds up the CountingIndexer results of the done ranges among
// ranges (the others are skipped), by group.
func SumResults(ranges []Range) (map[string]GroupCount, error) {
	out := map[string]GroupCount{}
	for _, r := range ranges {
		if r.State != StateDone {
			continue
		}
		var m map[string]GroupCount
		if err := json.Unmarshal(r.Result, &m); err != nil {
			return nil, fmt.Errorf("work: sum results: range %d: %w", r.ID, err)
		}
		for g, c := range m {
			t := out[g]
			t.Add(c)
			out[g] = t
		}
	}
	return out, nil
}
