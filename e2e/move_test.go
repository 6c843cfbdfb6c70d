//go:build unix

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/placement"
)

// TestMovePausedOwner moves a scope between two persist servers sharing one
// data directory while its old owner is paused with requests queued, the
// case where an acknowledged write used to be lost:
//
//  1. Server 0 (`--ids 0`) owns everything; eight clients do random get,
//     set, CAS and delete on the scope's KV stream (linRun), a watcher
//     follows it.
//  2. With no request in flight, server 0 is stopped with SIGSTOP; then
//     every client sends its next request to it (their cached owner), and
//     a scripted client sends set(kx, A) with a msgID. The watcher's
//     connection is down from here to step 5.
//  3. Server 1 starts with `--ids 0,1` and the balancer's list becomes
//     0,1, under which server 1 owns the scope, as when a server is added.
//     The clients' attempts time out and are retried at server 1; set A's
//     retry is acknowledged there, then set(kx, B).
//  4. Server 0 resumes, still with its old list, and finds its queue: the
//     requests whose callers gave up and retried elsewhere.
//  5. Server 1 deletes ky (a key written in step 1). The balancer's list
//     goes back to 0 and server 1 stops, as when a server is removed: the
//     scope is server 0's again, which serves it from what it knew before
//     the pause. The watcher comes back and re-reads the stream from
//     server 0 before anything else is written; the scripted client reads
//     kx.
//
// Then every client's history must be linearizable (porcupine, linModel),
// kx must hold B (a queued copy of A applied at resume would overwrite it),
// server 0's inventory must count what the file holds when it takes the
// scope back, and the watcher must have delivered every acknowledged seq
// once, in order (or reported it skipped), and hold exactly the stream's
// rows at the end.
func TestMovePausedOwner(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts server processes")
	}
	const (
		clients       = 8
		clientTimeout = time.Second
		// perPhase is how many operations the random clients finish in
		// each phase: enough to mix reads and writes on every key, few
		// enough for a CI run of seconds.
		perPhase = 1000
	)
	keys := []string{"k0", "k1", "k2", "k3"}
	scope := movingScope(t, []string{"0"}, []string{"0", "1"})

	e := testnats.Server(t, testnats.Options{})
	nc := testnats.Conn(t, e)
	data := t.TempDir()
	bal := startTestBalancer(t, nc, "0")
	s0 := startServer(t, e, nc, data, "0", "0")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The watcher's connection goes through a proxy the test takes down
	// from step 2 to step 5.
	proxy := startCutProxy(t, e.ClientURL())
	wc, err := persist.NewClient(persist.ClientConfig{Conn: proxy.conn(t), Timeout: clientTimeout})
	if err != nil {
		t.Fatal(err)
	}
	sw := &seqWatcher{rows: map[string]moveRow{}, delivered: map[uint64]string{}}
	// A short idle check asks the server for the stream's inventory often,
	// which is what a stale one would mislead.
	w, err := wc.KV(scope, "kv").Stream().Watch(ctx, persist.WatchOptions{IdleCheck: 300 * time.Millisecond}, sw.fn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop(context.Background()) }()
	// Every seq the clients are answered with comes after the watcher's
	// first read, so each is delivered or reported skipped.
	testwait.For(t, "the watcher caught up", func() bool { return sw.CaughtUp() > 0 })

	run := startLinRun(t, ctx, clients, keys, func(int) *persist.KV { return linKV(t, e, scope, clientTimeout) })
	script := run.Client(linKV(t, e, scope, clientTimeout))
	const kx = "kx" // the scripted client's key, which no random client uses
	// ky is the scripted client's other key: written now, by server 0,
	// and deleted while the watcher is away, at the end.
	const ky = "ky"
	// The scripted client learns its owner (server 0) now, so that set A
	// goes there without asking the balancer.
	if out, _ := script.run(ctx, run.start, linInput{Op: linSet, Key: ky, Value: script.value()}, true); out.Unknown {
		t.Fatal("set of ky not answered")
	}
	run.WaitAnswered(perPhase)

	// 2. Pause server 0 between two operations, so that it holds no
	// SQLite lock server 1 would wait for, then queue requests on it. The
	// watcher is cut off until the scope is back on server 0 (step 5), so
	// it knows what server 0 knows, no more.
	run.Hold()
	proxy.Down()
	s0.Pause()
	run.Release()
	a := linInput{Op: linSet, Key: kx, Value: script.value()}
	aDone := make(chan linOutput, 1)
	aCall := time.Now()
	go func() {
		out, _ := script.run(ctx, run.start, a, true)
		aDone <- out
	}()

	// 3. Add server 1: first the server with the new list, then the
	// balancer (docs/operations.md, "Adding or removing a persist server").
	s1 := startServer(t, e, nc, data, "1", "0", "1")
	bal.SetIDs("0", "1")
	aOut := <-aDone
	if aOut.Unknown {
		t.Fatal("set A got no answer within its attempts: the move did not happen")
	}
	if took := time.Since(aCall); took < clientTimeout {
		t.Fatalf("set A answered in %v, before its first attempt timed out: the paused server did not hold it", took)
	}
	b := linInput{Op: linSet, Key: kx, Value: script.value()}
	bOut, _ := script.run(ctx, run.start, b, true)
	if bOut.Unknown {
		t.Fatal("set B got no answer")
	}
	t.Logf("set A acknowledged at seq %d, set B at seq %d, by server 1", aOut.Seq, bOut.Seq)
	run.WaitAnswered(run.Answered() + perPhase)

	// 4. Server 0 resumes with its queue while server 1 serves the scope.
	s0.Resume()
	run.WaitAnswered(run.Answered() + perPhase)

	// 5. Remove server 1: the balancer first, then the server; the
	// clients that still send to server 1 meet no responders and ask the
	// balancer again. Meanwhile the random clients wait, server 1 deletes
	// ky, and then the watcher is let back: its re-read is answered by
	// server 0 before anything else is written, from whatever server 0
	// believes the stream holds.
	run.Hold()
	if out, _ := script.run(ctx, run.start, linInput{Op: linDelete, Key: ky}, false); !out.OK {
		t.Fatalf("delete of ky: %+v, want it existed", out)
	}
	bal.SetIDs("0")
	s1.Stop()
	// The figures a watcher's re-read trusts: server 0 must answer what
	// the file holds, not what it last wrote itself.
	checkInventory(t, ctx, script.kv.Stream(), bOut.Seq)
	resyncs, caught := w.Resyncs(), sw.CaughtUp()
	proxy.Up()
	testwait.Until(t, "the watcher re-read the stream after the cut", func() (bool, string) {
		return w.Resyncs() > resyncs && sw.CaughtUp() > caught, fmt.Sprintf("%d resyncs, %d caught-ups", w.Resyncs(), sw.CaughtUp())
	})
	run.Release()
	got, ok := script.run(ctx, run.start, linInput{Op: linGet, Key: kx}, false)
	if !ok {
		t.Fatal("get of kx after the move back not answered")
	}
	if !got.OK || got.Value != b.Value || got.Seq != bOut.Seq {
		t.Errorf("kx after the move back: %s, want set B's %s at seq %d (set A wrote %s and was acknowledged at seq %d, before B)",
			linModel.DescribeOperation(linInput{Op: linGet, Key: kx}, got), b.Value, bOut.Seq, a.Value, aOut.Seq)
	}
	run.WaitAnswered(run.Answered() + perPhase)
	run.Stop()

	history := run.History(script.kv, "moved 0 -> 1 -> 0 with server 0 paused")
	sw.check(t, ctx, w, script.kv.Stream(), history)
	checkLinearizable(t, history)
}

// movingScope is the first scope of the form project-move-N whose owner is
// server "0" under before and another server under after: the scope a
// change of the member list from before to after moves away from 0.
func movingScope(t *testing.T, before, after []string) string {
	t.Helper()
	for n := range 1000 {
		s := fmt.Sprintf("project-move-%d", n)
		if placement.Rendezvous(before, s) == "0" && placement.Rendezvous(after, s) != "0" {
			return s
		}
	}
	t.Fatalf("no scope moves from 0 when %v becomes %v", before, after)
	return ""
}

// checkInventory fails t unless stream's inventory counts the rows a scan
// finds and names a last seq at least as high as any of theirs and as
// atLeast, a seq the caller was answered with.
func checkInventory(t *testing.T, ctx context.Context, stream *persist.Stream, atLeast uint64) {
	t.Helper()
	inv, err := stream.Inventory(ctx)
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	var rows int64
	if _, err := stream.Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		rows++
		atLeast = max(atLeast, m.Seq)
		return nil
	}); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if inv.Count != rows || inv.Seq < atLeast {
		t.Errorf("inventory after the move back: count %d, seq %d; the stream holds %d rows and seq %d was assigned", inv.Count, inv.Seq, rows, atLeast)
	}
}

// moveRow is one row of a KV stream, as a watcher's events or a scan give it.
type moveRow struct {
	Seq   uint64
	Value string
}

// seqWatcher records what one watcher of a KV stream delivered and checks,
// as the events come, that sets arrive once and in seq order and that
// every delete names a seq delivered before. rows is the copy the events
// build: each key's newest row.
type seqWatcher struct {
	mu        sync.Mutex
	last      uint64            // the highest seq delivered as a set
	delivered map[uint64]string // every seq delivered as a set -> its key
	rows      map[string]moveRow
	skipped   [][2]uint64 // the [First, Last] of every skipped event
	caughtUp  int         // caught-up events so far
	errs      []string
}

// CaughtUp is the number of caught-up events so far: the watcher has read
// the stream's history, and then caught up after each resync.
func (s *seqWatcher) CaughtUp() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caughtUp
}

func (s *seqWatcher) fn(ev persist.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Kind {
	case persist.EventSet:
		m := ev.Msg
		if m.Seq <= s.last {
			s.errs = append(s.errs, fmt.Sprintf("set of seq %d after seq %d", m.Seq, s.last))
		}
		s.last = max(s.last, m.Seq)
		s.delivered[m.Seq] = m.Key
		if r, ok := s.rows[m.Key]; !ok || r.Seq < m.Seq {
			s.rows[m.Key] = moveRow{Seq: m.Seq, Value: string(m.Value)}
		}
	case persist.EventDelete:
		for _, seq := range ev.Seqs {
			key, ok := s.delivered[seq]
			if !ok {
				s.errs = append(s.errs, fmt.Sprintf("delete of seq %d, never delivered", seq))
				continue
			}
			if r, ok := s.rows[key]; ok && r.Seq == seq {
				delete(s.rows, key)
			}
		}
	case persist.EventCaughtUp:
		s.caughtUp++
	case persist.EventSkipped:
		s.skipped = append(s.skipped, [2]uint64{ev.First, ev.Last})
	case persist.EventEnded:
		s.errs = append(s.errs, fmt.Sprintf("ended: %v", ev.Err))
	}
}

// check fails t unless the watcher delivered every seq an operation of
// history was answered with (or reported it skipped: written and replaced
// while the watcher was away) and, once it has caught up, its copy is the
// stream's content.
func (s *seqWatcher) check(t *testing.T, ctx context.Context, w *persist.Watcher, stream *persist.Stream, history []porcupine.Operation) {
	t.Helper()
	want := map[string]moveRow{}
	if _, err := stream.Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		want[m.Key] = moveRow{Seq: m.Seq, Value: string(m.Value)}
		return nil
	}); err != nil {
		t.Fatalf("scan: %v", err)
	}
	// The watcher's copy can only be compared once it has caught up; a
	// copy that misses a change never becomes equal.
	testwait.Until(t, "the watcher's copy equal to the stream", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if maps.Equal(s.rows, want) {
			return true, ""
		}
		return false, fmt.Sprintf("watcher at seq %d: %s", w.LastSeq(), rowsDiff(s.rows, want))
	})
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		t.Errorf("watcher: %s", e)
	}
	missed := 0
	for _, op := range history {
		out := op.Output.(linOutput)
		if out.Unknown || !out.OK || out.Seq == 0 {
			continue
		}
		if _, ok := s.delivered[out.Seq]; ok {
			continue
		}
		if slices.ContainsFunc(s.skipped, func(r [2]uint64) bool { return r[0] <= out.Seq && out.Seq <= r[1] }) {
			continue
		}
		if missed++; missed <= 5 {
			t.Errorf("watcher missed seq %d (%s)", out.Seq, linModel.DescribeOperation(op.Input, op.Output))
		}
	}
	if missed > 5 {
		t.Errorf("watcher missed %d seqs in all", missed)
	}
	st := w.Stats()
	t.Logf("watcher: %d seqs delivered, %d skipped, %d resyncs, %d retries", len(s.delivered), st.Skipped, st.Resyncs, st.Retries)
}

// rowsDiff describes how got differs from want, key by key.
func rowsDiff(got, want map[string]moveRow) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			d = append(d, fmt.Sprintf("%s: have %v, stream %v", k, got[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s: have %v, not in the stream", k, got[k]))
		}
	}
	return strings.Join(d, "; ")
}
