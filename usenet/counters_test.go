package usenet

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchyard-dev/switchyard/work"
)

// fixedIndexer ends every range with the same result.
type fixedIndexer struct{ res json.RawMessage }

func (f fixedIndexer) Begin(context.Context, work.Range) (work.RangeIndex, error) {
	return fixedRange(f), nil
}

type fixedRange struct{ res json.RawMessage }

func (fixedRange) Line(context.Context, int64, []byte) error { return nil }

func (f fixedRange) End(context.Context) (json.RawMessage, error) { return f.res, nil }

// TestCountedAddsRangeResults: each range ended adds its RangeResult; the
// result is passed on unchanged.
// (Was: the records a range left as they were for being too large were in
// its result (too_large) but in no counter.)
func TestCountedAddsRangeResults(t *testing.T) {
	t.Parallel()
	res, err := json.Marshal(RangeResult{Articles: 10, Skipped: 1, Unmatched: 2, ApplyResult: ApplyResult{Binaries: 3, Releases: 2, Published: 1, TooLarge: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var c Counters
	ix := Counted(fixedIndexer{res}, &c)
	for range 2 {
		ri, err := ix.Begin(t.Context(), work.Range{ID: 1})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.End(t.Context())
		if err != nil || string(got) != string(res) {
			t.Fatalf("End = %s, %v; want %s", got, err, res)
		}
	}
	want := CounterStats{Ranges: 2, Articles: 20, Skipped: 2, Binaries: 6, Releases: 4, Published: 2, Unmatched: 4, TooLarge: 2}
	if got := c.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}
