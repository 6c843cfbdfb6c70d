package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// presenceEnv is a Presence over real persist servers, on a fake clock
// whose leaves land at the middle of their window unless jitter says so.
func presenceEnv(t *testing.T, region string, jitter float64) (*Presence, PersistPresence, *fakeClock) {
	t.Helper()
	env := persistenv.Start(t, 1)
	store := PersistPresence{Client: env.Client()}
	clk := newFakeClock()
	p, err := NewPresence(PresenceConfig{Region: region, Store: store, Clock: clk, Jitter: func() float64 { return jitter }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, store, clk
}

func regionsOf(t *testing.T, s PersistPresence, user string) []string {
	t.Helper()
	rows, err := s.List(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.App+"@"+r.Region)
	}
	return out
}

// TestPresenceJoinLeave: the first connection writes the row; the last
// one's close removes it only after the delay (30–60 s, here 45 s).
func TestPresenceJoinLeave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, clk := presenceEnv(t, "eu", 0.5)
	if err := p.Join(ctx, "alice", "app"); err != nil {
		t.Fatal(err)
	}
	if err := p.Join(ctx, "alice", "app"); err != nil {
		t.Fatal(err)
	}
	if got := regionsOf(t, store, "alice"); len(got) != 1 || got[0] != "app@eu" {
		t.Fatalf("rows %v, want app@eu", got)
	}
	p.Leave("alice", "app")
	if clk.Pending() != 1 { // the Presence's own refresh, no leave
		t.Fatal("a leave was scheduled while a connection stays")
	}
	p.Leave("alice", "app")
	clk.Advance(44 * time.Second)
	if got := regionsOf(t, store, "alice"); len(got) != 1 {
		t.Fatalf("row removed before the leave delay: %v", got)
	}
	clk.Advance(time.Second)
	if got := regionsOf(t, store, "alice"); len(got) != 0 {
		t.Fatalf("row still there after the leave delay: %v", got)
	}
	// Stats (for /metrics): one write for the two connections, one
	// removal, and nobody connected now.
	if st := p.Stats(); st != (PresenceStats{Writes: 1, Removes: 1}) {
		t.Errorf("stats %+v, want 1 write and 1 removal only", st)
	}
}

// TestPresenceReloadWritesNothing: a reconnect within the delay cancels
// the leave, and the row is neither removed nor written again.
func TestPresenceReloadWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, clk := presenceEnv(t, "eu", 0)
	p.Join(ctx, "bob", "app")
	before, err := store.kv("bob").Get(ctx, PresenceRowKey(PresenceKey{"bob", "app", "eu"}))
	if err != nil {
		t.Fatal(err)
	}
	p.Leave("bob", "app")
	clk.Advance(20 * time.Second) // the reload takes 20 s, under LeaveMin
	if err := p.Join(ctx, "bob", "app"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	after, err := store.kv("bob").Get(ctx, PresenceRowKey(PresenceKey{"bob", "app", "eu"}))
	if err != nil {
		t.Fatalf("the row went away after a reload: %v", err)
	}
	if after.Seq != before.Seq {
		t.Errorf("the reload wrote the row again (seq %d → %d)", before.Seq, after.Seq)
	}
	if st := p.Stats(); st != (PresenceStats{Present: 1, Connections: 1, Writes: 1, Reloads: 1}) {
		t.Errorf("stats %+v, want bob present on 1 connection, 1 write, 1 reload", st)
	}
}

// TestPresenceLeaveSparesNewerRow: a leave removes only the row it wrote;
// one written since (another process of the region, a new first
// connection) stays.
func TestPresenceLeaveSparesNewerRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, clk := presenceEnv(t, "eu", 1)
	p.Join(ctx, "carol", "app")
	p.Leave("carol", "app")
	k := PresenceKey{"carol", "app", "eu"}
	if err := store.Put(ctx, k, 42, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(LeaveMaxDefault)
	if got := regionsOf(t, store, "carol"); len(got) != 1 {
		t.Fatalf("the newer row was removed: %v", got)
	}
	if removed, err := store.Remove(ctx, k, 42); err != nil || !removed {
		t.Errorf("Remove of the row's own connectedAt: %v %v", removed, err)
	}
}

// TestPresenceRefresh: a row is written again only past Refresh, and the
// TTL is what the row lives without it.
func TestPresenceRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, clk := presenceEnv(t, "eu", 0)
	p.Join(ctx, "dan", "app")
	key := PresenceRowKey(PresenceKey{"dan", "app", "eu"})
	first, err := store.kv("dan").Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if first.TTL != PresenceTTLDefault {
		t.Errorf("row TTL %v, want %v", first.TTL, PresenceTTLDefault)
	}
	clk.Advance(time.Hour)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if m, _ := store.kv("dan").Get(ctx, key); m.Seq != first.Seq {
		t.Error("refreshed before Refresh elapsed")
	}
	clk.Advance(PresenceRefreshDefault)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := store.kv("dan").Get(ctx, key)
	if err != nil || m.Seq == first.Seq {
		t.Fatalf("not refreshed after %v: %v", PresenceRefreshDefault, err)
	}
}

// failingStore fails every Put until healed.
type failingStore struct {
	PresenceStore
	fail bool
}

func (f *failingStore) Put(ctx context.Context, k PresenceKey, at int64, ttl time.Duration) error {
	if f.fail {
		return errors.New("store down")
	}
	return f.PresenceStore.Put(ctx, k, at, ttl)
}

// TestPresenceJoinFailureRetried: a failed first write is the Join's
// error, and Refresh writes the row once the store is back.
func TestPresenceJoinFailureRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := persistenv.Start(t, 1)
	real := PersistPresence{Client: env.Client()}
	fs := &failingStore{PresenceStore: real, fail: true}
	p, err := NewPresence(PresenceConfig{Region: "us", Store: fs, Clock: newFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Join(ctx, "erin", "app"); err == nil {
		t.Fatal("Join hid the store's failure")
	}
	if p.Connections("erin", "app") != 1 {
		t.Error("the connection was not counted")
	}
	fs.fail = false
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := regionsOf(t, real, "erin"); len(got) != 1 {
		t.Fatalf("rows %v after Refresh", got)
	}
	if st := p.Stats(); st != (PresenceStats{Present: 1, Connections: 1, Writes: 1, Failures: 1}) {
		t.Errorf("stats %+v, want 1 failed write, then 1 write by Refresh", st)
	}
}

func TestPresenceConfig(t *testing.T) {
	if _, err := NewPresence(PresenceConfig{Store: PersistPresence{}}); err == nil {
		t.Error("no region accepted")
	}
	if _, err := NewPresence(PresenceConfig{Region: "x"}); err == nil {
		t.Error("no store accepted")
	}
	if _, err := NewPresence(PresenceConfig{Region: "x", Store: PersistPresence{}, LeaveMin: time.Minute, LeaveMax: time.Second}); err == nil {
		t.Error("LeaveMax below LeaveMin accepted")
	}
}

// TestPresenceRowRefreshedWhileConnected: the row is written again every
// 12 h while connections stay, by the Presence itself, with no call of
// Refresh. (Was: nothing called Refresh, so a connection that stayed past
// the 48 h TTL lost its row, and its subscribers heard a leave of a user
// still there; a failed first write was never made again.)
func TestPresenceRowRefreshedWhileConnected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, clk := presenceEnv(t, "eu", 0)
	if err := p.Join(ctx, "zoe", "app"); err != nil {
		t.Fatal(err)
	}
	key := PresenceRowKey(PresenceKey{"zoe", "app", "eu"})
	first, err := store.kv("zoe").Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The connection stays: an hour at a time, past the refresh interval
	// and then past the TTL, nobody joining or leaving meanwhile.
	for range int(PresenceRefreshDefault/time.Hour) + 1 {
		clk.Advance(time.Hour)
	}
	testwait.UntilWithin(t, 10*time.Second, "the row written again once Refresh elapsed, the connection staying", func() (bool, string) {
		st := p.Stats()
		m, err := store.kv("zoe").Get(ctx, key)
		return err == nil && m.Seq != first.Seq && st.Writes >= 2, fmt.Sprintf("writes %d, row seq %d (first %d), err %v", st.Writes, m.Seq, first.Seq, err)
	})
}

// (Was: every distinct ?app= of a user wrote a presence row and held an entry, so a client varying it per connection grew both without bound.)
func TestPresenceAppsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, clk := presenceEnv(t, "eu", 0.5)
	for i := range MaxPresenceApps {
		if err := p.Join(ctx, "mia", fmt.Sprint("app", i)); err != nil {
			t.Fatal(err)
		}
	}
	err := p.Join(ctx, "mia", "extra")
	if !errors.Is(err, ErrTooManyApps) {
		t.Fatalf("a connection of a %dth app: %v, want ErrTooManyApps", MaxPresenceApps+1, err)
	}
	if got := regionsOf(t, store, "mia"); len(got) != MaxPresenceApps {
		t.Fatalf("%d rows after the refused join, want %d: %v", len(got), MaxPresenceApps, got)
	}
	// Other users and the apps already present are not refused.
	if err := p.Join(ctx, "noah", "extra"); err != nil {
		t.Fatalf("another user's app: %v", err)
	}
	if err := p.Join(ctx, "mia", "app0"); err != nil {
		t.Fatalf("a second connection of a present app: %v", err)
	}
	if st := p.Stats(); st.Refused != 1 || st.Present != MaxPresenceApps+1 {
		t.Fatalf("stats %+v, want 1 refused and %d present", st, MaxPresenceApps+1)
	}
	// An app's place comes back once its row is removed: the refused
	// app's next connection is admitted while the refused one is still
	// open.
	p.Leave("mia", "app1")
	clk.Advance(LeaveMaxDefault)
	if err := p.Join(ctx, "mia", "extra"); err != nil {
		t.Fatalf("after app1's row was removed: %v", err)
	}
	// The refused connection's Leave (a gateway pairs each Join with
	// one) leaves the admitted connection of the app counted: its row
	// stays.
	p.Leave("mia", "extra")
	if n := p.Connections("mia", "extra"); n != 1 {
		t.Fatalf("extra has %d connections after the refused one left, want the admitted one", n)
	}
	clk.Advance(LeaveMaxDefault)
	rows := regionsOf(t, store, "mia")
	if !slices.Contains(rows, "extra@eu") || slices.Contains(rows, "app1@eu") || len(rows) != MaxPresenceApps {
		t.Fatalf("rows %v, want extra's (its connection stays) in app1's place", rows)
	}
	p.Leave("mia", "extra")
	clk.Advance(LeaveMaxDefault)
	if rows := regionsOf(t, store, "mia"); slices.Contains(rows, "extra@eu") {
		t.Fatalf("rows %v: extra's row stayed after its last connection left", rows)
	}
}
