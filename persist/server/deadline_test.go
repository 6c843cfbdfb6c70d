package server

import (
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// deadline is t as a Sy-Deadline header.
func deadline(t time.Time) map[string]string {
	return map[string]string{persist.HdrDeadline: strconv.FormatInt(t.UnixMilli(), 10)}
}

// withHeaders is hdr with more headers added.
func withHeaders(hdr map[string]string, more map[string]string) map[string]string {
	for k, v := range more {
		hdr[k] = v
	}
	return hdr
}

// TestDeadlinePassedNotApplied: a request whose Sy-Deadline has passed when
// its turn comes is neither applied nor answered, and is counted; one
// whose deadline is ahead, or that has none, is served. A Sy-Deadline that
// does not parse is bad-request.
func TestDeadlinePassedNotApplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "first", nil) // the stream is open: a lone request may be served on arrival
	p := h.pending()
	past := time.Now().Add(-time.Second)
	p.publish(0, h.msg(persist.CmdSet, "s", withHeaders(deadline(past), map[string]string{persist.HdrKey: "k"}), []byte("late")))
	p.publish(1, h.msg(persist.CmdSet, "s", map[string]string{persist.HdrKey: "e", persist.HdrDeadline: "0"}, []byte("epoch")))
	p.publish(2, h.msg(persist.CmdDelete, "s", withHeaders(deadline(past), map[string]string{persist.HdrAll: "true"}), nil))
	p.publish(3, h.msg(persist.CmdGet, "s", withHeaders(deadline(past), map[string]string{persist.HdrSeq: "1"}), nil))
	p.publish(4, h.msg(persist.CmdSet, "s", withHeaders(deadline(time.Now().Add(time.Hour)), map[string]string{persist.HdrKey: "on-time"}), []byte("v")))
	// Answers on one stream come in request order, so the first answer
	// here is the first request that was served.
	if i, r := p.next(); i != 4 {
		t.Fatalf("first answer is to request %d (%s %s), want 4: the requests past their deadline were served", i, r.Header.Get(persist.HdrError), r.Data)
	} else {
		wantSeq(t, i, r, 2)
	}
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil), persist.CodeNotFound)
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrKey: "e"}, nil), persist.CodeNotFound)
	if r := h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != "first" {
		t.Errorf("seq 1 after a delete past its deadline: %q %s", r.Data, r.Header.Get(persist.HdrError))
	}
	if got := h.srv.Stats().DeadlineDropped; got != 4 {
		t.Errorf("DeadlineDropped = %d, want 4", got)
	}

	for _, bad := range []string{"soon", "-1", "1.5", "18446744073709551615", "99999999999999999999"} {
		wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1", persist.HdrDeadline: bad}, nil), persist.CodeBadRequest)
	}
}

// TestDeadlinePassesWhileQueued: requests that wait on their stream behind
// a slow commit are checked against their deadline when their turn comes,
// not on arrival: a write, a delete and a read whose deadline passes while
// they wait are dropped, and the request after them is served.
func TestDeadlinePassesWhileQueued(t *testing.T) {
	t.Parallel()
	g := newGate()
	var skew atomic.Int64 // added to the server's clock
	h := newHarnessHook(t, nil, func(s *Server) {
		g.hook(s)
		s.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "q", "first")
	testwait.For(t, "the first commit to be held", g.held.Load)
	soon := time.Now().Add(time.Hour)
	p.publish(1, h.msg(persist.CmdSet, "q", withHeaders(deadline(soon), map[string]string{persist.HdrKey: "k"}), []byte("late")))
	p.publish(2, h.msg(persist.CmdDelete, "q", withHeaders(deadline(soon), map[string]string{persist.HdrAll: "true"}), nil))
	p.publish(3, h.msg(persist.CmdKeys, "q", deadline(soon), nil))
	testwait.For(t, "three requests queued behind the held commit", func() bool { return h.queued("q") == 3 })
	skew.Store(int64(2 * time.Hour)) // their callers gave up while they waited
	p.publish(4, h.msg(persist.CmdGet, "q", map[string]string{persist.HdrSeq: "1"}, nil))
	g.open()
	got := p.answers(2)
	r0, r4 := got[0], got[4]
	if r0 == nil || r4 == nil {
		t.Fatalf("answers to requests %v, want 0 and 4: the requests past their deadline were served", keys(got))
	}
	wantSeq(t, 0, r0, 1)
	if string(r4.Data) != "first" {
		t.Fatalf("request 4: %q %s, want the value of seq 1", r4.Data, r4.Header.Get(persist.HdrError))
	}
	wantCode(t, h.req(persist.CmdGet, "q", map[string]string{persist.HdrKey: "k"}, nil), persist.CodeNotFound)
	if got := h.srv.Stats().DeadlineDropped; got != 3 {
		t.Errorf("DeadlineDropped = %d, want 3", got)
	}
}

// TestOwnershipCheckedAtApply: a request queued while placement moves its
// scope to another server is answered wrong-owner when its turn comes, not
// applied.
func TestOwnershipCheckedAtApply(t *testing.T) {
	t.Parallel()
	g := newGate()
	var owner atomic.Value // the member placement names for every scope
	owner.Store("0")
	h := newHarnessHook(t, func(c *Config) {
		c.IDs = []string{"0", "1"}
		c.Placement = func([]string, string) string { return owner.Load().(string) }
	}, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "q", "first")
	testwait.For(t, "the first commit to be held", g.held.Load)
	p.publish(1, h.msg(persist.CmdSet, "q", map[string]string{persist.HdrKey: "k"}, []byte("moved")))
	p.publish(2, h.msg(persist.CmdGet, "q", map[string]string{persist.HdrSeq: "1"}, nil))
	testwait.For(t, "two requests queued behind the held commit", func() bool { return h.queued("q") == 2 })
	owner.Store("1")
	g.open()
	got := p.answers(3)
	if got[0] == nil {
		t.Fatalf("answers to requests %v, want 0, 1 and 2", keys(got))
	}
	wantSeq(t, 0, got[0], 1)
	for want := 1; want <= 2; want++ {
		r := got[want]
		if r == nil || persist.Code(r.Header.Get(persist.HdrError)) != persist.CodeWrongOwner {
			t.Fatalf("answers to requests %v; want request %d answered wrong-owner", keys(got), want)
		}
	}
	owner.Store("0")
	wantCode(t, h.req(persist.CmdGet, "q", map[string]string{persist.HdrKey: "k"}, nil), persist.CodeNotFound)
}

// keys lists the request indexes answered, for failure messages.
func keys(m map[int]*nats.Msg) []int {
	out := make([]int, 0, len(m))
	for i := range m {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}
