package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

// benchWords is the vocabulary of the generated names: a few very common
// words (the quality tags every release has) and many rarer ones.
var (
	benchCommon = []string{"720p", "1080p", "x264", "web", "hdtv", "bluray"}
	benchRare   = func() []string {
		out := make([]string, 5000)
		for i := range out {
			out[i] = "word" + strconv.Itoa(i)
		}
		return out
	}()
	benchCats = []int{usenet.CatTVHD, usenet.CatTVSD, usenet.CatMoviesHD, usenet.CatMoviesSD, usenet.CatAudioMP3, usenet.CatOtherMisc}
)

// BenchmarkSearch measures searches over an index of 100,000 releases
// (SWITCHYARD_SEARCH_BENCH_ROWS changes it, e.g. 1000000) and reports
// the p50 and p99 latency of a mix of queries: common and rare words, two
// words, categories, season and episode, maxage, and no condition.
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	ix := benchIndex(b)

	queries := []Query{
		{},
		{Words: "1080p"},
		{Words: "x264 web"},
		{Words: benchRare[7]},
		{Words: benchRare[42] + " " + benchRare[99]},
		{Words: "nothing matches this"},
		{Cats: []int{usenet.CatTV}},
		{Words: "720p", Cats: []int{usenet.CatMoviesHD}},
		{Words: benchRare[3], Season: 2, Cats: []int{usenet.CatTV}},
		{Season: 3, Episode: 4, Cats: []int{usenet.CatTV}},
		{Words: "hdtv", MaxAge: 30 * 24 * time.Hour},
		{Group: "alt.binaries.g5", Offset: 500},
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		q := queries[i%len(queries)]
		i++
		t0 := time.Now()
		if _, err := ix.Search(ctx, q); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkSearchWorstQuery runs the costliest query Search accepts
// (worstQuery: MaxWordsBytes of Words with MaxWords distinct words, the
// commonest of the generated names among them, and MaxCats categories)
// over the index of BenchmarkSearch, and reports its time and allocations
// per search. A Newznab request gives such a search its time budget.
func BenchmarkSearchWorstQuery(b *testing.B) {
	ctx := context.Background()
	ix := benchIndex(b)
	q := worstQuery()
	if err := q.Check(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ix.Search(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// benchIndex is an index of 100,000 generated releases
// (SWITCHYARD_SEARCH_BENCH_ROWS changes it, e.g. 1000000).
func benchIndex(b *testing.B) *Index {
	b.Helper()
	rows := 100_000
	if v := os.Getenv("SWITCHYARD_SEARCH_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("SWITCHYARD_SEARCH_BENCH_ROWS=%q: want a positive number", v)
		}
		rows = n
	}
	ctx := context.Background()
	ix := openTest(b)
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	const batch = 5000
	for lo := 0; lo < rows; lo += batch {
		var bt Batch
		for i := lo; i < min(lo+batch, rows); i++ {
			name := fmt.Sprintf("%s.%s.%s.S%02dE%02d.%s.%s-GRP%d",
				benchRare[rng.IntN(len(benchRare))], benchRare[rng.IntN(len(benchRare))], benchRare[rng.IntN(len(benchRare))],
				rng.IntN(10)+1, rng.IntN(20)+1, benchCommon[rng.IntN(len(benchCommon))], benchCommon[rng.IntN(len(benchCommon))], rng.IntN(100))
			r := usenet.Release{
				ID: fmt.Sprintf("%016x", rng.Uint64()), Name: name, Poster: "poster@example.com",
				Category: benchCats[rng.IntN(len(benchCats))], Groups: []string{"alt.binaries.g" + strconv.Itoa(rng.IntN(20))},
				Date: testNow.Unix() - rng.Int64N(3*365*86400), Size: rng.Int64N(1 << 32), Files: 30, Version: 1, Visible: true,
				Binaries: []usenet.FileSummary{{ID: "b", Name: name + ".part01.rar", Parts: 100, Present: 100, Bytes: 1 << 27}},
			}
			bt.Changes = append(bt.Changes, Change{Seq: uint64(i + 1), Release: r})
		}
		bt.LastSeq = uint64(min(lo+batch, rows))
		if err := ix.Apply(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("applied %d releases in %v", rows, time.Since(start).Round(time.Millisecond))

	return ix
}
