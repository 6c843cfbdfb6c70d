package usenet

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestSettlerSweepsUntilStop: a started Settler publishes an incomplete
// release once its window has passed, logs through its Logger with its
// role, and follows the lifecycle rules.
func TestSettlerSweepsUntilStop(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	ctx := context.Background()
	st, err := NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(testPolicy)
	posts := genPosts(rand.New(rand.NewPCG(1, 2)), 6, []string{"alt.binaries.a"})
	b := NewBatch()
	for _, as := range articles(posts) {
		first := map[string]bool{}
		for _, a := range as {
			if key := a.From + a.Subject.Base; !first[key] {
				first[key] = true // each post's first article missing: none complete
				continue
			}
			b.Add(a)
		}
	}
	t0 := time.Unix(1_800_000_000, 0)
	if _, err := st.Apply(ctx, b.Binaries(), t0); err != nil {
		t.Fatal(err)
	}
	invisible := func() (n int) {
		_, rels := storedState(t, st)
		for id := range rels {
			if r, err := st.Release(ctx, id); err != nil || !r.Visible {
				n++
			}
		}
		return n
	}
	if invisible() == 0 {
		t.Fatal("the test needs a release the settler has to publish")
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := SettleConfig{Window: time.Hour, MinCompletion: 0.01, Every: time.Millisecond, Logger: log, MinBytes: -1}
	s := NewSettler(st, cfg, func() time.Time { return t0.Add(2 * time.Hour) })
	lifecycletest.Start(t, s)
	testwait.For(t, "the releases to be published", func() bool { return invisible() == 0 })
	lifecycletest.Stop(t, s)
	// Stop waited for the loop: the log is complete.
	if !strings.Contains(logs.String(), "role=settler") || !strings.Contains(logs.String(), "settled releases published") {
		t.Fatalf("settler log without its role or sweep:\n%s", logs.String())
	}
}

func TestSettlerStopBeforeStart(t *testing.T) {
	t.Parallel()
	lifecycletest.Stop(t, NewSettler(nil, SettleConfig{}, nil))
}

// TestMinimumsDefaults: by default a lone 500 KiB .nfo is not published
// and a lone 4 GiB .mkv is; -1 turns a minimum off.
func TestMinimumsDefaults(t *testing.T) {
	t.Parallel()
	one := func(name string, size int64) *Release {
		return &Release{Files: 1, Size: size, Binaries: []FileSummary{{ID: "b", Name: name, Parts: 1, Present: 1, Bytes: size}}}
	}
	def := SettleConfig{}.withDefaults()
	if def.passes(one("x.nfo", 500<<10)) {
		t.Error("a one-file 500 KiB .nfo passes the default minimums")
	}
	if !def.passes(one("x.mkv", 4<<30)) {
		t.Error("a one-file 4 GiB .mkv fails the default minimums")
	}
	if !(SettleConfig{MinBytes: -1}.withDefaults()).passes(one("x.nfo", 500<<10)) {
		t.Error("MinBytes -1 still keeps the .nfo out")
	}
	if (SettleConfig{MinFiles: 2, MinBytes: -1}.withDefaults()).passes(one("x.mkv", 4<<30)) {
		t.Error("MinFiles 2 lets one file in")
	}
}

// (Was: a settled release too large to publish failed every sweep there, and
// the collections after it never settled.)
func TestSettleGoesOnPastAReleaseTooLarge(t *testing.T) {
	t.Parallel()
	st := storeOnSmallBus(t)
	ctx := context.Background()
	var p ArticleParser
	b := NewBatch()
	add := func(poster, subject, id string) {
		line := fmt.Appendf(nil, "1\t%s\t%s\tSat, 14 Nov 2023 22:13:20 +0000\t<%s>\t\t700000\t5000", subject, poster, id)
		a, err := p.Parse(line, "alt.binaries.a")
		if err != nil {
			t.Fatal(err)
		}
		b.Add(a)
	}
	// Incomplete posts, two parts of three: five small ones, and one of
	// 400 files whose release is over the max payload.
	for i := range 5 {
		for part := 1; part <= 2; part++ {
			add("good@example.com", fmt.Sprintf(`Post.%d [1/1] - "Post.%d.mkv" yEnc (%d/3)`, i, i, part), fmt.Sprintf("%d.%d@good", i, part))
		}
	}
	pad := strings.Repeat("x", 600)
	for f := 1; f <= 400; f++ {
		for part := 1; part <= 2; part++ {
			add("big@example.com", fmt.Sprintf(`Many.Files [%d/400] - "Many.Files.%s.%03d.mkv" yEnc (%d/3)`, f, pad, f, part), fmt.Sprintf("%d.%d@big", f, part))
		}
	}
	t0 := time.Unix(1_800_000_000, 0)
	if res, err := st.Apply(ctx, b.Binaries(), t0); err != nil || res.Published != 0 || res.TooLarge != 0 {
		t.Fatalf("apply: %+v, %v; want nothing published, nothing too large", res, err)
	}
	cfg := SettleConfig{Window: time.Hour, MinCompletion: 0.5, MinBytes: -1}
	n, err := st.Settle(ctx, t0.Add(2*time.Hour), cfg)
	if err != nil || n != 5 {
		t.Fatalf("settle published %d, %v; want the 5 small posts", n, err)
	}
	if pub := publishedReleases(t, st); len(pub) != 5 {
		t.Fatalf("%d releases published, want 5", len(pub))
	}
}
