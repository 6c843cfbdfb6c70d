package persist_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// lossyRelay stands between a client (of service "relay") and the harness's
// server: it answers the client's owner questions itself and forwards every
// request to the server, but swallows the server's answer to the next
// delete after each dropNext, as a reply lost on the way (or a server killed
// right after its commit) would.
type lossyRelay struct {
	drop    atomic.Int32 // deletes whose answer is still to be lost
	dropped atomic.Int32
	// beforeDelete, if set, runs once before the next delete is forwarded:
	// a write that lands between a KV.Delete's get and its delete.
	beforeDelete atomic.Pointer[func()]
}

func (r *lossyRelay) dropNext() { r.drop.Store(1) }

func startLossyRelay(t *testing.T, h *harness) *lossyRelay {
	t.Helper()
	r := &lossyRelay{}
	nc := testnats.Conn(t, h.NATS)
	id, err := nc.Subscribe("relay.*.id", func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = id.Unsubscribe() })
	api, err := nc.Subscribe("relay.*.api.0", func(m *nats.Msg) {
		fwd := nats.NewMsg(bus.APISubject(bus.DefaultService, bus.SubjectToken(m.Subject, 1), "0"))
		for k, v := range m.Header {
			fwd.Header[k] = v
		}
		fwd.Data = m.Data
		if m.Header.Get(persist.HdrCmd) == persist.CmdDelete {
			if fn := r.beforeDelete.Swap(nil); fn != nil {
				(*fn)()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reply, err := nc.RequestMsgWithContext(ctx, fwd)
		if err != nil {
			return // the client times out, as with a lost reply
		}
		if m.Header.Get(persist.HdrCmd) == persist.CmdDelete && r.drop.Add(-1) >= 0 {
			r.dropped.Add(1)
			return
		}
		_ = m.RespondMsg(&nats.Msg{Header: reply.Header, Data: reply.Data})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Unsubscribe() })
	return r
}

// TestDeleteRetryAnswersFirstAttempt: the answer to a delete's first attempt
// is lost after the server committed it; the client's retry (same request
// id) is answered with what the first attempt removed, so KV.Delete says the
// key existed and Stream.Delete lists the removed seqs.
func TestDeleteRetryAnswersFirstAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	relay := startLossyRelay(t, h)
	// Open both streams directly first: a stream's first write creates its
	// file, which on a loaded machine can outlast the short timeout below
	// (that timeout is what turns a swallowed answer into a retry).
	h.set("kv", "warm-up", nil)
	h.set("log", "warm-up", nil)
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.NATS), Service: "relay", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv := c.KV(h.scope, "kv")
	if _, err := kv.Set(ctx, "k", []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	relay.dropNext()
	existed, err := kv.Delete(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !existed {
		t.Error("KV.Delete of a key it removed (first answer lost) says it did not exist")
	}
	if _, err := kv.Get(ctx, "k"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("key after delete: %v, want not-found", err)
	}

	s := c.Stream(h.scope, "log")
	for range 3 {
		if _, err := s.Set(ctx, []byte("x"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relay.dropNext()
	seqs, err := s.Delete(ctx, persist.Delete{UpTo: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Errorf("Stream.Delete after a lost answer: %v, want [1 2]", seqs)
	}
	if n := relay.dropped.Load(); n != 2 {
		t.Fatalf("the relay lost %d answers, want 2", n)
	}
}

// TestKVDeleteRacingWrite: a write replaces the key between KV.Delete's get
// and its delete. The delete of the row the get saw removes nothing; KV.Delete
// then looks again and removes the new row, so it truthfully says the key
// existed and the key is gone.
func TestKVDeleteRacingWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	relay := startLossyRelay(t, h)
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.NATS), Service: "relay"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv := c.KV(h.scope, "kv")
	if _, err := kv.Set(ctx, "k", []byte("v1"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	direct := h.stream("kv") // straight to the server, past the relay
	var raced atomic.Bool
	fn := func() {
		if _, err := direct.Set(ctx, []byte("v2"), persist.SetOptions{Key: "k"}); err != nil {
			t.Error(err)
		}
		raced.Store(true)
	}
	relay.beforeDelete.Store(&fn)
	existed, err := kv.Delete(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !raced.Load() {
		t.Fatal("the racing write did not run")
	}
	if !existed {
		t.Error("KV.Delete of a key that existed throughout says it did not exist")
	}
	if m, err := kv.Get(ctx, "k"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("key after delete: %v %v, want not-found", m, err)
	}
}
