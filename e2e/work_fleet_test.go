//go:build unix

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

// TestWorkFleet runs the pipeline as separate processes, as a fleet would:
// two coordinator shards and three workers on a shared bus and persist,
// against the test NNTP server with 3 groups of 100,000 articles. On the
// way it SIGKILLs a worker holding a lease, SIGKILLs shard 2 in the middle
// of a prefetch and restarts it, and SIGTERMs shard 1 with chunks in flight.
// In the end every article is indexed exactly once (the indexer's digests),
// the dead worker's late finish is fenced, the provider never saw more
// connections than its limit, and every process that was told to stop
// exited 0.
func TestWorkFleet(t *testing.T) {
	env := testpersist.Start(t, 2)
	const articles = 100_000
	const conns = 4
	groups := []string{"alt.binaries.fleet.a", "alt.binaries.fleet.b", "alt.binaries.fleet.c"}
	srv := nntptest.Start(t, nntptest.Config{MaxConns: 64})
	for _, g := range groups {
		srv.AddGroup(g, articles)
	}
	ctx := context.Background()
	// Slow chunks, so that a prefetch can be caught in the middle.
	slow := nntptest.Faults{Delay: 20 * time.Millisecond}
	srv.SetFaults(slow)

	c := env.Client()
	st, err := work.NewStore(c, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--nats", env.URL(), "--source", "fleet"}
	coordArgs := func(shard string) []string {
		return append([]string{"coordinator", "run", "--shard", shard, "--nntp", srv.Addr(), "--groups", "alt.binaries.fleet.*",
			"--nntp-conns", fmt.Sprint(conns), "--history-depth", fmt.Sprint(articles), "--chunk", "200",
			"--lease-ttl", "3s", "--abandoned-every", "1s", "--prefetch-ahead", "8", "--share-every", "200ms"}, common...)
	}
	workerArgs := func(name string) []string {
		return append([]string{"worker", "run", "--indexer", "count", "--name", name, "--lease-ttl", "3s"}, common...)
	}
	c1 := startLogProc(t, "coordinator 1/2", coordArgs("1/2")...)
	c2 := startLogProc(t, "coordinator 2/2", coordArgs("2/2")...)
	c1.waitLog("coordinator started", 30*time.Second)
	c2.waitLog("prefetching only", 30*time.Second)

	// midPrefetch finds a range of shard that has chunks in its spool but
	// is not spooled yet.
	midPrefetch := func(shard work.Shard) uint64 {
		rs, err := st.Ranges(ctx)
		if err != nil {
			return 0
		}
		for _, r := range rs {
			if r.Val.State != work.StatePlanned || !shard.Owns(r.Val.ID) {
				continue
			}
			if inv, err := st.Spool(r.Val.ID).Inventory(ctx); err == nil && inv.Count > 0 {
				return r.Val.ID
			}
		}
		return 0
	}
	// freeze holds every OVER at the server once both shards are in the
	// middle of a prefetch.
	shard1, shard2 := work.Shard{Index: 1, Count: 2}, work.Shard{Index: 2, Count: 2}
	for {
		waitStatus(t, st, "both shards in the middle of a prefetch", func(work.Status) bool {
			return midPrefetch(shard1) != 0 && midPrefetch(shard2) != 0
		})
		srv.SetFaults(nntptest.Faults{HoldOver: true})
		if midPrefetch(shard1) != 0 && midPrefetch(shard2) != 0 {
			break
		}
		srv.SetFaults(slow) // one finished its range in between: again
	}

	// Shard 2 dies in the middle of a prefetch and comes back.
	half := midPrefetch(shard2)
	c2.signal(syscall.SIGKILL)
	c2.exit(10 * time.Second)
	t.Logf("shard 2 killed with range %d half spooled", half)
	c2 = startLogProc(t, "coordinator 2/2 (restarted)", coordArgs("2/2")...)

	// Shard 1, told to stop with chunks in flight (held at the server),
	// waits for them and exits 0; a new shard 1 takes over.
	c1.signal(syscall.SIGTERM)
	c1.waitLog("stopping: waiting for the chunks in flight", 10*time.Second)
	if strings.Contains(c1.logText(), "chunks=0") {
		t.Errorf("shard 1 had no chunk in flight when told to stop:\n%s", c1.logText())
	}
	srv.SetFaults(slow)
	if code := c1.exit(20 * time.Second); code != 0 {
		t.Fatalf("coordinator 1/2 exited %d after SIGTERM, want 0:\n%s", code, c1.logText())
	}
	c1.waitLog("coordinator stopped", time.Second)
	if strings.Contains(c1.logText(), "closing connections still fetching") {
		t.Errorf("shard 1 gave up on its chunks in flight:\n%s", c1.logText())
	}
	c1 = startLogProc(t, "coordinator 1/2 (restarted)", coordArgs("1/2")...)

	// A worker SIGKILLed in the middle of a range. It is SIGSTOPped while
	// it holds a lease; what it sent just before still lands, so it counts
	// as mid-range only once its lease expires unrenewed (a worker that had
	// read everything would have renewed it for much longer).
	var dead work.LeaseStatus
	var deadToken uint64
	w1 := startLogProc(t, "worker w1", workerArgs("w1")...)
	for dead.Range == 0 {
		var held work.LeaseStatus
		waitStatus(t, st, "a lease held by w1", func(s work.Status) bool {
			for _, l := range s.Leases {
				if l.Holder == "w1" && !l.ReadAll {
					held = l
					return true
				}
			}
			return false
		})
		w1.signal(syscall.SIGSTOP)
		// A lease is taken in two steps: its lease entry, then the range's
		// compare-and-set that counts the attempt. Stopped between them,
		// w1 has used no attempt, and the next holder's lease is the
		// range's first: not the case this test is after, so let it go on
		// and pick another. (A range write still in flight when it stopped
		// only costs a retry here.)
		if r, err := st.Range(ctx, held.Range); err != nil || r.Val.State != work.StateLeased || r.Val.Holder != "w1" {
			w1.signal(syscall.SIGCONT)
			continue
		}
		var token uint64
		waitStatus(t, st, "w1's lease to expire or to show it read everything", func(work.Status) bool {
			l, err := st.Lease(ctx, held.Range)
			if errors.Is(err, persist.ErrNotFound) {
				// Gone: expired, or removed by the finish w1 sent just
				// before it stopped, which this poll may never have seen
				// as a Finished lease. Only the range says which.
				r, err := st.Range(ctx, held.Range)
				if err != nil {
					return false
				}
				if r.Val.State != work.StateDone {
					dead, deadToken = held, token
				}
				return true
			}
			if err != nil {
				return false
			}
			token = l.Seq
			return l.Val.ReadAll || l.Val.Finished
		})
		if dead.Range == 0 {
			w1.signal(syscall.SIGCONT) // it got to the end in between: again
		}
	}
	w1.signal(syscall.SIGKILL)
	w1.exit(10 * time.Second)
	t.Logf("worker %s killed holding range %d (token %d)", dead.Holder, dead.Range, deadToken)
	workers := []*logProc{
		startLogProc(t, "worker 2", workerArgs("w2")...),
		startLogProc(t, "worker 3", workerArgs("w3")...),
		startLogProc(t, "worker 4", workerArgs("w4")...),
	}

	srv.SetFaults(nntptest.Faults{})
	final := waitStatusWithin(t, st, 4*time.Minute, "every range done", func(s work.Status) bool {
		if len(s.Groups) != len(groups) || s.Ranges[work.StateFailed] > 0 {
			return false
		}
		for _, g := range s.Groups {
			if g.PlannedThrough != articles || g.Planned != articles || g.Done != articles {
				return false
			}
		}
		return true
	})
	if final.Ranges[work.StateDone] == 0 {
		t.Fatalf("no ranges done: %+v", final)
	}

	// Exactly once: the indexer's results add up to every article once.
	got, done := indexed(t, st)
	want := expectedCounts(groups, articles)
	for _, g := range groups {
		if got[g] != want[g] {
			t.Errorf("%s: indexed %+v, want %+v (every article exactly once)", g, got[g], want[g])
		}
	}

	// The dead worker's finish, replayed with its token, is fenced and
	// changes nothing.
	before, err := st.Range(ctx, dead.Range)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := work.NewLeases(st, work.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	late := &work.Held{Range: before.Val, Token: deadToken, Holder: dead.Holder}
	if err := leases.Finish(ctx, late, []byte(`{"forged":{"Articles":1}}`)); !errors.Is(err, work.ErrFenced) {
		t.Errorf("late finish of range %d with the dead worker's token: %v, want ErrFenced", dead.Range, err)
	}
	after, err := st.Range(ctx, dead.Range)
	if err != nil {
		t.Fatal(err)
	}
	if after.Seq != before.Seq || string(after.Val.Result) != string(before.Val.Result) {
		t.Errorf("the fenced finish changed range %d: %+v -> %+v", dead.Range, before.Val, after.Val)
	}
	switch {
	case after.Val.Attempts >= 2:
	case after.Val.Attempts == 1 && after.Val.Holder == dead.Holder:
		// What w1 sent just before it was stopped (its ReadAll) landed
		// after the poll saw its lease without it, and the range was
		// finished from it: correct, and the checks above hold, but no
		// second lease was needed this run.
		t.Logf("range %d was finished from the killed worker's last report: no second lease this run", dead.Range)
	default:
		t.Errorf("range %d held by the killed worker: %d attempts by %s, want a second lease", dead.Range, after.Val.Attempts, after.Val.Holder)
	}

	// Spools of done ranges are gone.
	for _, r := range done {
		inv, err := st.Spool(r.ID).Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Count != 0 {
			t.Errorf("range %d is done but its spool holds %d chunks", r.ID, inv.Count)
		}
	}

	if peak := srv.Stats().Peak; peak > conns {
		t.Errorf("the provider saw %d connections at once, over its limit of %d", peak, conns)
	}

	for _, p := range append(workers, c1, c2) {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range append(workers, c1, c2) {
		if code := p.exit(30 * time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", p.name, code)
		}
	}
}
