package usenet

import (
	"bytes"
	"context"
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
