package persist_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/placement"
)

// newClient is a persist client on nc with a short request timeout.
func newClient(t *testing.T, nc *nats.Conn) *persist.Client {
	t.Helper()
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientRoundTrip(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 2)
	c := newClient(t, env.Conn())
	ctx := context.Background()

	s := c.Stream("project-a", "log")
	r1, err := s.Set(ctx, []byte("one"), persist.SetOptions{Headers: map[string]string{"Content-Type": "text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Set(ctx, []byte("two"), persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Seq <= r1.Seq {
		t.Fatalf("seqs %d then %d", r1.Seq, r2.Seq)
	}
	m, err := s.Get(ctx, r1.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "one" || m.Seq != r1.Seq || m.Time != r1.Time || m.Headers["Content-Type"] != "text/plain" {
		t.Fatalf("get = %+v", m)
	}
	all, next, err := s.GetAll(ctx, persist.Range{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || next != 0 || string(all[1].Value) != "two" {
		t.Fatalf("getAll = %d messages, next %d", len(all), next)
	}
	page, next, err := s.GetAll(ctx, persist.Range{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || next != r2.Seq {
		t.Fatalf("page = %d messages, next %d (want %d)", len(page), next, r2.Seq)
	}

	kv := c.KV("project-a", "settings")
	k1, err := kv.Set(ctx, "theme", []byte("dark"), persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := k1.Seq
	if _, err := kv.Set(ctx, "theme", []byte("light"), persist.SetOptions{PrevSeq: &stale}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Set(ctx, "theme", []byte("blue"), persist.SetOptions{PrevSeq: &stale}); !errors.Is(err, persist.ErrWrongLastSequence) {
		t.Fatalf("stale CAS err = %v", err)
	}
	got, err := kv.Get(ctx, "theme")
	if err != nil || string(got.Value) != "light" {
		t.Fatalf("kv get = %v, %v", got, err)
	}
	existed, err := kv.Delete(ctx, "theme")
	if err != nil || !existed {
		t.Fatalf("delete = %v, %v", existed, err)
	}
	if _, err := kv.Get(ctx, "theme"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("get deleted = %v", err)
	}
	if existed, err := kv.Delete(ctx, "theme"); err != nil || existed {
		t.Fatalf("second delete = %v, %v", existed, err)
	}
	inv, err := s.Inventory(ctx)
	if err != nil || inv.Count != 2 {
		t.Fatalf("inventory = %+v, %v", inv, err)
	}
}

// TestClientAsksAgainOnWrongOwner: a balancer that first names the wrong
// server makes the client meet wrong-owner; it must forget the cached owner,
// ask again and succeed.
func TestClientAsksAgainOnWrongOwner(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	lying := func(ids []string, scope string) string {
		right := placement.Rendezvous(ids, scope)
		if asked.Add(1) == 1 {
			for _, id := range ids {
				if id != right {
					return id
				}
			}
		}
		return right
	}
	env := testpersist.Start(t, 2, testpersist.BalancerPlacement(lying))
	ids := env.IDs
	c := newClient(t, env.Conn())
	res, err := c.Stream("hub", "s").Set(context.Background(), []byte("x"), persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 1 {
		t.Fatalf("seq %d", res.Seq)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("balancer asked %d times, want 2 (once wrong, once right)", n)
	}
	owner, err := c.Owner(context.Background(), "hub")
	if err != nil || owner != placement.Rendezvous(ids, "hub") {
		t.Fatalf("cached owner %q, %v", owner, err)
	}
}

// TestClientSurvivesServerRestart: the owner goes away and comes back; a
// read retried through no-responders succeeds once it is back.
func TestClientSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	c := newClient(t, env.Conn())
	ctx := context.Background()
	s := c.Stream("hub", "log")
	res, err := s.Set(ctx, []byte("kept"), persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.StopServer("0")
	if _, err := s.Get(ctx, res.Seq); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("get with the server down: %v, want no responders", err)
	}
	env.StartServer("0")
	m, err := s.Get(ctx, res.Seq)
	if err != nil || string(m.Value) != "kept" {
		t.Fatalf("after restart: %v, %v", m, err)
	}
}

func TestClientTypedErrors(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1, testpersist.WithoutBalancer())
	c := newClient(t, env.Conn())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// No balancer yet: no responders, typed.
	if _, err := c.Stream("hub", "s").Get(ctx, 1); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("no balancer: %v", err)
	}
	env.StartBalancer()
	if _, err := c.Stream("hub", "s").Get(ctx, 99); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("missing seq: %v", err)
	}
	if _, err := c.Stream("Bad.Scope", "s").Get(ctx, 1); !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf("bad scope: %v", err)
	}
	if _, err := c.Stream("hub", "s").Delete(ctx, persist.Delete{}); !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf("empty delete: %v", err)
	}
	if _, err := c.Stream("hub", "s").Set(ctx, []byte("x"), persist.SetOptions{Headers: map[string]string{"Sy-Cmd": "get"}}); !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf("reserved header: %v", err)
	}
}
