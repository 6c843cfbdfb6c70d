package work_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

func ltLeases(t *testing.T, st *work.Store, cfg work.LeaseConfig) *work.Leases {
	t.Helper()
	l, err := work.NewLeases(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Many acquirers in two processes at once: every range is leased by
// exactly one of them.
func TestLeasesExclusive(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	const n = 12
	for i := range n {
		e.ltSpooled(t, "alt.x", []string{work.KindHistory, work.KindTail}[i%2], int64(i*10+1), int64(i*10+10), nil)
	}
	stores := []*work.Store{e.st, ltStoreOn(t, e.ctx, e.env.Client())}
	var mu sync.Mutex
	got := map[uint64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		l := ltLeases(t, stores[g%2], work.LeaseConfig{TTL: time.Minute})
		holder := fmt.Sprintf("w%d", g)
		wg.Go(func() {
			for {
				h, err := l.Acquire(e.ctx, holder)
				if errors.Is(err, work.ErrNoWork) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := got[h.Range.ID]; dup {
					errs <- fmt.Errorf("range %d leased by %s and %s", h.Range.ID, prev, holder)
				}
				got[h.Range.ID] = holder
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(got) != n {
		t.Fatalf("%d ranges leased, want %d", len(got), n)
	}
	for _, r := range e.ltRanges(t) {
		if r.State != work.StateLeased || r.Attempts != 1 || r.Holder != got[r.ID] {
			t.Errorf("range %d: %s attempts %d holder %q; want leased once by %q", r.ID, r.State, r.Attempts, r.Holder, got[r.ID])
		}
		le, err := e.st.Lease(e.ctx, r.ID)
		if err != nil || le.Val.Holder != got[r.ID] {
			t.Errorf("lease of range %d: %+v %v", r.ID, le.Val, err)
		}
	}
}

// Tail before history, lowest id first; HistoryFirst turns the first part
// around.
func TestLeasesOrder(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	h1, _ := e.ltSpooled(t, "alt.x", work.KindHistory, 1, 10, nil)
	t1, _ := e.ltSpooled(t, "alt.x", work.KindTail, 11, 20, nil)
	h2, _ := e.ltSpooled(t, "alt.x", work.KindHistory, 21, 30, nil)
	t2, _ := e.ltSpooled(t, "alt.x", work.KindTail, 31, 40, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{})
	for _, want := range []uint64{t1.ID, t2.ID} {
		h, err := l.Acquire(e.ctx, "w")
		if err != nil || h.Range.ID != want {
			t.Fatalf("Acquire: %+v %v; want range %d", h, err, want)
		}
		if err := l.Release(e.ctx, h); err != nil {
			t.Fatal(err)
		}
		// Releasing it gives it back: hold it by another holder instead.
		if h, err = l.Acquire(e.ctx, "hold"); err != nil || h.Range.ID != want {
			t.Fatalf("Acquire after release: %+v %v; want range %d", h, err, want)
		}
	}
	hf := ltLeases(t, e.st, work.LeaseConfig{HistoryFirst: true})
	for _, want := range []uint64{h1.ID, h2.ID} {
		h, err := hf.Acquire(e.ctx, "w")
		if err != nil || h.Range.ID != want {
			t.Fatalf("Acquire (history first): %+v %v; want range %d", h, err, want)
		}
	}
	if _, err := l.Acquire(e.ctx, "w"); !errors.Is(err, work.ErrNoWork) {
		t.Fatalf("Acquire with everything leased: %v, want ErrNoWork", err)
	}
}

// A lease that is not renewed expires and is taken again; its first holder
// is fenced off and changes nothing.
func TestLeasesExpiryFences(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, arts := e.ltSpooled(t, "alt.x", work.KindTail, 1, 250, nil)
	cfg := work.LeaseConfig{TTL: time.Second}
	la := ltLeases(t, e.st, cfg)
	lb := ltLeases(t, ltStoreOn(t, e.ctx, e.env.Client()), cfg)
	ha, err := la.Acquire(e.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Heartbeat(e.ctx, ha, 10); err != nil {
		t.Fatalf("a's heartbeat while its lease lives: %v", err)
	}
	if _, err := lb.Acquire(e.ctx, "b"); !errors.Is(err, work.ErrNoWork) {
		t.Fatalf("b acquires while a's lease lives: %v", err)
	}
	var hb *work.Held
	testwait.For(t, "a's lease to expire for b", func() bool {
		h, err := lb.Acquire(e.ctx, "b")
		if err != nil && !errors.Is(err, work.ErrNoWork) {
			t.Fatal(err)
		}
		hb = h
		return h != nil
	})
	if hb.Range.ID != r.ID || hb.Range.Attempts != 2 || hb.Range.Holder != "b" {
		t.Fatalf("b holds %+v; want range %d, attempt 2", hb.Range, r.ID)
	}
	if s := lb.Stats(); s.Expired != 1 || s.Acquired != 1 {
		t.Errorf("b's stats %+v: want 1 expiry seen, 1 acquired", s)
	}
	before := e.ltRange(t, r.ID)

	resA := json.RawMessage(`{"by":"a"}`)
	for name, call := range map[string]func() error{
		"heartbeat": func() error { return la.Heartbeat(e.ctx, ha, 20) },
		"read all":  func() error { return la.ReadAll(e.ctx, ha, resA) },
		"finish":    func() error { return la.Finish(e.ctx, ha, resA) },
		"fail":      func() error { return la.Fail(e.ctx, ha, "boom", nil) },
		"release":   func() error { return la.Release(e.ctx, ha) },
	} {
		if err := call(); !errors.Is(err, work.ErrFenced) {
			t.Errorf("a's %s with its old token: %v, want ErrFenced", name, err)
		}
	}
	if s := la.Stats(); s.Fenced != 5 || s.Finished != 0 {
		t.Errorf("a's stats %+v: want 5 fenced, none finished", s)
	}
	if after := e.ltRange(t, r.ID); after.Seq != before.Seq {
		t.Fatalf("a's fenced calls changed the range: %+v", after.Val)
	}
	if n := e.ltSpoolLen(t, r.ID); n != int64(len(arts)) {
		t.Fatalf("a's fenced calls touched the spool: %d lines left", n)
	}
	if le, err := e.st.Lease(e.ctx, r.ID); err != nil || le.Val.Holder != "b" || le.Seq != hb.Token {
		t.Fatalf("lease after a's calls: %+v %v; want b's, token %d", le, err, hb.Token)
	}

	resB := json.RawMessage(`{"by":"b"}`)
	if err := lb.Heartbeat(e.ctx, hb, 100); err != nil {
		t.Fatal(err)
	}
	if err := lb.ReadAll(e.ctx, hb, resB); err != nil {
		t.Fatal(err)
	}
	if err := lb.Finish(e.ctx, hb, resB); err != nil {
		t.Fatal(err)
	}
	done := e.ltRange(t, r.ID).Val
	if done.State != work.StateDone || string(done.Result) != string(resB) || done.Holder != "b" {
		t.Fatalf("range after b's finish: %+v; want done with b's result", done)
	}
	if _, err := e.st.Lease(e.ctx, r.ID); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("lease after finish: %v, want it dropped", err)
	}
	if n := e.ltSpoolLen(t, r.ID); n != 0 {
		t.Errorf("spool after finish: %d lines, want dropped", n)
	}
	if e.ltSpoolFile(t, r.ID) {
		t.Errorf("spool after finish: its stream file is left, want it removed")
	}
	if err := la.Finish(e.ctx, ha, resA); !errors.Is(err, work.ErrFenced) {
		t.Errorf("a's finish after b's: %v, want ErrFenced", err)
	}
	if _, err := la.Acquire(e.ctx, "a"); !errors.Is(err, work.ErrNoWork) {
		t.Errorf("Acquire of a done range: %v, want ErrNoWork", err)
	}
}

// Fail sends the range back until its last attempt, which fails it with
// what was missed; Release gives it back without using an attempt.
func TestLeasesFailAndRelease(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 150, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{MaxAttempts: 3})

	h, err := l.Acquire(e.ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(e.ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := e.ltRange(t, r.ID).Val; got.State != work.StateSpooled || got.Attempts != 0 {
		t.Fatalf("after release: %s, %d attempts; want spooled, 0", got.State, got.Attempts)
	}
	if _, err := e.st.Lease(e.ctx, r.ID); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("lease after release: %v, want dropped", err)
	}
	if err := l.Heartbeat(e.ctx, h, 1); !errors.Is(err, work.ErrFenced) {
		t.Fatalf("heartbeat after release: %v, want ErrFenced", err)
	}

	missed := [][2]int64{{40, 150}}
	for attempt := 1; attempt <= 3; attempt++ {
		h, err := l.Acquire(e.ctx, "w")
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if h.Range.Attempts != attempt {
			t.Fatalf("attempt %d: range says %d", attempt, h.Range.Attempts)
		}
		if err := l.Fail(e.ctx, h, fmt.Sprintf("boom %d", attempt), missed); err != nil {
			t.Fatal(err)
		}
		got := e.ltRange(t, r.ID).Val
		want := work.StateSpooled
		if attempt == 3 {
			want = work.StateFailed
		}
		if got.State != want || got.Error != fmt.Sprintf("boom %d", attempt) {
			t.Fatalf("after failed attempt %d: %s %q; want %s", attempt, got.State, got.Error, want)
		}
	}
	got := e.ltRange(t, r.ID).Val
	if len(got.Missed) != 1 || got.Missed[0] != missed[0] {
		t.Errorf("failed range's Missed %v, want %v", got.Missed, missed)
	}
	if n := e.ltSpoolLen(t, r.ID); n != 0 {
		t.Errorf("failed range's spool: %d lines, want dropped", n)
	}
	if e.ltSpoolFile(t, r.ID) {
		t.Errorf("failed range's spool: its stream file is left, want it removed")
	}
	if _, err := l.Acquire(e.ctx, "w"); !errors.Is(err, work.ErrNoWork) {
		t.Errorf("Acquire after the range failed: %v, want ErrNoWork", err)
	}
	if s := l.Stats(); s.Failed != 3 || s.Released != 1 || s.Acquired != 4 {
		t.Errorf("stats %+v", s)
	}
}

// A range whose holder dies after every lease expired MaxAttempts times is
// failed, not leased forever.
func TestLeasesExpiredTooOften(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 10, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{MaxAttempts: 2})
	for range 2 {
		h, err := l.Acquire(e.ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		// The holder "dies": its lease goes as an expiry would take it.
		if err := e.st.DropLease(e.ctx, h.Token); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Acquire(e.ctx, "w"); !errors.Is(err, work.ErrNoWork) {
		t.Fatalf("Acquire of a range out of attempts: %v, want ErrNoWork", err)
	}
	if got := e.ltRange(t, r.ID).Val; got.State != work.StateFailed || len(got.Missed) != 1 || got.Missed[0] != [2]int64{1, 10} {
		t.Fatalf("range %+v: want failed, all missed", got)
	}
}

// A holder that read everything and went quiet: FinishAbandoned finishes
// its range with the recorded result and fences the holder; a lease that
// did not read everything is left alone.
func TestLeasesFinishAbandoned(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	ra, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	rb, _ := e.ltSpooled(t, "alt.x", work.KindTail, 101, 200, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{})
	ha, err := l.Acquire(e.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := l.Acquire(e.ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	res := json.RawMessage(`{"read":"all"}`)
	if err := l.ReadAll(e.ctx, ha, res); err != nil {
		t.Fatal(err)
	}
	if err := l.Heartbeat(e.ctx, hb, 150); err != nil {
		t.Fatal(err)
	}
	patient := ltLeases(t, e.st, work.LeaseConfig{QuietAfter: time.Hour})
	if n, err := patient.FinishAbandoned(e.ctx); err != nil || n != 0 {
		t.Fatalf("FinishAbandoned before the lease went quiet: %d, %v; want 0", n, err)
	}
	quick := ltLeases(t, e.st, work.LeaseConfig{QuietAfter: 200 * time.Millisecond})
	testwait.For(t, "FinishAbandoned to finish the quiet range", func() bool {
		n, err := quick.FinishAbandoned(e.ctx)
		if err != nil || n > 1 {
			t.Fatalf("FinishAbandoned: %d, %v", n, err)
		}
		return n == 1
	})
	got := e.ltRange(t, ra.ID).Val
	if got.State != work.StateDone || string(got.Result) != string(res) {
		t.Fatalf("abandoned range %+v: want done with the recorded result", got)
	}
	if n := e.ltSpoolLen(t, ra.ID); n != 0 {
		t.Errorf("abandoned range's spool: %d lines, want dropped", n)
	}
	if err := l.Finish(e.ctx, ha, json.RawMessage(`{"late":true}`)); !errors.Is(err, work.ErrFenced) {
		t.Errorf("the quiet holder's late Finish: %v, want ErrFenced", err)
	}
	if got := e.ltRange(t, ra.ID).Val; string(got.Result) != string(res) {
		t.Errorf("late Finish changed the result to %s", got.Result)
	}
	// With the result it recorded, the holder's Finish finds its range
	// done as it wanted.
	if err := l.Finish(e.ctx, ha, res); err != nil {
		t.Errorf("the quiet holder's Finish with its recorded result: %v, want nil", err)
	}
	if got := e.ltRange(t, rb.ID).Val; got.State != work.StateLeased {
		t.Errorf("range still being read: %s, want leased", got.State)
	}
	if quick.Stats().Settled != 1 {
		t.Errorf("stats %+v: want 1 settled", quick.Stats())
	}
}

// The holder dies between marking its lease Finished and marking the range
// done: the next Acquire (or Settle) completes the range with its result.
func TestLeasesSettleAfterCrash(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	ra, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	rb, _ := e.ltSpooled(t, "alt.x", work.KindTail, 101, 200, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{})
	// Both are leased before either holder "crashes", so that no Acquire
	// meets a finished lease before the test asks for it.
	var hs []*work.Held
	for _, id := range []uint64{ra.ID, rb.ID} {
		h, err := l.Acquire(e.ctx, fmt.Sprintf("dies-on-%d", id))
		if err != nil || h.Range.ID != id {
			t.Fatalf("Acquire: %+v %v, want range %d", h, err, id)
		}
		hs = append(hs, h)
	}
	crash := func(h *work.Held) json.RawMessage {
		// Finish's first write, and nothing after it.
		res := json.RawMessage(fmt.Sprintf(`{"range":%d}`, h.Range.ID))
		le := work.Lease{Range: h.Range.ID, Holder: h.Holder, Progress: h.Range.Last, ReadAll: true, Finished: true, Result: res}
		if _, err := e.st.PutLease(e.ctx, le, h.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
		return res
	}
	resA := crash(hs[0])
	resB := crash(hs[1])

	if ok, err := l.Settle(e.ctx, rb.ID); err != nil || !ok {
		t.Fatalf("Settle: %v %v", ok, err)
	}
	other := ltLeases(t, ltStoreOn(t, e.ctx, e.env.Client()), work.LeaseConfig{})
	if _, err := other.Acquire(e.ctx, "next"); !errors.Is(err, work.ErrNoWork) {
		t.Fatalf("Acquire meeting a finished lease: %v, want ErrNoWork", err)
	}
	for id, res := range map[uint64]json.RawMessage{ra.ID: resA, rb.ID: resB} {
		got := e.ltRange(t, id).Val
		if got.State != work.StateDone || string(got.Result) != string(res) {
			t.Errorf("range %d: %s %s; want done with %s", id, got.State, got.Result, res)
		}
		if _, err := e.st.Lease(e.ctx, id); !errors.Is(err, persist.ErrNotFound) {
			t.Errorf("lease of range %d: %v, want dropped", id, err)
		}
		if n := e.ltSpoolLen(t, id); n != 0 {
			t.Errorf("spool of range %d: %d lines, want dropped", id, n)
		}
	}
	if s := other.Stats(); s.Settled != 1 {
		t.Errorf("Acquire's stats %+v: want 1 settled", s)
	}
	if ok, err := l.Settle(e.ctx, ra.ID); err != nil || ok {
		t.Errorf("Settle of a done range: %v %v, want false", ok, err)
	}
}

// A caller that stalled between creating its lease and writing the range
// (its lease expired, and another holder leased the range meanwhile) must
// not write over the new holder's range record when it resumes, nor fail
// the range under it at the last attempt.
func TestLeasesStalledTakeFenced(t *testing.T) {
	t.Parallel()
	for _, maxAttempts := range []int{3, 1} {
		t.Run(fmt.Sprintf("max%d", maxAttempts), func(t *testing.T) {
			t.Parallel()
			e := ltStart(t)
			r, arts := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
			cfg := work.LeaseConfig{TTL: time.Second, MaxAttempts: maxAttempts}
			stale := ltLeases(t, e.st, cfg)
			// The stalled caller's first step: it read the range and created
			// its lease, then went quiet past the TTL.
			seen := e.ltRange(t, r.ID)
			le := work.Lease{Range: r.ID, Holder: "x"}
			tok, err := e.st.PutLease(e.ctx, le, 0, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			testwait.For(t, "the stalled caller's lease to expire", func() bool {
				_, err := e.st.Lease(e.ctx, r.ID)
				return errors.Is(err, persist.ErrNotFound)
			})
			y := ltLeases(t, ltStoreOn(t, e.ctx, e.env.Client()), work.LeaseConfig{TTL: time.Minute, MaxAttempts: maxAttempts})
			hy, err := y.Acquire(e.ctx, "y")
			if err != nil || hy.Range.ID != r.ID {
				t.Fatalf("y.Acquire: %+v %v", hy, err)
			}
			before := e.ltRange(t, r.ID)

			h, err := stale.TakeLeased(e.ctx, seen, le, tok)
			if h != nil || !errors.Is(err, work.ErrConflict) {
				t.Fatalf("the stalled caller's take: %+v %v; want ErrConflict and no lease", h, err)
			}
			if after := e.ltRange(t, r.ID); after.Seq != before.Seq {
				t.Fatalf("the stalled caller wrote over y's range: %+v", after.Val)
			}
			if got, err := e.st.Lease(e.ctx, r.ID); err != nil || got.Seq != hy.Token {
				t.Fatalf("lease after the stalled take: %+v %v; want y's, token %d", got, err, hy.Token)
			}
			if n := e.ltSpoolLen(t, r.ID); n != int64(len(arts)) {
				t.Fatalf("spool after the stalled take: %d lines, want %d", n, len(arts))
			}
			if s := stale.Stats(); s.Fenced != 1 || s.Acquired != 0 || s.Expired != 0 {
				t.Errorf("stalled caller's stats %+v: want 1 fenced", s)
			}
			if err := y.Finish(e.ctx, hy, json.RawMessage(`{}`)); err != nil {
				t.Fatalf("y's Finish: %v", err)
			}
		})
	}
}

// A lease that read everything lives three AbandonedEvery rounds, so a
// longer --abandoned-every still meets it if its holder dies.
func TestLeasesReadAllOutlivesAbandonedRounds(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 10, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{AbandonedEvery: 30 * time.Minute})
	h, err := l.Acquire(e.ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := l.ReadAll(e.ctx, h, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	le, err := e.st.Lease(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.UnixMilli(le.Val.Expires).Sub(start), 90*time.Minute; got < want-time.Minute || got > want+time.Minute {
		t.Fatalf("read-all lease expires in %v, want about %v (3 rounds of 30m)", got, want)
	}
	if _, err := work.NewLeases(e.st, work.LeaseConfig{AbandonedEvery: -time.Second}); err == nil {
		t.Error("NewLeases with a negative AbandonedEvery: no error")
	}
}

// A done or failed range whose spool drop failed (its lease gone since)
// keeps no spool: FinishAbandoned's sweep drops it, and leaves the spools
// of ranges still to be read alone.
func TestLeasesFinishAbandonedSweepsSpools(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	// left writes r in state as a holder would have whose spool drop
	// then failed, and whose lease then went.
	left := func(first int64, state work.RangeState) work.Range {
		t.Helper()
		r, _ := e.ltSpooled(t, "alt.x", work.KindTail, first, first+149, nil)
		r.State = state
		if _, err := e.st.PutRange(e.ctx, r, e.ltRange(t, r.ID).Seq); err != nil {
			t.Fatal(err)
		}
		return r
	}
	done := left(1, work.StateDone)
	failed := left(201, work.StateFailed)
	// An older version emptied a done range's spool without dropping it.
	emptied := left(801, work.StateDone)
	if _, err := e.st.Spool(emptied.ID).Delete(e.ctx, persist.Delete{All: true}); err != nil {
		t.Fatal(err)
	}
	spooled, arts := e.ltSpooled(t, "alt.x", work.KindTail, 401, 550, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{})
	if n, err := l.FinishAbandoned(e.ctx); err != nil || n != 0 {
		t.Fatalf("FinishAbandoned: %d %v", n, err)
	}
	for _, r := range []work.Range{done, failed, emptied} {
		if n := e.ltSpoolLen(t, r.ID); n != 0 {
			t.Errorf("%s range %d: %d spooled lines left, want the spool dropped", r.State, r.ID, n)
		}
		if e.ltSpoolFile(t, r.ID) {
			t.Errorf("%s range %d: its spool's stream file is left, want it removed", r.State, r.ID)
		}
	}
	if n := e.ltSpoolLen(t, spooled.ID); n != int64(len(arts)) {
		t.Errorf("spooled range: %d lines left, want %d", n, len(arts))
	}
	if !e.ltSpoolFile(t, spooled.ID) {
		t.Errorf("spooled range: no spool file; the check above cannot see files")
	}
	// A range left the same way after the first sweep is found by the next.
	later := left(601, work.StateDone)
	if _, err := l.FinishAbandoned(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.ltSpoolLen(t, later.ID); n != 0 {
		t.Errorf("range done after the first sweep: %d lines left, want dropped", n)
	}
	if s := l.Stats(); s.Swept != 4 {
		t.Errorf("stats %+v: want 4 spools swept", s)
	}
}

// (Was: a take whose range write landed but whose answer came too late dropped its lease, so the range looked expired and the next taker counted the attempt again: with a slow persist, ranges were failed without any worker failing them.)
func TestLeasesTakeLandedLate(t *testing.T) {
	t.Parallel()
	x := ltStartLate(t)
	r, _ := x.ltSpooled(t, "alt.x", work.KindTail, 1, 10, nil)
	l := ltLeases(t, x.slow, work.LeaseConfig{MaxAttempts: 1})

	x.arm("ranges", x.ltRange(t, r.ID).Seq)
	h, err := l.Acquire(x.ctx, "w")
	if err != nil {
		_, again := l.Acquire(x.ctx, "w")
		t.Fatalf("Acquire whose range write landed after its timeout: %v; a second Acquire: %v, range %+v (want the first Acquire to hold the range, its one attempt unused by anyone else)",
			err, again, x.ltRange(t, r.ID).Val)
	}
	if h.Range.ID != r.ID || h.Range.Attempts != 1 {
		t.Fatalf("held %+v, want range %d on its first attempt", h.Range, r.ID)
	}
	if err := l.Finish(x.ctx, h, json.RawMessage(`{"n":10}`)); err != nil {
		t.Fatalf("Finish of the range taken late: %v", err)
	}
	if got := x.ltRange(t, r.ID).Val; got.State != work.StateDone || got.Attempts != 1 {
		t.Fatalf("range %+v: want done on its one attempt", got)
	}
}

// ltLateHeld is a range of x leased by "w" through x's slow client.
func ltLateHeld(t *testing.T, x *ltLate, cfg work.LeaseConfig) (*work.Leases, *work.Held) {
	t.Helper()
	r, _ := x.ltSpooled(t, "alt.x", work.KindTail, 1, 10, nil)
	l := ltLeases(t, x.slow, cfg)
	h, err := l.Acquire(x.ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if h.Range.ID != r.ID {
		t.Fatalf("held %+v, want range %d", h.Range, r.ID)
	}
	return l, h
}

// (Was: a Heartbeat whose lease write landed but whose answer came too late kept the old token: its holder's next call was fenced, and the lease ran out and counted as an expiry, so a slow persist cost a worker its range.)
func TestLeasesHeartbeatLandedLate(t *testing.T) {
	t.Parallel()
	x := ltStartLate(t)
	l, h := ltLateHeld(t, x, work.LeaseConfig{})
	id, tok := h.Range.ID, h.Token

	x.arm("leases", tok)
	if err := l.Heartbeat(x.ctx, h, 5); err != nil {
		again := l.Heartbeat(x.ctx, h, 6)
		t.Fatalf("Heartbeat whose write landed after its timeout: %v; the next Heartbeat: %v (want the first to move the token as if its answer had come)", err, again)
	}
	le, err := x.st.Lease(x.ctx, id)
	if err != nil || le.Seq == tok || le.Seq != h.Token || le.Val.Progress != 5 {
		t.Fatalf("lease %+v (%v), held token %d: want the renewed lease (progress 5) under the held token, not %d", le, err, h.Token, tok)
	}
	if err := l.Heartbeat(x.ctx, h, 6); err != nil {
		t.Fatalf("the next Heartbeat: %v", err)
	}
	if err := l.Finish(x.ctx, h, json.RawMessage(`{"n":10}`)); err != nil {
		t.Fatalf("Finish after the late Heartbeat: %v", err)
	}
	if got := x.ltRange(t, id).Val; got.State != work.StateDone || got.Attempts != 1 {
		t.Fatalf("range %+v: want done on its first attempt", got)
	}
	if s := l.Stats(); s.Fenced != 0 {
		t.Fatalf("stats %+v: want nothing fenced", s)
	}
}

// (Was: a Release whose lease write, or whose range write, landed but whose answer came too late failed: the range stayed leased to a lease that only ran out (counted as an expiry, the attempt the Release gave back), or stayed spooled under a lease nobody dropped, taken by nobody until it ran out.)
func TestLeasesReleaseLandedLate(t *testing.T) {
	t.Parallel()
	for _, stream := range []string{"leases", "ranges"} {
		t.Run(stream, func(t *testing.T) {
			t.Parallel()
			x := ltStartLate(t)
			l, h := ltLateHeld(t, x, work.LeaseConfig{})
			id := h.Range.ID

			prev := h.Token
			if stream == "ranges" {
				prev = x.ltRange(t, id).Seq
			}
			x.arm(stream, prev)
			if err := l.Release(x.ctx, h); err != nil {
				le, lerr := x.st.Lease(x.ctx, id)
				t.Fatalf("Release whose %s write landed after its timeout: %v; range %+v, lease %+v (%v) (want the range given back as if the answer had come)",
					stream, err, x.ltRange(t, id).Val, le, lerr)
			}
			if got := x.ltRange(t, id).Val; got.State != work.StateSpooled || got.Attempts != 0 {
				t.Fatalf("range %+v: want spooled with its attempt given back", got)
			}
			if _, err := x.st.Lease(x.ctx, id); !errors.Is(err, persist.ErrNotFound) {
				t.Fatalf("lease after Release: %v, want none", err)
			}
			if s := l.Stats(); s.Released != 1 || s.Fenced != 0 {
				t.Fatalf("stats %+v: want 1 released, nothing fenced", s)
			}
			// The next taker gets it at once, on its first attempt.
			h2, err := ltLeases(t, x.st, work.LeaseConfig{}).Acquire(x.ctx, "w2")
			if err != nil || h2.Range.ID != id || h2.Range.Attempts != 1 {
				t.Fatalf("Acquire after Release: %+v, %v; want range %d on its first attempt", h2, err, id)
			}
		})
	}
}

// (Was: a Finish whose range write landed but whose answer came too late failed: the caller took the done range for lost, and its spool and Finished lease stayed until FinishAbandoned.)
func TestLeasesFinishLandedLate(t *testing.T) {
	t.Parallel()
	x := ltStartLate(t)
	l, h := ltLateHeld(t, x, work.LeaseConfig{})
	id := h.Range.ID
	res := json.RawMessage(`{"n":10}`)

	x.arm("ranges", x.ltRange(t, id).Seq)
	if err := l.Finish(x.ctx, h, res); err != nil {
		t.Fatalf("Finish whose range write landed after its timeout: %v; held %+v, range %+v (want it finished as if the answer had come)",
			err, h.Range, x.ltRange(t, id).Val)
	}
	if h.Range.State != work.StateDone {
		t.Fatalf("held %+v: want done", h.Range)
	}
	if got := x.ltRange(t, id).Val; got.State != work.StateDone || string(got.Result) != string(res) {
		t.Fatalf("range %+v: want done with %s", got, res)
	}
	if _, err := x.st.Lease(x.ctx, id); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("lease after Finish: %v, want none", err)
	}
	if n := x.ltSpoolLen(t, id); n != 0 {
		t.Fatalf("spool holds %d lines after Finish, want none", n)
	}
	if s := l.Stats(); s.Finished != 1 {
		t.Fatalf("stats %+v: want 1 finished", s)
	}
}

// (Was: a Settle whose range write landed but whose answer came too late failed, and left the Finished lease and the spool of the done range to FinishAbandoned.)
func TestLeasesSettleLandedLate(t *testing.T) {
	t.Parallel()
	x := ltStartLate(t)
	_, h := ltLateHeld(t, x, work.LeaseConfig{})
	id := h.Range.ID
	res := json.RawMessage(`{"n":10}`)
	// The holder dies between marking its lease finished and the range.
	if _, err := x.st.PutLease(x.ctx, work.Lease{Range: id, Holder: "w", Progress: h.Range.Last, ReadAll: true, Finished: true, Result: res}, h.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	l := ltLeases(t, x.slow, work.LeaseConfig{})

	x.arm("ranges", x.ltRange(t, id).Seq)
	ok, err := l.Settle(x.ctx, id)
	if err != nil || !ok {
		le, lerr := x.st.Lease(x.ctx, id)
		t.Fatalf("Settle whose range write landed after its timeout: %v, %v; range %+v, lease %+v (%v) (want it settled as if the answer had come)",
			ok, err, x.ltRange(t, id).Val, le, lerr)
	}
	if got := x.ltRange(t, id).Val; got.State != work.StateDone || string(got.Result) != string(res) {
		t.Fatalf("range %+v: want done with %s", got, res)
	}
	if _, err := x.st.Lease(x.ctx, id); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("lease after Settle: %v, want none", err)
	}
	if n := x.ltSpoolLen(t, id); n != 0 {
		t.Fatalf("spool holds %d lines after Settle, want none", n)
	}
	if s := l.Stats(); s.Settled != 1 {
		t.Fatalf("stats %+v: want 1 settled", s)
	}
}

// A range record and a lease entry that do not decode (written by hand,
// or by another version) cost only their own range: Acquire leases the
// others and leaves the broken lease's range alone (it must not look
// free), FinishAbandoned's round and Status go through, and Status lists
// both records as broken, once each.
// (Was: one record that did not decode failed every read of its stream:
// Acquire, Status, the prefetcher and FinishAbandoned all failed until
// someone deleted it by hand.)
func TestLeasesSkipUndecodableRecords(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	free, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	guarded, _ := e.ltSpooled(t, "alt.x", work.KindTail, 101, 200, nil)
	brokenID, err := e.st.AllocIDs(e.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := e.env.Client()
	garbage := []byte(`{"id": not json`)
	brokenKey := fmt.Sprintf("%012d", brokenID)
	guardedKey := fmt.Sprintf("%012d", guarded.ID)
	if _, err := c.KV(work.Scope("src"), "ranges").Set(e.ctx, brokenKey, garbage, persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV(work.Scope("src"), "leases").Set(e.ctx, guardedKey, garbage, persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}

	l := ltLeases(t, e.st, work.LeaseConfig{})
	h, err := l.Acquire(e.ctx, "w")
	if err != nil {
		t.Fatalf("Acquire beside broken records: %v", err)
	}
	if h.Range.ID != free.ID {
		t.Fatalf("leased range %d, want %d (range %d's lease does not decode, so it is held)", h.Range.ID, free.ID, guarded.ID)
	}
	if _, err := l.Acquire(e.ctx, "w2"); !errors.Is(err, work.ErrNoWork) {
		t.Fatalf("second Acquire: %v, want ErrNoWork: the range under a broken lease is not free", err)
	}
	if _, err := l.FinishAbandoned(e.ctx); err != nil {
		t.Fatalf("FinishAbandoned beside broken records: %v", err)
	}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: nntptest.Start(t).Addr()}, HealthEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	pf, err := work.NewPrefetcher(e.st, pool, work.PrefetchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pf.Tick(e.ctx); err != nil {
		t.Fatalf("prefetch round beside broken records: %v", err)
	}
	if err := l.Finish(e.ctx, h, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second read finds the same records: counted once
		s, err := e.st.Status(e.ctx)
		if err != nil {
			t.Fatalf("Status beside broken records: %v", err)
		}
		if s.Ranges[work.StateDone] != 1 || s.Ranges[work.StateSpooled] != 1 {
			t.Errorf("status ranges %v, want 1 done, 1 spooled", s.Ranges)
		}
		got := map[string]string{}
		for _, b := range s.Broken {
			got[b.Stream] = b.Key
			if b.Error == "" || b.Seq == 0 {
				t.Errorf("broken record %+v: want its seq and error", b)
			}
		}
		if len(s.Broken) != 2 || got["ranges"] != brokenKey || got["leases"] != guardedKey {
			t.Errorf("status broken records %+v, want ranges/%s and leases/%s", s.Broken, brokenKey, guardedKey)
		}
	}
	if n := e.st.Undecodable(); n != 2 {
		t.Errorf("Undecodable() = %d, want 2 (each record once)", n)
	}
}

// A retirer that died between counting ranges in their group's record and
// deleting them: Status counts them once, and the next Retire deletes them
// and clears the list without counting them again. A done range still
// under a lease is not retired, however old.
// (Was: no retirement; this is the protocol's crash case.)
func TestLeasesRetireCompletesADeadRetirersClaim(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	if _, err := e.st.PutGroup(e.ctx, work.Group{Name: "alt.x", Low: 1, High: 300, PlannedThrough: 300}, 0); err != nil {
		t.Fatal(err)
	}
	a, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	b, _ := e.ltSpooled(t, "alt.x", work.KindTail, 101, 200, nil)
	c, _ := e.ltSpooled(t, "alt.x", work.KindTail, 201, 300, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{})
	for range 3 {
		h, err := l.Acquire(e.ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		if h.Range.ID == c.ID {
			// Its holder read everything and died.
			if err := l.ReadAll(e.ctx, h, json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := l.Finish(e.ctx, h, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	// c done by a settle that could not drop the lease: made so by hand.
	cr := e.ltRange(t, c.ID)
	done := cr.Val
	done.State = work.StateDone
	if _, err := e.st.PutRange(e.ctx, done, cr.Seq); err != nil {
		t.Fatal(err)
	}
	g, err := e.st.Group(e.ctx, "alt.x")
	if err != nil {
		t.Fatal(err)
	}
	rec := g.Val
	rec.Retired = work.Retired{Ranges: 1, Articles: a.Size()}
	rec.Retiring = []uint64{a.ID}
	if _, err := e.st.PutGroup(e.ctx, rec, g.Seq); err != nil {
		t.Fatal(err)
	}
	check := func(when string, retired int64) {
		t.Helper()
		s, err := e.st.Status(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Ranges[work.StateDone] != 3 || s.Articles[work.StateDone] != 300 || s.Retired != retired || s.Groups[0].Done != 300 {
			t.Errorf("%s: %d done ranges, %d done articles, %d retired, group done %d; want 3, 300, %d, 300",
				when, s.Ranges[work.StateDone], s.Articles[work.StateDone], s.Retired, s.Groups[0].Done, retired)
		}
	}
	check("with a claim left", 1)

	later := ltLeases(t, e.st, work.LeaseConfig{})
	work.SetClock(later, func() time.Time { return time.Now().Add(work.RetainDoneDefault + time.Hour) })
	n, err := later.Retire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Retire retired %d, want 1 (range %d; %d was counted by the dead retirer, %d has a lease)", n, b.ID, a.ID, c.ID)
	}
	var ids []uint64
	for _, r := range e.ltRanges(t) {
		ids = append(ids, r.ID)
	}
	if len(ids) != 1 || ids[0] != c.ID {
		t.Errorf("range records %v after Retire, want only %d (under a lease)", ids, c.ID)
	}
	if g, err := e.st.Group(e.ctx, "alt.x"); err != nil || len(g.Val.Retiring) != 0 || g.Val.Retired.Ranges != 2 {
		t.Errorf("group record %+v, %v: want nothing left retiring, 2 retired", g.Val, err)
	}
	check("after Retire", 2)
}

// A Finish whose lease write went through and whose range write failed
// leaves the lease saying Finished: the range is done as far as the fence
// goes, so a Release (or Fail) after it is refused, and a Settle completes
// the range with the holder's result.
// (Was: Release and Fail renewed the Finished lease and wrote the range
// back to spooled, so another worker indexed it again.)
func TestLeasesReleaseAfterFinishedLeaseRefused(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	l := ltLeases(t, e.st, work.LeaseConfig{})
	ranges := e.env.Client().KV(work.Scope("src"), "ranges").Stream()
	limit := func(n int64) {
		t.Helper()
		if _, err := ranges.UpdateConfig(e.ctx, persist.ConfigUpdate{MaxMsgSize: &n}); err != nil {
			t.Fatal(err)
		}
	}
	for _, giveBack := range []struct {
		name string
		call func(h *work.Held) error
	}{
		{"release", func(h *work.Held) error { return l.Release(e.ctx, h) }},
		{"fail", func(h *work.Held) error { return l.Fail(e.ctx, h, "boom", nil) }},
	} {
		h, err := l.Acquire(e.ctx, "w")
		if err != nil {
			t.Fatalf("%s: %v", giveBack.name, err)
		}
		// The range record with the result is too large for the stream:
		// Finish's range write fails after its lease write went through.
		result := json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 2_000)))
		limit(1_024)
		if err := l.Finish(e.ctx, h, result); err == nil {
			t.Fatalf("%s: Finish with its range write refused succeeded", giveBack.name)
		}
		limit(1 << 20)
		if err := giveBack.call(h); !errors.Is(err, work.ErrFenced) {
			t.Errorf("%s after a Finished lease: %v, want ErrFenced", giveBack.name, err)
		}
		if got := e.ltRange(t, r.ID).Val; got.State != work.StateLeased {
			t.Fatalf("%s: range %s after it, want still leased to its finisher", giveBack.name, got.State)
		}
		if _, err := l.Acquire(e.ctx, "w2"); !errors.Is(err, work.ErrNoWork) {
			t.Fatalf("%s: Acquire of a range whose lease says finished: %v, want ErrNoWork (settled on the way)", giveBack.name, err)
		}
		got := e.ltRange(t, r.ID).Val
		if got.State != work.StateDone || string(got.Result) != string(result) {
			t.Fatalf("%s: range %s with result %.40s, want done with the finisher's", giveBack.name, got.State, got.Result)
		}
		// Again, from spooled.
		sr := e.ltRange(t, r.ID)
		again := sr.Val
		again.State, again.Result, again.Attempts = work.StateSpooled, nil, 0
		if _, err := e.st.PutRange(e.ctx, again, sr.Seq); err != nil {
			t.Fatal(err)
		}
	}
}
