package usenet

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testPolicy publishes the generated posts, whose articles are small.
var testPolicy = SettleConfig{MinBytes: -1}.withDefaults()

// memApply merges ranges into maps the way Store.Apply does, without
// persist: the reference the property tests compare against. It returns
// the binaries and the posts (releases) by id.
func memApply(ranges [][]Article) (map[string]Binary, map[string]Release) {
	bins := map[string]Binary{}
	for _, r := range ranges {
		b := NewBatch()
		for _, a := range r {
			b.Add(a)
		}
		for _, nb := range b.Binaries() {
			cur, ok := bins[nb.ID]
			if !ok {
				cur = *nb
			} else {
				cur.Merge(*nb)
			}
			bins[nb.ID] = cur
		}
	}
	colls := map[string]Collection{}
	for _, b := range bins {
		c := CollectionOf(&b, testPolicy.gap())
		if cur, ok := colls[c.ID]; ok {
			cur.Merge(c)
			colls[c.ID] = cur
		} else {
			colls[c.ID] = c
		}
	}
	return bins, postsOf(colls)
}

// postsOf is the posts of colls by id, as update resolves them.
func postsOf(colls map[string]Collection) map[string]Release {
	rels := map[string]Release{}
	for _, c := range colls {
		posts, _, _ := c.resolve(testPolicy.gap())
		for _, r := range posts {
			rels[r.ID] = r
		}
	}
	return rels
}

// TestAssemblyIndependentOfSplitAndOrder: the binaries and releases of a
// set of articles are the same for any split into ranges, any order of the
// ranges, and ranges seen twice.
func TestAssemblyIndependentOfSplitAndOrder(t *testing.T) {
	t.Parallel()
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		posts := genPosts(rng, 25, []string{"alt.binaries.a", "alt.binaries.b", "alt.binaries.c"})
		byGroup := articles(posts)
		var all []Article
		for _, g := range slices.Sorted(maps.Keys(byGroup)) {
			all = append(all, byGroup[g]...)
		}
		wantBins, wantRels := memApply([][]Article{all})

		var ranges [][]Article
		for _, as := range byGroup {
			ranges = append(ranges, split(rng, as)...)
		}
		// Some ranges run twice: a lease that expired after its writes.
		for range rng.IntN(5) {
			ranges = append(ranges, ranges[rng.IntN(len(ranges))])
		}
		rng.Shuffle(len(ranges), func(i, j int) { ranges[i], ranges[j] = ranges[j], ranges[i] })
		gotBins, gotRels := memApply(ranges)
		if !reflect.DeepEqual(exported(gotBins), exported(wantBins)) {
			t.Fatalf("seed %d: binaries differ with the split", seed)
		}
		if !reflect.DeepEqual(gotRels, wantRels) {
			t.Fatalf("seed %d: releases differ with the split", seed)
		}
		checkPosts(t, posts, gotRels, gotBins)
	}
}

// postID is the release id of the copy of p posted at date.
func postID(p post, date int64) string {
	return idOf("p", CollectionID(p.poster, p.base, len(p.files)), strconv.FormatInt(date+1, 10), "0")
}

// checkPosts: every copy of every generated post (the original and each
// repost) is one complete release of its own date listing every group of
// every file, a repost marked as one of the original; and the NZB of each
// holds every part of every file once, from its own copy only.
func checkPosts(t *testing.T, posts []post, rels map[string]Release, bins map[string]Binary) {
	t.Helper()
	n := 0
	for _, p := range posts {
		n += len(p.copies())
	}
	if len(rels) != n {
		t.Fatalf("%d releases for %d posts and reposts", len(rels), n)
	}
	for _, p := range posts {
		first := postID(p, p.date)
		for ci, c := range p.copies() {
			r, ok := rels[postID(p, c.date)]
			if !ok {
				t.Fatalf("post %s copy %d: no release", p.base, ci)
			}
			if !r.Complete() || r.Completion() != 1 || r.Date != c.date+1 {
				t.Fatalf("post %s copy %d: release not complete or of another date: %+v", p.base, ci, r)
			}
			if want := map[bool]string{true: "", false: first}[ci == 0]; r.RepostOf != want {
				t.Fatalf("post %s copy %d: repost of %q, want %q", p.base, ci, r.RepostOf, want)
			}
			if len(r.Binaries) != len(p.files) || !slices.Equal(r.Groups, p.groups) || r.Name != p.base {
				t.Fatalf("post %s: release %+v, want %d files in %v", p.base, r, len(p.files), p.groups)
			}
			ids := make([]Binary, len(r.Binaries))
			for i, f := range r.Binaries {
				ids[i] = bins[f.ID]
			}
			for _, b := range PostBinaries(r, ids) {
				if len(b.Segments) != b.Parts || !slices.Equal(b.Groups, p.groups) {
					t.Fatalf("post %s copy %d: binary %s has %d segments of %d, groups %v", p.base, ci, b.Name, len(b.Segments), b.Parts, b.Groups)
				}
				for i, s := range b.Segments {
					if s.Number != i+1 || !strings.Contains(s.ID, fmt.Sprintf(".c%d.", ci)) {
						t.Fatalf("binary %s copy %d: segment %d is %+v", b.Name, ci, i, s)
					}
				}
			}
		}
	}
}

// exported drops the unexported base, which a stored record lacks.
func exported(m map[string]Binary) map[string]Binary {
	out := make(map[string]Binary, len(m))
	for k, b := range m {
		b.base = ""
		out[k] = b
	}
	return out
}

func TestBinaryMergeCountsArticlesOnce(t *testing.T) {
	t.Parallel()
	a := Binary{ID: "x", Parts: 3, Groups: []string{"g1"}, Segments: []Segment{{1, 10, "a@x", 5}}, Date: 5}
	b := Binary{ID: "x", Parts: 3, Groups: []string{"g2"}, Segments: []Segment{{1, 10, "a@x", 5}, {2, 20, "b@x", 4}}, Date: 4}
	if !a.Merge(b) {
		t.Fatal("merge with a new part reported no change")
	}
	if a.Merge(b) {
		t.Fatal("merging the same articles again reported a change")
	}
	if a.Present() != 2 || a.Bytes() != 30 || a.Date != 4 || !slices.Equal(a.Groups, []string{"g1", "g2"}) {
		t.Fatalf("merged %+v", a)
	}
	// A repost of part 2 under another message-id is kept, but counted once.
	a.Merge(Binary{ID: "x", Parts: 3, Segments: []Segment{{2, 20, "c@x", 6}}})
	if a.Present() != 2 || a.Bytes() != 30 || len(a.Segments) != 3 {
		t.Fatalf("after a repost: present %d bytes %d segments %v", a.Present(), a.Bytes(), a.Segments)
	}
}

func TestReleaseCompletion(t *testing.T) {
	t.Parallel()
	r := Release{Files: 4, Binaries: []FileSummary{{ID: "a", File: 1, Parts: 10, Present: 10}, {ID: "b", File: 2, Parts: 10, Present: 5}}}
	if r.Complete() {
		t.Fatal("half a release is complete")
	}
	if got := r.Completion(); got != 0.75*0.5 {
		t.Fatalf("completion %v, want %v", got, 0.75*0.5)
	}
	r.Files = 2
	r.Binaries[1].Present = 10
	if !r.Complete() || r.Completion() != 1 {
		t.Fatalf("full release: complete %v completion %v", r.Complete(), r.Completion())
	}
}

// overLine is the OVER line of article n of a post.
func overLine(n int, subject, date string) []byte {
	return fmt.Appendf(nil, "%d\t%s\tposter@example.com\t%s\t<a%d@post>\t\t700000\t5000\tXref: h alt.binaries.tv:%d",
		n, subject, date, n, n)
}

// linePosts parses lines as a range's indexer does and returns the posts
// memApply makes of them.
func linePosts(t *testing.T, lines [][]byte) []Release {
	t.Helper()
	var as []Article
	var p ArticleParser
	for _, l := range lines {
		a, err := p.Parse(l, "alt.binaries.tv")
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		as = append(as, a)
	}
	_, rels := memApply([][]Article{as})
	return slices.Collect(maps.Values(rels))
}

// TestCompleteNeedsEveryNumberedFile: a post of n files is complete (and
// its Completion 1) only with every file numbered 1 to n; its .nfo,
// numbered [0/n], is a file beyond them. Complete and Completion used to
// count binaries, so the nfo stood in for a missing file.
func TestCompleteNeedsEveryNumberedFile(t *testing.T) {
	t.Parallel()
	date := "Mon, 01 Jan 2024 10:00:00 +0000"
	var lines [][]byte
	n := 1
	lines = append(lines, overLine(n, `Post.S01E01.720p-GRP [0/5] - "Post.S01E01.720p-GRP.nfo" yEnc (1/1)`, date))
	for f := 1; f <= 4; f++ { // file 5 of 5 is missing
		for part := 1; part <= 2; part++ {
			n++
			lines = append(lines, overLine(n, fmt.Sprintf(`Post.S01E01.720p-GRP [%d/5] - "Post.S01E01.720p-GRP.part%02d.rar" yEnc (%d/2)`, f, f, part), date))
		}
	}
	posts := linePosts(t, lines)
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
	r := posts[0]
	if r.Complete() || r.Completion() != 0.8 {
		t.Errorf("post without its file [5/5] (%d binaries: the nfo [0/5] and files 1-4): Complete() = %v, Completion() = %v; want false, 0.8",
			len(r.Binaries), r.Complete(), r.Completion())
	}
}

// TestSameNameTwoFilesOnePost: two files of one post may share a name and
// differ in their file counter: a two-CD album's folder.jpg in each CD's
// folder, or subjects that quote no name, where every file is named by the
// dotted title. They are two files of one release, and a repost within the
// post gap in other part counts is still a release of its own, numbering
// its files as the original did. (Was: Posts gave the n-th copy of a file
// NAME in a run to the run's n-th post, so the second folder.jpg was cut
// off into a one-file "repost", and a title-named post into one release
// per file, none ever complete.)
func TestSameNameTwoFilesOnePost(t *testing.T) {
	t.Parallel()
	const title = "Artist - Album (2019) (2CD) FLAC"
	files := []string{
		title + ` [1/4] - "folder.jpg" yEnc (%d/%d)`,
		title + ` [2/4] - "Artist - Album CD1.flac" yEnc (%d/%d)`,
		title + ` [3/4] - "folder.jpg" yEnc (%d/%d)`,
		title + ` [4/4] - "Artist - Album CD2.flac" yEnc (%d/%d)`,
	}
	rels := indexRange(t, testStore(t), "alt.binaries.sounds.flac", postLines(files, []int{1, 3, 1, 3}))
	if len(rels) != 1 || len(rels[0].Binaries) != 4 || !rels[0].Complete() || rels[0].RepostOf != "" {
		t.Fatalf("a complete post of 4 files, two named folder.jpg: %d visible releases, want 1 of 4 files:%s", len(rels), describeReleases(rels))
	}

	titled := []string{
		`My.Post.Title [1/3] - yEnc (%d/%d)`,
		`My.Post.Title [2/3] - yEnc (%d/%d)`,
		`My.Post.Title [3/3] - yEnc (%d/%d)`,
	}
	posts := linePosts(t, postLines(titled, []int{2, 2, 1}))
	if len(posts) != 1 || len(posts[0].Binaries) != 3 || !posts[0].Complete() {
		t.Fatalf("a complete post of 3 files all named by the title: %d posts, want 1 of 3 files:%s", len(posts), describeReleases(posts))
	}

	// The album reposted ten minutes later, within the post gap, in other
	// part counts: its files are other binaries of the same names and
	// counters, and the repost is a post of its own.
	lines := postLines(files, []int{1, 3, 1, 3})
	for i, subj := range files {
		for p := 1; p <= 2+i%2*2; p++ {
			n := len(lines) + 1
			date := time.Unix(1_700_000_600+int64(n), 0).UTC().Format(time.RFC1123Z)
			lines = append(lines, overLine(n, fmt.Sprintf(subj, p, 2+i%2*2), date))
		}
	}
	posts = linePosts(t, lines)
	slices.SortFunc(posts, func(a, b Release) int { return cmp.Compare(a.Date, b.Date) })
	if len(posts) != 2 || posts[1].RepostOf != posts[0].ID {
		t.Fatalf("a post and its repost within the gap: %d posts, want 2, the second a repost of the first:%s", len(posts), describeReleases(posts))
	}
	for _, r := range posts {
		if len(r.Binaries) != 4 || !r.Complete() {
			t.Errorf("post of %v: %d files, complete %v; want 4, complete", r.Date, len(r.Binaries), r.Complete())
		}
	}
}

// TestSizeDoesNotOverflow: the overview's bytes field is read up to
// 2^63-1, and an article's size is capped at maxArticleBytes, so two
// articles a broken or hostile server reports at 5e18 bytes each make a
// release of 2 GiB; and the sums saturate, for binaries stored before the
// cap. (Was: a binary's and a release's sizes were plain int64 sums
// (Binary.Bytes, Release.derive) and wrapped negative, which the feeds
// showed and the --min-bytes check compared.)
func TestSizeDoesNotOverflow(t *testing.T) {
	t.Parallel()
	var lines [][]byte
	for p := 1; p <= 2; p++ {
		lines = append(lines, fmt.Appendf(nil, "%d\t%s\tposter@example.com\tMon, 01 Jan 2024 10:00:0%d +0000\t<a%d@post>\t\t5000000000000000000\t5000",
			p, fmt.Sprintf(`[1/1] - "Big.File.2024.mkv" yEnc (%d/2)`, p), p, p))
	}
	posts := linePosts(t, lines)
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
	r := posts[0]
	if r.Size != 2*maxArticleBytes || r.Binaries[0].Bytes != 2*maxArticleBytes {
		t.Errorf("release of two articles of 5e18 bytes: Size %d, file bytes %d; want each article capped at %d", r.Size, r.Binaries[0].Bytes, maxArticleBytes)
	}

	stored := Binary{Parts: 2, Segments: []Segment{{Number: 1, Bytes: 5e18, ID: "a"}, {Number: 2, Bytes: 5e18, ID: "b"}}}
	if got := stored.Bytes(); got != math.MaxInt64 {
		t.Errorf("Bytes of a stored binary of two segments of 5e18 bytes: %d, want it saturated at %d", got, int64(math.MaxInt64))
	}
	rel := Release{Binaries: []FileSummary{{Bytes: 5e18}, {Bytes: 5e18}}}
	if rel.derive(); rel.Size != math.MaxInt64 {
		t.Errorf("Size of a release of two files of 5e18 bytes: %d, want it saturated at %d", rel.Size, int64(math.MaxInt64))
	}
}

// TestZeroPartIsNotIndexed: a file's "zero part" ("name.part1.rar" yEnc
// (0/3), a text article posting tools send ahead of part 1) joins no
// binary, so the post holds the real file under that name. It used to be
// a one-part binary of the same name that, earlier by date, took the real
// file's place in the original post (which then counted as complete) and
// split the real file off as an incomplete repost.
func TestZeroPartIsNotIndexed(t *testing.T) {
	t.Parallel()
	var lines [][]byte
	add := func(s string, sec int) {
		lines = append(lines, overLine(len(lines)+1, s, fmt.Sprintf("Mon, 01 Jan 2024 10:00:%02d +0000", sec)))
	}
	add(`Post.S01E01.720p-GRP [1/2] - "Post.S01E01.720p-GRP.part1.rar" yEnc (0/3)`, 0)
	for f := 1; f <= 2; f++ {
		for p := 1; p <= 3; p++ {
			add(fmt.Sprintf(`Post.S01E01.720p-GRP [%d/2] - "Post.S01E01.720p-GRP.part%d.rar" yEnc (%d/3)`, f, f, p), f*10+p)
		}
	}
	posts := linePosts(t, lines)
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1 (the zero part is no repost)", len(posts))
	}
	r := posts[0]
	if len(r.Binaries) != 2 || !r.Complete() {
		t.Errorf("post of %d binaries, complete %v; want the 2 files, complete", len(r.Binaries), r.Complete())
	}
	for _, b := range r.Binaries {
		if b.Parts != 3 {
			t.Errorf("binary %s of %d/%d parts: the zero part, not the real file", b.Name, b.Present, b.Parts)
		}
	}
}

// TestBatchSegmentsAnyOrder: a binary's segments come out sorted and
// unique by message-id (the lowest part number kept) whatever the order of
// the articles, repeats and a message-id under two part numbers included,
// and with files interleaved.
func TestBatchSegmentsAnyOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var as []Article
		for f := range 3 {
			for p := 1; p <= 1+rng.IntN(8); p++ {
				id := "m" + strconv.Itoa(f) + "." + strconv.Itoa(p)
				if rng.IntN(6) == 0 {
					id = "m" + strconv.Itoa(f) + ".1" // one article under two numbers
				}
				as = append(as, Article{Subject: Subject{Part: p, Parts: 8, Binary: "file" + strconv.Itoa(f)}, RawSubject: "file" + strconv.Itoa(f), From: "f", MessageID: id, Bytes: int64(p)})
			}
		}
		for range rng.IntN(3) {
			as = append(as, as[rng.IntN(len(as))])
		}
		if rng.IntN(2) == 0 {
			rng.Shuffle(len(as), func(i, j int) { as[i], as[j] = as[j], as[i] })
		}
		b := NewBatch()
		want := map[string][]Segment{}
		for _, a := range as {
			b.Add(a)
			want[a.Subject.Binary] = append(want[a.Subject.Binary], Segment{Number: a.Subject.Part, Bytes: a.Bytes, ID: a.MessageID})
		}
		for _, bin := range b.Binaries() {
			w := uniqueSegments(slices.Clone(want[bin.Subject]))
			if !slices.Equal(bin.Segments, w) {
				t.Fatalf("binary %s: segments %v, want %v", bin.Subject, bin.Segments, w)
			}
		}
	}
}

// resolveByScan is resolve as it was, a scan of the states for each post:
// the reference its results must equal.
func resolveByScan(c *Collection, gap int64) ([]Release, []int, []int) {
	posts, gens := c.posts(gap)
	idx := make([]int, len(posts))
	used := make([]bool, len(c.States))
	for i := range posts {
		idx[i] = -1
		for j, st := range c.States {
			if !used[j] && st.ID == posts[i].ID {
				idx[i], used[j] = j, true
				break
			}
		}
	}
	for i := range posts {
		if idx[i] >= 0 {
			continue
		}
		from, to := postSpan(&posts[i])
		for j, st := range c.States {
			if !used[j] && st.Visible && st.Gen == gens[i] && st.From <= to+gap && from <= st.To+gap {
				posts[i].ID = st.ID
				idx[i], used[j] = j, true
				break
			}
		}
	}
	for i := 1; i < len(posts); i++ {
		posts[i].RepostOf = posts[0].ID
	}
	return posts, idx, gens
}

// scanCollection is a collection of n posts of one file, two hours apart,
// resolved and updated once, so that every post has its state.
func scanCollection(n int) Collection {
	c := Collection{ID: "c", Name: "Some.Name", Poster: "p", Files: 1}
	b := CollectedBinary{ID: "b", Name: "Some.Name.mkv", File: 1, Parts: 1, Groups: []string{"alt.binaries.a"}, Segments: n}
	for i := range n {
		d := 1_700_000_000 + int64(i)*7200
		b.Copies = append(b.Copies, Copy{From: d, To: d, Present: 1, Bytes: 10})
	}
	c.Binaries = []CollectedBinary{b}
	c.update(testPolicy, 1)
	return c
}

// (Was: resolve scanned the states for each post, posts x states on every
// merge and settle sweep of a collection: 0.2 s for one of 8,000 posts.)
func TestResolveMatchesScan(t *testing.T) {
	t.Parallel()
	gap := testPolicy.gap()
	moved := 0 // posts that kept a state's id after their first date moved
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		c := Collection{ID: "c", Name: "Name", Poster: "p", Files: 1 + rng.IntN(3)}
		for step := range 6 {
			// New copies of some files' splits; a split's new summary
			// replaces its copies, so first dates move and posts split,
			// join and change generation between steps.
			for range 1 + rng.IntN(4) {
				f := 1 + rng.IntN(c.Files)
				var cps []Copy
				for range 1 + rng.IntN(3) {
					d := int64(rng.IntN(12)) * gap / 2
					cps = append(cps, Copy{From: d, To: d + int64(rng.IntN(60)), Present: 1 + rng.IntN(2), Bytes: 10})
				}
				slices.SortFunc(cps, func(x, y Copy) int { return cmp.Compare(x.From, y.From) })
				c.Merge(Collection{ID: c.ID, Name: c.Name, Poster: c.Poster, Files: c.Files, Binaries: []CollectedBinary{{
					ID: fmt.Sprintf("b%d.%d", f, rng.IntN(2)), Name: fmt.Sprintf("f%d.rar", f), File: f, Parts: 2,
					Groups: []string{"alt.binaries.a"}, Segments: step + 1, Copies: cps,
				}}})
			}
			want, wantIdx, wantGens := resolveByScan(&c, gap)
			got, gotIdx, gotGens := c.resolve(gap)
			if !reflect.DeepEqual(got, want) || !slices.Equal(gotIdx, wantIdx) || !slices.Equal(gotGens, wantGens) {
				t.Fatalf("seed %d step %d: resolve gives %v %v, the scan %v %v", seed, step, gotIdx, gotGens, wantIdx, wantGens)
			}
			fresh, _ := c.posts(gap)
			for i := range got {
				if gotIdx[i] >= 0 && got[i].ID != fresh[i].ID {
					moved++
				}
			}
			c.update(testPolicy, int64(step))
		}
	}
	if moved == 0 {
		t.Fatal("no post kept the id of a state after its first date moved: the second lookup went untested")
	}

	// Every post of a large collection, and every one after its first
	// date moved (each keeps its state's id).
	c := scanCollection(2000)
	for _, shift := range []int64{0, -600} {
		for i := range c.Binaries[0].Copies {
			c.Binaries[0].Copies[i].From += shift
			c.Binaries[0].Copies[i].To += shift
		}
		want, wantIdx, _ := resolveByScan(&c, gap)
		got, gotIdx, _ := c.resolve(gap)
		if !reflect.DeepEqual(got, want) || !slices.Equal(gotIdx, wantIdx) || slices.Contains(gotIdx, -1) {
			t.Fatalf("shift %d: resolve and the scan differ, or a post lost its state", shift)
		}
	}
}

// BenchmarkResolve: a collection of n posts, each matched by its id
// (same) or, after its first date moved, by its span (moved).
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		for _, moved := range []bool{false, true} {
			name := fmt.Sprintf("posts=%d/same", n)
			if moved {
				name = fmt.Sprintf("posts=%d/moved", n)
			}
			b.Run(name, func(b *testing.B) {
				c := scanCollection(n)
				if moved {
					for i := range c.Binaries[0].Copies {
						c.Binaries[0].Copies[i].From -= 600
					}
				}
				for b.Loop() {
					c.resolve(testPolicy.gap())
				}
			})
		}
	}
}

// TestFutureDateTakenAsUnknown: a posting date more than MaxFutureDate
// ahead of the indexer's clock is taken as unknown (0), as one that does
// not parse; one an hour ahead (a clock off) is kept.
// (Was: a post dated in the year 9999 kept its date, and so sorted first
// in every feed and search for good.)
func TestFutureDateTakenAsUnknown(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0) // indexRange's clock
	post := func(name string, date time.Time) [][]byte {
		var lines [][]byte
		for p := 1; p <= 2; p++ {
			subj := fmt.Sprintf(`%s [1/1] - "%s.mkv" yEnc (%d/2)`, name, name, p)
			lines = append(lines, fmt.Appendf(nil, "%d\t%s\tposter@example.com\t%s\t<%s%d@post>\t\t700000\t5000\tXref: h alt.binaries.tv:%d",
				p, subj, date.UTC().Format(time.RFC1123Z), name, p, p))
		}
		return lines
	}
	st := testStore(t)
	indexRange(t, st, "alt.binaries.tv", post("Pinned.Forever", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)))
	rels := indexRange(t, st, "alt.binaries.tv", post("Clock.Off", now.Add(time.Hour)))
	dates := map[string]int64{}
	for _, r := range rels {
		dates[r.Name] = r.Date
	}
	if want := map[string]int64{"Pinned.Forever": 0, "Clock.Off": now.Add(time.Hour).Unix()}; !maps.Equal(dates, want) {
		t.Fatalf("release dates %v, want %v", dates, want)
	}
}
