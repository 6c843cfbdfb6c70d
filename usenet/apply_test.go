package usenet

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

// storedState reads every binary of a store, and the posts of its
// collections.
func storedState(t *testing.T, s *Store) (map[string]Binary, map[string]Release) {
	t.Helper()
	ctx := context.Background()
	bins := map[string]Binary{}
	rels := map[string]Release{}
	read := func(kv *persist.KV, fn func(key string, m *persist.Message) error) {
		if _, err := kv.Stream().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
			if m.Key == "" {
				return nil
			}
			return fn(m.Key, m)
		}); err != nil {
			t.Fatal(err)
		}
	}
	read(s.binaries, func(k string, m *persist.Message) error {
		var b Binary
		err := decodeRecord(m, &b)
		bins[k] = b
		return err
	})
	colls := map[string]Collection{}
	read(s.collections, func(k string, m *persist.Message) error {
		var c Collection
		err := decodeRecord(m, &c)
		colls[k] = c
		return err
	})
	for id, r := range postsOf(colls) {
		rels[id] = r
	}
	return bins, rels
}

// publishedReleases reads the releases stream of s as a reader keeping,
// per release, the record of the highest version it has seen (the later
// row of two at one version).
func publishedReleases(t *testing.T, s *Store) map[string]Release {
	t.Helper()
	pub := map[string]Release{}
	if _, err := s.Releases().Scan(context.Background(), persist.Range{}, func(m *persist.Message) error {
		var r Release
		if err := json.Unmarshal(m.Value, &r); err != nil {
			return err
		}
		if cur, ok := pub[m.Key]; !ok || r.Version >= cur.Version {
			pub[m.Key] = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestApplyIndependentOfWorkers: several workers applying a random split of
// the articles concurrently, in random order, some ranges twice, store the
// same binaries and releases as one pass over all of them; every release
// is published once complete, and the releases stream holds each visible
// release at its highest version.
func TestApplyIndependentOfWorkers(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	c := env.Client()
	ctx := context.Background()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			posts := genPosts(rng, 30, []string{"alt.binaries.a", "alt.binaries.b"})
			byGroup := articles(posts)
			var ranges [][]Article
			for _, as := range byGroup {
				ranges = append(ranges, split(rng, as)...)
			}
			for range 1 + rng.IntN(4) {
				ranges = append(ranges, ranges[rng.IntN(len(ranges))])
			}
			rng.Shuffle(len(ranges), func(i, j int) { ranges[i], ranges[j] = ranges[j], ranges[i] })
			wantBins, wantRels := memApply(ranges)

			st, err := NewStore(c, fmt.Sprintf("usenet-apply-%d", seed))
			if err != nil {
				t.Fatal(err)
			}
			st.SetPolicy(testPolicy)
			workers := 1 + int(seed)*2
			todo := make(chan []Article, len(ranges))
			for _, r := range ranges {
				todo <- r
			}
			close(todo)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Go(func() {
					for r := range todo {
						b := NewBatch()
						for _, a := range r {
							b.Add(a)
						}
						if _, err := st.Apply(ctx, b.Binaries(), time.Now()); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			gotBins, gotRels := storedState(t, st)
			if !reflect.DeepEqual(gotBins, exported(wantBins)) {
				t.Fatalf("%d workers: stored binaries differ from one pass (%d vs %d)", workers, len(gotBins), len(wantBins))
			}
			if !reflect.DeepEqual(gotRels, wantRels) {
				t.Fatalf("%d workers: stored releases differ from one pass", workers)
			}
			checkPosts(t, posts, gotRels, gotBins)

			// Every release is complete, so every one is published, and
			// the stream's record of each is its stored record.
			pub := publishedReleases(t, st)
			for id, want := range wantRels {
				got, ok := pub[id]
				if !ok || !got.Visible {
					t.Fatalf("release %s (%s) not published", id, want.Name)
				}
				got.Version, got.Updated, got.Visible = 0, 0, false
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("published release %s differs from the stored one:\n%+v\n%+v", id, got, want)
				}
				r, err := st.Release(ctx, id)
				if err != nil || r.ID != id {
					t.Fatalf("Release(%s) = %+v, %v", id, r, err)
				}
			}
		})
	}
}

// TestSettle: an incomplete release stays hidden until it has not changed
// for the window, and then only with enough of it present.
func TestSettle(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	ctx := context.Background()
	st, err := NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(testPolicy)
	rng := rand.New(rand.NewPCG(1, 2))
	posts := genPosts(rng, 6, []string{"alt.binaries.a"})
	// Drop one article of every post and repost: none is complete.
	var arts []Article
	for _, as := range articles(posts) {
		seen := map[string]bool{}
		for _, a := range as {
			key := a.MessageID[:strings.Index(a.MessageID, ".f")] // the copy
			if !seen[key] {
				seen[key] = true
				continue
			}
			arts = append(arts, a)
		}
	}
	b := NewBatch()
	for _, a := range arts {
		b.Add(a)
	}
	t0 := time.Unix(1_800_000_000, 0)
	res, err := st.Apply(ctx, b.Binaries(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 0 {
		t.Fatalf("incomplete releases published: %+v", res)
	}
	cfg := SettleConfig{Window: time.Hour, MinCompletion: 0.9, MinBytes: -1}
	if n, err := st.Settle(ctx, t0.Add(59*time.Minute), cfg); err != nil || n != 0 {
		t.Fatalf("settle before the window: %d, %v", n, err)
	}
	_, rels := storedState(t, st)
	wantVisible := 0
	for _, r := range rels {
		if r.Completion() >= 0.9 {
			wantVisible++
		}
	}
	if wantVisible == 0 || wantVisible == len(rels) {
		t.Fatalf("the test needs releases on both sides of the threshold: %d of %d", wantVisible, len(rels))
	}
	n, err := st.Settle(ctx, t0.Add(time.Hour), cfg)
	if err != nil || n != wantVisible {
		t.Fatalf("settle after the window published %d, %v; want %d", n, err, wantVisible)
	}
	if n, err := st.Settle(ctx, t0.Add(2*time.Hour), cfg); err != nil || n != 0 {
		t.Fatalf("a second sweep published %d, %v", n, err)
	}
	// The missing parts arrive: every release is complete and published,
	// the settled ones again at a higher version.
	b = NewBatch()
	for _, as := range articles(posts) {
		for _, a := range as {
			b.Add(a)
		}
	}
	res, err = st.Apply(ctx, b.Binaries(), t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != len(rels) {
		t.Fatalf("late parts published %d releases, want %d", res.Published, len(rels))
	}
	// An unpublished post's id may change with an earlier part; the
	// settled ones keep theirs.
	_, rels = storedState(t, st)
	for id := range rels {
		r, err := st.Release(ctx, id)
		if err != nil || !r.Complete() || !r.Visible {
			t.Fatalf("release %s after late parts: %+v, %v", id, r, err)
		}
	}
}

// indexRange runs lines through the usenet indexer as a worker does for
// one leased range of group, into st, and returns the visible releases.
func indexRange(t *testing.T, st *Store, group string, lines [][]byte) []Release {
	t.Helper()
	ctx := context.Background()
	ix := &Indexer{Store: st, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
	ri, err := ix.Begin(ctx, work.Range{Group: group, First: 1, Last: int64(len(lines))})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		if err := ri.Line(ctx, int64(i+1), l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ri.End(ctx); err != nil {
		t.Fatal(err)
	}
	rels, err := st.List(ctx, ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return rels
}

// testStore is a store of testPolicy on a persist server of its own.
func testStore(t *testing.T) *Store {
	t.Helper()
	env := persistenv.Start(t, 1)
	st, err := NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(testPolicy)
	return st
}

// postLines is the overview lines of one post, every part present: file
// i's subject is the format files[i] of its part and part count
// parts[i], its parts posted a second apart.
func postLines(files []string, parts []int) [][]byte {
	var lines [][]byte
	for i, subj := range files {
		for p := 1; p <= parts[i]; p++ {
			n := len(lines) + 1
			date := time.Unix(1_700_000_000+int64(n), 0).UTC().Format(time.RFC1123Z)
			lines = append(lines, overLine(n, fmt.Sprintf(subj, p, parts[i]), date))
		}
	}
	return lines
}

// describeReleases lists rels for a failure message.
func describeReleases(rels []Release) string {
	s := ""
	for _, r := range rels {
		s += fmt.Sprintf("\n  %q: %d files of %d, complete %v", r.Name, len(r.Binaries), r.Files, r.Complete())
	}
	return s
}

// TestIndexerAssemblyAcrossRanges: posts indexed as workers do, range by
// range (the ranges out of order, one indexed twice as after an expired
// lease): a post crossposted to two groups, the same subjects from a
// second poster, a post whose files went to two groups, parts with a
// yEnc counter but no file counter, and a file longer than a range. Each
// is one complete release, every part counted once. (Was: no failure;
// these cases were not tested through the indexer's ranges.)
func TestIndexerAssemblyAcrossRanges(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	type line struct {
		group string
		text  []byte
	}
	nums := map[string]int{}
	var all []line
	id := 0
	add := func(group, poster, subject string, date int64, xref ...string) {
		id++
		var x string
		for _, g := range xref {
			nums[g]++
			x += fmt.Sprintf(" %s:%d", g, nums[g])
		}
		d := time.Unix(date, 0).UTC().Format(time.RFC1123Z)
		all = append(all, line{group, fmt.Appendf(nil, "%d\t%s\t%s\t%s\t<m%d@post>\t\t1000\t10\tXref: h%s",
			nums[group], subject, poster, d, id, x)})
	}
	const t0 = 1_700_000_000
	// A crosspost: each article once, listed in both groups' ranges.
	for f := 1; f <= 3; f++ {
		for p := 1; p <= 4; p++ {
			subj := fmt.Sprintf(`Cross.Post.2024 [%d/3] - "Cross.Post.2024.part%d.rar" yEnc (%d/4)`, f, f, p)
			add("alt.binaries.a", "alice <a@x>", subj, t0+int64(f*10+p), "alt.binaries.a", "alt.binaries.b")
			all = append(all, line{"alt.binaries.b", all[len(all)-1].text})
		}
	}
	// The same subjects from another poster, in one group.
	for f := 1; f <= 3; f++ {
		for p := 1; p <= 4; p++ {
			subj := fmt.Sprintf(`Cross.Post.2024 [%d/3] - "Cross.Post.2024.part%d.rar" yEnc (%d/4)`, f, f, p)
			add("alt.binaries.a", "bob <b@x>", subj, t0+int64(f*10+p), "alt.binaries.a")
		}
	}
	// A post whose files went to two groups, not crossposted.
	for f := 1; f <= 2; f++ {
		g := []string{"alt.binaries.a", "alt.binaries.b"}[f-1]
		for p := 1; p <= 3; p++ {
			add(g, "carol <c@x>", fmt.Sprintf(`Split.Post [%d/2] - "Split.Post.part%d.rar" yEnc (%d/3)`, f, f, p), t0+int64(f*10+p), g)
		}
	}
	// A yEnc part counter, no file counter; and a file of more parts than
	// a range holds.
	for p := 1; p <= 5; p++ {
		add("alt.binaries.b", "dave <d@x>", fmt.Sprintf(`"Lone.File.mkv" yEnc (%d/5)`, p), t0+int64(p), "alt.binaries.b")
	}
	const long = 45_000
	for p := 1; p <= long; p++ {
		add("alt.binaries.b", "erin <e@x>", fmt.Sprintf(`Long.File [1/1] - "Long.File.mkv" yEnc (%d/%d)`, p, long), t0+int64(p/1000), "alt.binaries.b")
	}

	// Ranges of at most 20,000 lines of one group, indexed last first,
	// and the first of them again.
	byGroup := map[string][][]byte{}
	for _, l := range all {
		byGroup[l.group] = append(byGroup[l.group], l.text)
	}
	type rng struct {
		group string
		lines [][]byte
	}
	var rs []rng
	for _, g := range []string{"alt.binaries.a", "alt.binaries.b"} {
		ls := byGroup[g]
		for len(ls) > 0 {
			n := min(len(ls), 20_000)
			if len(rs) == 0 {
				n = 7 // a range that ends inside the crosspost
			}
			rs = append(rs, rng{g, ls[:n]})
			ls = ls[n:]
		}
	}
	slices.Reverse(rs)
	rs = append(rs, rs[len(rs)-1], rs[0])
	var rels []Release
	for _, r := range rs {
		rels = indexRange(t, st, r.group, r.lines)
	}

	want := map[string]struct {
		poster string
		files  int
		parts  int
		groups []string
	}{
		"alice <a@x>": {"alice", 3, 12, []string{"alt.binaries.a", "alt.binaries.b"}},
		"bob <b@x>":   {"bob", 3, 12, []string{"alt.binaries.a"}},
		"carol <c@x>": {"carol", 2, 6, []string{"alt.binaries.a", "alt.binaries.b"}},
		"dave <d@x>":  {"dave", 1, 5, []string{"alt.binaries.b"}},
		"erin <e@x>":  {"erin", 1, long, []string{"alt.binaries.b"}},
	}
	if len(rels) != len(want) {
		t.Fatalf("%d releases, want %d:%s", len(rels), len(want), describeReleases(rels))
	}
	ctx := context.Background()
	for _, r := range rels {
		w, ok := want[r.Poster]
		if !ok {
			t.Fatalf("release of %q: %+v", r.Poster, r)
		}
		present := 0
		for _, f := range r.Binaries {
			present += f.Present
		}
		if !r.Complete() || len(r.Binaries) != w.files || present != w.parts || r.Size != int64(w.parts)*1000 ||
			!slices.Equal(r.Groups, w.groups) || r.RepostOf != "" {
			t.Errorf("%s: complete %v, %d files, %d parts, %d bytes, groups %v, repost_of %q; want %d files, %d parts, %d bytes, groups %v",
				w.poster, r.Complete(), len(r.Binaries), present, r.Size, r.Groups, r.RepostOf, w.files, w.parts, w.parts*1000, w.groups)
		}
		var nzb strings.Builder
		if _, err := st.NZB(ctx, r.ID, &nzb); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(nzb.String(), "<segment "); n != w.parts {
			t.Errorf("%s: NZB of %d segments, want %d", w.poster, n, w.parts)
		}
	}
}

// TestCrosspostWithoutXrefListsEveryGroup: a server whose overview has no
// Xref names only the range's group, so a crosspost's groups are learnt
// one range at a time; the release lists every group it was seen in.
// (Was: the second group reached the binary, but its collection kept the
// summary it had, of as many segments, so the release listed one group.)
func TestCrosspostWithoutXrefListsEveryGroup(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	var lines [][]byte
	for p := 1; p <= 3; p++ {
		d := time.Unix(1_700_000_000+int64(p), 0).UTC().Format(time.RFC1123Z)
		lines = append(lines, fmt.Appendf(nil, "%d\t%s\tposter@example.com\t%s\t<x%d@post>\t\t700000\t5000",
			p, fmt.Sprintf(`Cross.Post.2024 [1/1] - "Cross.Post.2024.mkv" yEnc (%d/3)`, p), d, p))
	}
	indexRange(t, st, "alt.binaries.a", lines)
	rels := indexRange(t, st, "alt.binaries.b", lines)
	want := []string{"alt.binaries.a", "alt.binaries.b"}
	if len(rels) != 1 || !slices.Equal(rels[0].Groups, want) {
		t.Fatalf("releases: %+v; want one in groups %v", rels, want)
	}
	bins, err := st.Binaries(context.Background(), []string{rels[0].Binaries[0].ID})
	if err != nil || len(bins) != 1 || !slices.Equal(bins[0].Groups, want) || len(bins[0].Segments) != 3 {
		t.Fatalf("binary: %+v, %v", bins, err)
	}
}

// (Was: a record that outgrew the bus's max payload failed the range with
// too-large on every attempt, with every other post in it.)
func TestRecordTooLargeLeavesTheRestOfTheRange(t *testing.T) {
	t.Parallel()
	st := storeOnSmallBus(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	var lines [][]byte
	line := func(poster, subject, id string, date int64) {
		d := time.Unix(date, 0).UTC().Format(time.RFC1123Z)
		lines = append(lines, fmt.Appendf(nil, "%d\t%s\t%s\t%s\t<%s>\t\t700000\t5000", len(lines)+1, subject, poster, d, id))
	}
	// A message-id of 240 random characters and "@flood", within the 250
	// bytes an article's may have: 600 of them fit a record, 1,200 do not
	// (s2 does not shrink random text).
	longID := func() string {
		b := make([]byte, 240)
		for i := range b {
			b[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[rng.IntN(36)]
		}
		return string(b) + "@flood"
	}
	good := func(title string) {
		for p := 1; p <= 3; p++ {
			line("good@example.com", fmt.Sprintf(`%s [1/1] - "%s.mkv" yEnc (%d/3)`, title, title, p), fmt.Sprintf("%s.%d@good", title, p), 1_700_000_000+int64(p))
		}
	}
	flood := func(name string, n int) {
		for range n {
			line("flood@example.com", fmt.Sprintf(`"%s.mkv" yEnc (1/2)`, name), longID(), 1_700_000_000)
		}
	}
	index := func() RangeResult {
		t.Helper()
		ix := &Indexer{Store: st, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
		ri, err := ix.Begin(ctx, work.Range{Group: "alt.binaries.a", First: 1, Last: int64(len(lines))})
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range lines {
			if err := ri.Line(ctx, int64(i+1), l); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := ri.End(ctx)
		if err != nil {
			t.Fatalf("range: %v", err)
		}
		var res RangeResult
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		lines = nil
		return res
	}

	good("First.Post")
	flood("Grown", 600)
	if res := index(); res.TooLarge != 0 {
		t.Fatalf("first range: %+v, want nothing too large", res)
	}
	// The second range grows that binary past the limit, starts one over
	// it, and holds a post of 400 files whose release is over it.
	good("Second.Post")
	flood("Grown", 600)
	flood("Born.Large", 1200)
	pad := strings.Repeat("x", 600)
	for f := 1; f <= 400; f++ {
		line("big@example.com", fmt.Sprintf(`Many.Files [%d/400] - "Many.Files.%s.%03d.mkv" yEnc (1/1)`, f, pad, f), fmt.Sprintf("many.%d@big", f), 1_700_000_000)
	}
	res := index()
	if res.TooLarge != 3 {
		t.Errorf("second range: %+v, want 3 records too large (the grown and the new binary, the post of 400 files)", res)
	}
	rels, err := st.List(ctx, ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rels {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"First.Post", "Second.Post"}) {
		t.Fatalf("visible releases %q, want First.Post and Second.Post", names)
	}
	bins, _ := storedState(t, st)
	for _, b := range bins {
		if b.Poster == "flood@example.com" && (b.Name != "Grown.mkv" || len(b.Segments) != 600) {
			t.Errorf("flood binary %s with %d segments stored, want Grown.mkv as the first range left it (600)", b.Name, len(b.Segments))
		}
	}
}

// storeOnSmallBus is a Store (testPolicy) on a bus whose max payload is
// 256 KiB, standing for the 8 MiB of a real one: records outgrow it with
// fewer articles.
func storeOnSmallBus(t *testing.T) *Store {
	t.Helper()
	env := persistenv.Start(t, 1, persistenv.NATS(testnats.Options{MaxPayload: 256 << 10}))
	st, err := NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(testPolicy)
	return st
}
