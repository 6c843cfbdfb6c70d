package server

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestWriteToStreamLockedByExclusiveServer: a server with ExclusiveFiles
// holds a stream open, so another server on the same data directory
// cannot reach its file. The other one answers a write to it unavailable
// once SQLite's busy timeout has passed, and a client with the default
// attempt timeout must get that answer while it still waits: it retries
// unavailable (also for a set without a msgID), and its set lands once the
// holder lets go. (Was: the busy timeout was 5 s, as long as the client's
// attempt, so the answer always came after the client had given up; a set
// without a msgID is not retried after a timeout, so `stream pub` failed
// with "request timed out" whatever its --timeout.)
func TestWriteToStreamLockedByExclusiveServer(t *testing.T) {
	t.Parallel()
	holder := newHarness(t, func(c *Config) { c.ExclusiveFiles = true })
	rec := newRecorder()
	other := newHarness(t, func(c *Config) { c.DataDir = holder.dir; c.Observer = rec })
	holder.set("s", "held", nil) // the holder has the stream open, its file locked

	owner, err := other.nc.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Unsubscribe() })
	pc, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, other.e), IDs: []string{"0"}}) // the default Timeout
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := pc.Stream(holder.scope, "s").Set(ctx, []byte("through"), persist.SetOptions{})
		done <- err
	}()
	testwait.For(t, "the other server to answer the set unavailable", func() bool {
		return rec.count(persist.CmdSet, persist.CodeUnavailable) > 0
	})
	holder.node.Stop() // lets go of the file
	if err := <-done; err != nil {
		t.Fatalf("set while another server held the stream, retried once it let go: %v", err)
	}
	if inv := other.inventory("s"); inv.Count != 2 {
		t.Fatalf("inventory after the set: %+v, want 2 messages", inv)
	}
}
