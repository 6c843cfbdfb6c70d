package search

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

func publish(t *testing.T, s *persist.Stream, rs ...usenet.Release) uint64 {
	t.Helper()
	var last uint64
	for _, r := range rs {
		v, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Set(context.Background(), v, persist.SetOptions{Key: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Seq
	}
	return last
}

func follow(t *testing.T, ix *Index, s *persist.Stream) *Follower {
	t.Helper()
	f, err := ix.Follow(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func hasIDs(t *testing.T, ix *Index, want ...string) bool {
	t.Helper()
	res, err := ix.Search(context.Background(), Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != len(want) {
		return false
	}
	got := map[string]bool{}
	for _, r := range res.Releases {
		got[r.ID] = true
	}
	for _, id := range want {
		if !got[id] {
			return false
		}
	}
	return true
}

// TestFollowResumes follows the stream, stops, writes while the index is
// closed, reopens and follows again: every release is there once, the
// replaced ones at their newest version, and the deleted one gone.
func TestFollowResumes(t *testing.T) {
	env := persistenv.Start(t, 1)
	c := env.Client()
	s := c.Stream("usenet", usenet.ReleasesStream)
	path := filepath.Join(t.TempDir(), "index.db")
	ix, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ix.now = func() time.Time { return testNow }

	publish(t, s, rel("a", "Alpha.One", 8010, 1), rel("b", "Beta.One", 8010, 2))
	f := follow(t, ix, s)
	select {
	case <-f.CaughtUp():
	case <-time.After(15 * time.Second):
		t.Fatal("no caught-up")
	}
	if !hasIDs(t, ix, "a", "b") {
		t.Fatalf("after caught-up: %+v", search(t, ix, Query{}))
	}
	// Live: a write after the follower started, and a new version of a.
	a2 := rel("a", "Alpha.Two", 8010, 1)
	a2.Version = 2
	last := publish(t, s, rel("c", "Gamma.One", 8010, 3), a2)
	testwait.For(t, "live writes", func() bool { return ix.LastSeq() >= last })
	if res := search(t, ix, Query{Words: "alpha two"}); res.Total != 1 {
		t.Errorf("new version of a not applied: %+v", res)
	}
	if err := f.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	stopped := last

	// While away: one more release, b deleted, and an old version of c
	// that must not win.
	d := rel("d", "Delta.One", 8010, 4)
	last = publish(t, s, d)
	if _, err := c.KV("usenet", usenet.ReleasesStream).Delete(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	c0 := rel("c", "Gamma.Zero", 8010, 3)
	c0.Version = 0
	last = publish(t, s, c0)

	ix, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ix.now = func() time.Time { return testNow }
	if ix.LastSeq() != stopped {
		t.Fatalf("reopened LastSeq = %d, want %d", ix.LastSeq(), stopped)
	}
	f = follow(t, ix, s)
	defer func() { _ = f.Stop(context.Background()) }()
	testwait.For(t, "resumed writes and the delete", func() bool {
		return ix.LastSeq() >= last && hasIDs(t, ix, "a", "c", "d")
	})
	if res := search(t, ix, Query{Words: "gamma one"}); res.Total != 1 {
		t.Errorf("the old version of c replaced the newer: %+v", res)
	}
	if res := search(t, ix, Query{Words: "alpha"}); res.Total != 1 || res.Releases[0].Version != 2 {
		t.Errorf("a = %+v", res)
	}
	// Applied once: the count agrees with the rows.
	if n, _ := ix.Count(context.Background()); n != 3 {
		t.Errorf("count = %d, want 3", n)
	}
	if f.Malformed() != 0 {
		t.Errorf("malformed = %d", f.Malformed())
	}
}

// TestFollowRemovesDeletedWhenStreamAhead: a release deleted while the
// index was not following is removed once the follower catches up, even
// when a release published meanwhile makes the stream's count equal the
// index's (index a,b; stream b,d at the reconcile, d not applied yet).
// The reconcile used to trust equal counts alone, and a stayed indexed for
// good. The test holds every connection of the index's pool so that the
// follower's first Apply (the batch carrying the caught-up event) waits,
// publishes d meanwhile, then lets it go.
func TestFollowRemovesDeletedWhenStreamAhead(t *testing.T) {
	env := persistenv.Start(t, 1)
	c := env.Client()
	s := c.Stream("usenet", usenet.ReleasesStream)
	ix, err := Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	ix.now = func() time.Time { return testNow }
	ctx := context.Background()

	publish(t, s, rel("a", "Alpha.One", 8010, 1), rel("b", "Beta.One", 8010, 2))
	f := follow(t, ix, s)
	select {
	case <-f.CaughtUp():
	case <-time.After(15 * time.Second):
		t.Fatal("no caught-up")
	}
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !hasIDs(t, ix, "a", "b") {
		t.Fatalf("index: %+v", search(t, ix, Query{}))
	}

	// While away: a is deleted.
	if _, err := c.KV("usenet", usenet.ReleasesStream).Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}

	// Hold the pool so that the follower's first Apply waits.
	var conns []*sql.Conn
	for range 4 {
		cn, err := ix.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cn)
	}
	waits := ix.db.Stats().WaitCount
	f = follow(t, ix, s)
	defer func() { _ = f.Stop(context.Background()) }()
	testwait.For(t, "the first batch to wait for a connection", func() bool { return ix.db.Stats().WaitCount > waits })
	// A live write lands before the reconcile reads the stream's count.
	last := publish(t, s, rel("d", "Delta.One", 8010, 3))
	for _, cn := range conns {
		_ = cn.Close()
	}
	select {
	case <-f.CaughtUp():
	case <-time.After(15 * time.Second):
		t.Fatal("no caught-up")
	}
	testwait.For(t, "d applied", func() bool { return ix.LastSeq() >= last })
	if !hasIDs(t, ix, "b", "d") {
		t.Errorf("deleted release a still indexed: %v", ids(search(t, ix, Query{Limit: 100})))
	}
}

func TestFollowSkipsMalformed(t *testing.T) {
	env := persistenv.Start(t, 1)
	s := env.Client().Stream("usenet", usenet.ReleasesStream)
	ix := openTest(t)
	if _, err := s.Set(context.Background(), []byte("not json"), persist.SetOptions{Key: "bad"}); err != nil {
		t.Fatal(err)
	}
	last := publish(t, s, rel("ok", "Fine", 8010, 0))
	f := follow(t, ix, s)
	defer func() { _ = f.Stop(context.Background()) }()
	testwait.For(t, "the good release", func() bool { return ix.LastSeq() >= last })
	if f.Malformed() != 1 || !hasIDs(t, ix, "ok") {
		t.Errorf("malformed = %d, index %+v", f.Malformed(), search(t, ix, Query{}))
	}
}

// TestFollowerLifecycle: the follower outlives its Start context and
// follows the lifecycle rules.
func TestFollowerLifecycle(t *testing.T) {
	env := persistenv.Start(t, 1)
	s := env.Client().Stream("usenet", usenet.ReleasesStream)
	ix, err := Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	ix.now = func() time.Time { return testNow }

	lifecycletest.Stop(t, NewFollower(ix, s)) // before Start

	f := NewFollower(ix, s)
	lifecycletest.Start(t, f) // ends the Start context, which bounds starting only
	last := publish(t, s, rel("a", "Alpha.One", 8010, 1))
	testwait.For(t, "a write after the Start context ended", func() bool { return ix.LastSeq() >= last })
	lifecycletest.Stop(t, f)
}
