package usenet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchyard-dev/switchyard/work"
)

// Indexer is the usenet indexer as a work.Indexer: a worker hands it each
// leased range's overview lines; it gathers them into binaries in memory
// (a range is bounded) and, at the end of the range, merges them into the
// store (see Store.Apply). A range indexed twice changes nothing the
// second time, so a lease that expired mid-write is harmless.
type Indexer struct {
	// Store receives the range's records; its policy (SetPolicy) says
	// what is published.
	Store *Store
	// Now is the clock of the settle window; time.Now when nil.
	Now func() time.Time
}

// MaxFutureDate is how far ahead of the indexer's clock an article's
// posting date may be. A poster's clock, or a server's, may be hours off;
// a date further ahead is forged (a release dated in the year 9999 would
// sort first in every feed and search for good) and is taken as one that
// does not parse: 0, unknown.
const MaxFutureDate = 24 * time.Hour

// RangeResult is what a range records of its indexing.
type RangeResult struct {
	Articles int `json:"articles"`
	// Skipped counts lines that are not overview lines or have no
	// message-id: they cannot be in an NZB.
	Skipped int `json:"skipped"`
	// Unmatched counts articles with neither a file name nor a part
	// counter (an obfuscated subject): nothing ties them to other
	// articles, so they are left out (see Unmatched).
	Unmatched int `json:"unmatched"`
	// Group is the range's group, which Unmatched and Skipped are of.
	Group string `json:"group,omitempty"`
	ApplyResult
}

// Begin implements work.Indexer.
func (ix *Indexer) Begin(_ context.Context, r work.Range) (work.RangeIndex, error) {
	if ix.Store == nil {
		return nil, fmt.Errorf("usenet: indexer has no store")
	}
	return &rangeIndex{ix: ix, group: r.Group, batch: NewBatch(), future: ix.now().Add(MaxFutureDate).Unix()}, nil
}

type rangeIndex struct {
	ix    *Indexer
	group string
	// parser remembers the previous line: a range's lines are mostly
	// consecutive parts of the same files.
	parser    ArticleParser
	batch     *Batch
	skipped   int
	unmatched int
	// future is the latest posting date taken as it is (MaxFutureDate).
	future int64
}

// Unmatched reports whether a is an article no release can be made of:
// no file name and no part counter (a subject of random characters, as
// obfuscating posters send one per article). Its subject shares nothing
// with its post's other articles, so as a release of its own it would
// be a one-article "file" named by noise. A part counter is Counter, not
// Parts > 1: the "(1/1)" of a one-article file counts.
func Unmatched(a Article) bool { return a.Subject.Name == "" && !a.Subject.Counter }

func (ri *rangeIndex) Line(_ context.Context, _ int64, line []byte) error {
	a, err := ri.parser.Parse(line, ri.group)
	if err != nil {
		ri.skipped++
		return nil
	}
	if Unmatched(a) {
		ri.unmatched++
		return nil
	}
	if a.Date > ri.future {
		a.Date = 0
	}
	ri.batch.Add(a)
	return nil
}

func (ri *rangeIndex) End(ctx context.Context) (json.RawMessage, error) {
	res, err := ri.ix.Store.Apply(ctx, ri.batch.Binaries(), ri.ix.now())
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(RangeResult{
		Articles: ri.batch.Articles() + ri.unmatched, Skipped: ri.skipped, Unmatched: ri.unmatched, Group: ri.group, ApplyResult: res,
	})
	if err != nil {
		return nil, fmt.Errorf("usenet: encode range result: %w", err)
	}
	return b, nil
}

// now is the indexer's clock (Now, else time.Now).
func (ix *Indexer) now() time.Time {
	if ix.Now != nil {
		return ix.Now()
	}
	return time.Now()
}
