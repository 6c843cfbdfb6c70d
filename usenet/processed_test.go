package usenet

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/usenet/nfo"
)

// TestProcessedKeptAcrossPublications: what post-processing found is
// published at a new version under the same id, and a later publication
// of the release (its missing parts arriving) keeps it.
func TestProcessedKeptAcrossPublications(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	ctx := context.Background()
	st, err := NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(testPolicy)
	posts := genPosts(rand.New(rand.NewPCG(3, 4)), 1, []string{"alt.binaries.a"})
	early, late := NewBatch(), NewBatch()
	for _, as := range articles(posts) {
		for i, a := range as {
			if i == 0 {
				late.Add(a) // the post's first article comes last
				continue
			}
			early.Add(a)
		}
	}
	t0 := time.Unix(1_800_000_000, 0)
	if _, err := st.Apply(ctx, early.Binaries(), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Settle(ctx, t0.Add(3*time.Hour), SettleConfig{Window: time.Hour, MinCompletion: 0.01, MinBytes: -1}); err != nil {
		t.Fatal(err)
	}
	rels, err := st.List(ctx, ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var r Release
	for _, x := range rels {
		if !x.Complete() {
			r = x // the settled one
		}
	}
	if r.ID == "" {
		t.Fatalf("no settled release among %d", len(rels))
	}
	coll, err := st.CollectionOfRelease(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	bin := r.Binaries[0]
	p := Processed{Name: "Real.Name.2024.1080p", Files: map[string]string{bin.ID: "Real.Name.2024.1080p.part01.rar"}, Password: 1, NFO: true,
		Par2: []Par2File{{Name: "Real.Name.2024.1080p.part01.rar", Size: 1000}}, Inner: []string{"a.mkv"}}
	pub, found, err := st.SetProcessed(ctx, coll, r.ID, p)
	if err != nil || !found {
		t.Fatalf("SetProcessed: %v, found %v", err, found)
	}
	check := func(what string, got Release, after int64) {
		t.Helper()
		if got.ID != r.ID || got.Version <= after || !got.Processed || got.Password != 1 || !got.NFO || got.Name != p.Name ||
			got.PostedName != r.Name || len(got.Par2) != 1 || len(got.Inner) != 1 {
			t.Fatalf("%s: %+v (after version %d)", what, got, after)
		}
		for _, f := range got.Binaries {
			if f.ID == bin.ID && (f.Name != p.Files[bin.ID] || f.Posted != bin.Name) {
				t.Fatalf("%s: file %+v, want %q posted as %q", what, f, p.Files[bin.ID], bin.Name)
			}
		}
	}
	check("as set", pub, r.Version)
	stored, err := st.Release(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("in the releases stream", stored, r.Version)
	// The same findings again change nothing.
	if again, _, err := st.SetProcessed(ctx, coll, r.ID, p); err != nil || again.Version != stored.Version {
		t.Fatalf("SetProcessed again: version %d, %v; want %d", again.Version, err, stored.Version)
	}
	if _, err := st.Apply(ctx, late.Binaries(), t0.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	after, err := st.Release(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Complete() {
		t.Fatalf("the late parts did not complete the release: %+v", after)
	}
	check("republished complete", after, stored.Version)

	// The records sum up; a visible release without one is pending.
	if err := st.PutPostRecord(ctx, PostRecord{Release: r.ID, Status: PostDone, Articles: 2, Bytes: 900, Failures: []string{FailRAR}, Renamed: true, Processed: p}); err != nil {
		t.Fatal(err)
	}
	sum, err := st.PostSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Releases[PostDone] != 1 || sum.Articles != 2 || sum.Bytes != 900 || sum.Renamed != 1 || sum.Passworded != 1 || sum.NFOs != 1 ||
		sum.Failures[FailRAR] != 1 || sum.Pending != int64(len(rels)-1) {
		t.Fatalf("summary %+v with %d releases", sum, len(rels))
	}
	if got, err := st.PostRecord(ctx, r.ID); err != nil || got.Status != PostDone || got.Password != 1 {
		t.Fatalf("record %+v, %v", got, err)
	}
}

// TestPutNFOCutsOnARuneBoundary: an NFO longer than NFOMax bytes is cut
// at the start of the rune NFOMax falls in, so the stored text stays
// UTF-8 (CP437 art decodes to 3 bytes a character: an NFO of 22 KiB
// passes NFOMax). PutNFO used to cut at NFOMax bytes exactly, inside a
// rune.
func TestPutNFOCutsOnARuneBoundary(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	ctx := context.Background()
	st, err := NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	// A CP437 NFO of 30,000 bytes of art (0xDB, a full block).
	text := nfo.Text(bytes.Repeat([]byte{0xdb}, 30000))
	if !utf8.ValidString(text) || len(text) <= NFOMax {
		t.Fatalf("nfo.Text gave %d bytes, valid UTF-8 %v", len(text), utf8.ValidString(text))
	}
	if err := st.PutNFO(ctx, "rel1", text); err != nil {
		t.Fatal(err)
	}
	got, err := st.NFO(ctx, "rel1")
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(got) || len(got) < NFOMax-utf8.UTFMax || got != text[:len(got)] {
		t.Errorf("stored NFO of %d bytes (valid UTF-8 %v) is not the text cut at a rune boundary below %d", len(got), utf8.ValidString(got), NFOMax)
	}
}

// TestObfuscated: names that say nothing of what they hold.
func TestObfuscated(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"a8f7d6e5c4b3a2f1e0d9":             true,
		"a8f7d6e5c4b3a2f1e0d9.par2":        true,
		"a8f7d6e5c4b3a2f1e0d9.mkv":         true,
		"k3j4h5.bin":                       true,
		"Some.Show.S01E01.720p.part01.rar": false,
		"Some.Show.S01E01.x264":            false,
		"movie.mkv":                        false,
		"Hidden.Show.S01E02.720p-SY":       false,
		"Some Show 2024":                   false,
	} {
		if got := Obfuscated(name); got != want {
			t.Errorf("Obfuscated(%q) = %v, want %v", name, got, want)
		}
	}
}
