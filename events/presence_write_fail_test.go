package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
)

// blockingStore hands each Put to the test: it reports the call on
// entered and returns what the test sends on result (nil: the real Put).
type blockingStore struct {
	PresenceStore
	entered chan struct{}
	result  chan error
}

func (b *blockingStore) Put(ctx context.Context, k PresenceKey, at int64, ttl time.Duration) error {
	b.entered <- struct{}{}
	if err := <-b.result; err != nil {
		return err
	}
	return b.PresenceStore.Put(ctx, k, at, ttl)
}

// TestLeaveWhileRefreshFails: the last connection closes while the 12 h
// refresh rewrites the row, and the refresh fails. Leave leaves a row
// being written to its writer; the writer scheduled the removal only when
// its write succeeded, so the row written 12 h before stayed (the user
// shown present) until its 48 h TTL, and the user's entry for good.
func TestLeaveWhileRefreshFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := persistenv.Start(t, 1)
	real := PersistPresence{Client: env.Client()}
	bs := &blockingStore{PresenceStore: real, entered: make(chan struct{}), result: make(chan error)}
	clk := newFakeClock()
	p, err := NewPresence(PresenceConfig{Region: "eu", Store: bs, Clock: clk, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	joined := make(chan error, 1)
	go func() { joined <- p.Join(ctx, "zoe", "app") }()
	<-bs.entered
	bs.result <- nil // the first write goes through
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	if got := regionsOf(t, real, "zoe"); len(got) != 1 {
		t.Fatalf("rows %v after the first connection", got)
	}

	// The Presence's own refresh rewrites the row 12 h on; on the fake
	// clock it runs inside Advance, which waits for the write.
	advanced := make(chan struct{})
	go func() { clk.Advance(PresenceRefreshDefault); close(advanced) }()
	<-bs.entered                          // the refresh is writing the row
	p.Leave("zoe", "app")                 // the last connection closes meanwhile
	bs.result <- errors.New("store blip") // and the refresh write fails
	<-advanced
	if st := p.Stats(); st.Failures != 1 {
		t.Fatalf("stats %+v: the refresh's failure not counted", st)
	}

	clk.Advance(LeaveMaxDefault + time.Minute)
	if got := regionsOf(t, real, "zoe"); len(got) != 0 {
		t.Fatalf("rows %v a minute past the leave delay (pending timers %d): the row of a user with no connection is never removed", got, clk.Pending())
	}
}

// TestLeaveWhileFirstJoinFails: the only connection closes while its
// first write is under way, and the store reports a failure after it
// stored the row (a timeout after the commit). The writer owes the leave
// here too: the row goes after the delay, and the user's entry with it.
func TestLeaveWhileFirstJoinFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := persistenv.Start(t, 1)
	real := PersistPresence{Client: env.Client()}
	bs := &blockingStore{PresenceStore: real, entered: make(chan struct{}), result: make(chan error)}
	clk := newFakeClock()
	p, err := NewPresence(PresenceConfig{Region: "eu", Store: bs, Clock: clk, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	joined := make(chan error, 1)
	go func() { joined <- p.Join(ctx, "zoe", "app") }()
	<-bs.entered
	p.Leave("zoe", "app")
	if err := real.Put(ctx, PresenceKey{"zoe", "app", "eu"}, clk.Now().UnixMilli(), time.Hour); err != nil {
		t.Fatal(err)
	}
	bs.result <- errors.New("timeout after the commit")
	if err := <-joined; err == nil {
		t.Fatal("Join hid the store's failure")
	}
	if got := regionsOf(t, real, "zoe"); len(got) != 1 {
		t.Fatalf("rows %v before the leave's delay", got)
	}
	clk.Advance(LeaveMaxDefault + time.Minute)
	if got := regionsOf(t, real, "zoe"); len(got) != 0 {
		t.Fatalf("rows %v a minute past the leave delay", got)
	}
	p.mu.Lock()
	left := len(p.users)
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d users' entries stayed", left)
	}
}
