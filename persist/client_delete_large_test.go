package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

// A delete removing more seqs than one reply can list is still answered
// (as runs) with every seq it removed, instead of too-large after it
// committed. A 32 KiB max payload makes 10,000 seqs too many for a list.
func TestDeleteAnswerLargerThanAReply(t *testing.T) {
	t.Parallel()
	c, _ := smallPayloadFleet(t, 32<<10, 10*time.Second)
	ctx := context.Background()
	s := c.Stream("hub", "big")
	const n = 10000
	batch := make([]persist.Entry, 500) // its answer must fit in 32 KiB too
	for range n / len(batch) {
		if _, err := s.SetMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, persist.Delete{Seqs: []uint64{5000}}); err != nil { // a hole: two runs
		t.Fatal(err)
	}
	seqs, err := s.Delete(ctx, persist.Delete{All: true})
	if err != nil {
		t.Fatalf("delete all: %v", err)
	}
	if len(seqs) != n-1 || seqs[0] != 1 || seqs[4998] != 4999 || seqs[4999] != 5001 || seqs[len(seqs)-1] != n {
		t.Fatalf("delete all answered %d seqs (%v ... %v), want 1..%d without 5000", len(seqs), seqs[:min(3, len(seqs))], seqs[max(0, len(seqs)-3):], n)
	}
}

// smallPayloadFleet runs one persist server and a balancer on an embedded
// NATS server whose max payload is maxPayload, and returns a client on a
// connection of its own, with that connection.
func smallPayloadFleet(t *testing.T, maxPayload int32, timeout time.Duration) (*persist.Client, *nats.Conn) {
	t.Helper()
	e := testnats.Server(t, testnats.Options{MaxPayload: maxPayload})
	ids := []string{"0"}
	srv, err := server.New(server.Config{Conn: testnats.Conn(t, e), ID: "0", IDs: ids, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: testnats.Conn(t, e), IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	nc := testnats.Conn(t, e)
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c, nc
}
