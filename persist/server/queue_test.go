package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
)

// pending sends requests without waiting and collects their answers, each
// tagged with the index of the request it answers. Requests published from
// the one connection reach the server in publish order, so a test knows the
// order they were queued in.
type pending struct {
	h    *harness
	base string
	sub  *nats.Subscription
}

func (h *harness) pending() *pending {
	h.t.Helper()
	base := nats.NewInbox()
	sub, err := h.nc.SubscribeSync(base + ".*")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &pending{h: h, base: base, sub: sub}
}

// publish sends m as request i; its answer comes from next.
func (p *pending) publish(i int, m *nats.Msg) {
	p.h.t.Helper()
	m.Reply = p.base + "." + strconv.Itoa(i)
	if err := p.h.nc.PublishMsg(m); err != nil {
		p.h.t.Fatal(err)
	}
	if err := p.h.nc.Flush(); err != nil {
		p.h.t.Fatal(err)
	}
}

// set publishes a set of value as request i.
func (p *pending) set(i int, stream, value string) {
	p.h.t.Helper()
	p.publish(i, p.h.msg(persist.CmdSet, stream, nil, []byte(value)))
}

// next waits for the next answer and returns it with its request's index.
func (p *pending) next() (int, *nats.Msg) {
	p.h.t.Helper()
	r, err := p.sub.NextMsg(10 * time.Second)
	if err != nil {
		p.h.t.Fatalf("waiting for an answer: %v", err)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(r.Subject, p.base+"."))
	if err != nil {
		p.h.t.Fatalf("answer on %q: %v", r.Subject, err)
	}
	return i, r
}

// wantSeq fails unless r is a successful set answer with seq want.
func wantSeq(t *testing.T, i int, r *nats.Msg, want uint64) {
	t.Helper()
	if c := r.Header.Get(persist.HdrError); c != "" {
		t.Fatalf("request %d: %s %s", i, c, r.Data)
	}
	var res persist.SetResult
	mustJSON(t, r.Data, &res)
	if res.Seq != want {
		t.Fatalf("request %d got seq %d, want %d", i, res.Seq, want)
	}
}

// TestStopDeadlineFailsQueued: when Stop's context ends while a commit holds
// the worker, the requests queued behind it are answered unavailable, the
// held commit still finishes and is answered, and Stop reports that it gave
// up with an error wrapping the context's.
func TestStopDeadlineFailsQueued(t *testing.T) {
	t.Parallel()
	const n = 5
	g := newGate()
	h := newHarnessHook(t, nil, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "s", "held")
	waitFor(t, "the first write to hold the worker", g.held.Load)
	for i := 1; i <= n; i++ {
		p.set(i, "s", fmt.Sprint("v", i))
	}
	waitFor(t, "the writes to queue", func() bool { return h.queued("s") == n })

	// A deadline already past: Stop gives up on the queue at once instead of
	// waiting for the held commit.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- h.srv.Stop(ctx) }()
	for range n {
		i, r := p.next()
		if i == 0 {
			t.Fatal("the held write was answered before its commit finished")
		}
		wantCode(t, r, persist.CodeUnavailable)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a commit was still running", err)
	default:
	}
	g.open()
	if err := <-stopped; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop after failing queued requests returned %v, want an error wrapping %v", err, context.DeadlineExceeded)
	}
	i, r := p.next()
	if i != 0 {
		t.Fatalf("request %d answered twice", i)
	}
	wantSeq(t, i, r, 1)
	// Only the held write was stored.
	h.start()
	if inv := h.inventory("s"); inv.Count != 1 || inv.Seq != 1 {
		t.Fatalf("inventory after restart %+v, want the one committed write", inv)
	}
}
