package postproc

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// index reads articles first..last of group from addr into st, as a
// worker does.
func index(t *testing.T, st *usenet.Store, addr, group string, first, last int64) {
	t.Helper()
	ctx := context.Background()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Group(ctx, group); err != nil {
		t.Fatal(err)
	}
	var p usenet.ArticleParser
	b := usenet.NewBatch()
	if err := c.OverLines(ctx, first, last, func(line []byte) error {
		a, err := p.Parse(line, group)
		if err != nil {
			return err
		}
		b.Add(a)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, b.Binaries(), time.Now()); err != nil {
		t.Fatal(err)
	}
}

func newProcessor(t *testing.T, st *usenet.Store, addr string) *Processor {
	t.Helper()
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: addr}, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A queue of one and quick rescans: most releases overflow it.
	p, err := New(Config{Store: st, Pool: pool, Queue: 1, Workers: 1, Duty: 1, RescanEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProcessorLosesNothing: releases the queue has no room for, and
// releases published while no processor ran, are all processed, each
// once, through one connection.
func TestProcessorLosesNothing(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	// The processor reads srv; the test indexes from a twin serving the
	// same generated group (the same articles and message-ids), so srv's
	// peak counts the processor's pool alone. (Was: one server, whose peak
	// was reset once its connections fell to one: under load that one
	// could be the indexing connection, still closing, and the pool's
	// first dial then read as a second connection.)
	srv := nntptest.Start(t, nntptest.Config{PartSize: 2000})
	twin := nntptest.Start(t, nntptest.Config{PartSize: 2000})
	const group = "alt.binaries.postproc.test"
	srv.AddGroup(group, 4000) // 20 releases of 200 articles
	twin.AddGroup(group, 4000)
	st, err := usenet.NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(usenet.SettleConfig{MinBytes: -1})
	ctx := context.Background()

	p := newProcessor(t, st, srv.Addr())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	index(t, st, twin.Addr(), group, 1, 2000)
	done := func(want int64) func() (bool, string) {
		return func() (bool, string) {
			sum, err := st.PostSummary(ctx)
			if err != nil {
				return false, err.Error()
			}
			var n int64
			for _, k := range sum.Releases {
				n += k
			}
			return n == want && sum.Pending == 0, fmt.Sprintf("%+v", sum)
		}
	}
	testwait.Until(t, "the first 10 releases processed", done(10))
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	first := p.Counters().Stats()
	if first.Dropped == 0 || first.Releases != 10 {
		t.Errorf("stats %+v: want drops (a queue of one) and 10 releases", first)
	}

	// Published while none runs: the next one's first scan finds them.
	if peak := srv.Stats().Peak; peak > 1 {
		t.Errorf("peak %d connections, want 1: the pool's", peak)
	}
	index(t, st, twin.Addr(), group, 2001, 4000)
	p2 := newProcessor(t, st, srv.Addr())
	if err := p2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "all 20 releases processed", done(20))
	if err := p2.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p2.Counters().Stats(); s.Releases != 10 || s.Articles != 10 {
		t.Errorf("second processor %+v: want the 10 new releases, one article each", s)
	}
	if peak := srv.Stats().Peak; peak > 1 {
		t.Errorf("peak %d connections, want 1: the pool's", peak)
	}
}

// TestGeneratedReleasesAreRead: the generated groups, which up's demo
// provider serves, post releases whose first RAR volume post-processing
// reads: every release is done with its inner file named, a share of them
// passworded, and no body fails.
// (Was: every demo release was recorded failed, a "rar" failure each: the
// .part01.rar bodies decoded to random bytes, no RAR headers.)
func TestGeneratedReleasesAreRead(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	srv := nntptest.Start(t, nntptest.Config{PartSize: 2000})
	const group, articles, releases = "alt.binaries.demo.1", 20000, 100 // 200 articles a release
	srv.AddGroup(group, articles)
	st, err := usenet.NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(usenet.SettleConfig{MinBytes: -1})
	ctx := context.Background()
	index(t, st, srv.Addr(), group, 1, articles)

	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Store: st, Pool: pool, Workers: 1, Duty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	var sum usenet.PostSummary
	testwait.Until(t, "every release processed", func() (bool, string) {
		sum, err = st.PostSummary(ctx)
		if err != nil {
			return false, err.Error()
		}
		var n int64
		for _, k := range sum.Releases {
			n += k
		}
		return n == releases && sum.Pending == 0, fmt.Sprintf("%+v", sum)
	})
	if sum.Releases[usenet.PostDone] != releases || len(sum.Failures) != 0 {
		t.Errorf("summary %+v: want all %d releases done, no failure", sum, releases)
	}
	if sum.Passworded == 0 || sum.Passworded == releases {
		t.Errorf("%d of %d releases passworded: want a share of them", sum.Passworded, releases)
	}
	// Each release's inner file is named after it.
	seen := 0
	if _, err := st.Releases().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		var r usenet.Release
		if m.Key == "" || json.Unmarshal(m.Value, &r) != nil {
			return nil
		}
		seen++
		rec, err := st.PostRecord(ctx, r.ID)
		if err != nil {
			return err
		}
		if len(rec.Inner) != 1 || !strings.HasPrefix(rec.Inner[0], r.Name+".") {
			t.Errorf("release %s: inner names %q, want one named after the release", r.Name, rec.Inner)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != releases {
		t.Errorf("%d releases in the stream, want %d", seen, releases)
	}
}

// TestProcessBoundsNamesFromBodies: a release whose par2 index (one
// article of 230 KiB) names its files with a thousand '&' each (6 bytes
// each as JSON) is processed, with the bus at NATS's default max payload
// of 1 MiB: the names kept are bounded, so its record and its publication
// fit. (Was: every name was kept, the release's publication took 1.27 MB
// and failed too-large, so Process failed and the release was read again
// at every scan, for good.)
func TestProcessBoundsNamesFromBodies(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1, persistenv.NATS(testnats.Options{MaxPayload: 1 << 20}))
	srv := nntptest.Start(t)
	const group, title = "alt.binaries.postproc.names", "Some.Show.S01E02.720p-GRP"
	srv.AddGroup(group, 0)
	st, err := usenet.NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(usenet.SettleConfig{MinBytes: -1})
	ctx := context.Background()

	var idx []byte
	for i := 0; len(idx) < 230<<10; i++ {
		idx = append(idx, par2FileDescPacket(fmt.Sprintf("%04d%s.mkv", i, strings.Repeat("&", 1000)), 1000, i)...)
	}
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	files := []testpost.File{{Name: title + ".par2", Data: idx}, {Name: title + ".part01.rar", Data: make([]byte, 5000)}}
	_, err = testpost.PostFiles(ctx, c, group, "Poster <poster@switchyard.test>", files, testpost.Options{Title: title, PartSize: 300 << 10})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	index(t, st, srv.Addr(), group, 1, 2)
	var rel usenet.Release
	if _, err := st.Releases().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key != "" {
			return json.Unmarshal(m.Value, &rel)
		}
		return nil
	}); err != nil || rel.ID == "" {
		t.Fatalf("no release indexed (%v)", err)
	}

	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Stop(ctx)
	p, err := New(Config{Store: st, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Process(ctx, rel); err != nil {
		t.Fatalf("Process: %v", err)
	}
	rec, err := st.PostRecord(ctx, rel.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != usenet.PostDone || len(rec.Par2) == 0 {
		t.Fatalf("record %s with %d par2 files; want done, with some", rec.Status, len(rec.Par2))
	}
	var names int
	for _, f := range rec.Par2 {
		names += jsonLen(f.Name)
	}
	if names > par2ListMax {
		t.Fatalf("%d par2 names of %d bytes as JSON; want at most %d", len(rec.Par2), names, par2ListMax)
	}
}

// par2FileDescPacket is a PAR 2.0 file description packet for name, size
// and file id number id, whose MD5 verifies.
func par2FileDescPacket(name string, size uint64, id int) []byte {
	body := binary.LittleEndian.AppendUint64(make([]byte, 8), uint64(id)) // file id
	body = append(body, make([]byte, 32)...)                              // MD5s of the file and of its first 16 KiB
	body = binary.LittleEndian.AppendUint64(body, size)
	body = append(body, name...)
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	pkt := []byte("PAR2\x00PKT")
	pkt = binary.LittleEndian.AppendUint64(pkt, uint64(64+len(body)))
	pkt = append(pkt, make([]byte, 16)...) // MD5, below
	pkt = append(pkt, bytes.Repeat([]byte{7}, 16)...)
	pkt = append(pkt, "PAR 2.0\x00FileDesc"...)
	pkt = append(pkt, body...)
	sum := md5.Sum(pkt[32:])
	copy(pkt[16:32], sum[:])
	return pkt
}

// TestProcessorLifecycle: the lifecycle rules.
func TestProcessorLifecycle(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	srv := nntptest.Start(t)
	st, err := usenet.NewStore(env.Client(), "")
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Rules(t, func() lifecycle.Service { return newProcessor(t, st, srv.Addr()) })
}
