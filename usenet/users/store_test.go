package users_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-dev/switchyard/internal/progress"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// day1 is late on a UTC day, so that a test can cross midnight.
var day1 = time.Date(2026, 3, 14, 23, 59, 30, 0, time.UTC)

func open(t *testing.T, cfg users.Config) (*users.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := users.Open(filepath.Join(dir, users.File), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

// TestLimitsResetAtMidnight: a user's requests and grabs are counted up to
// their limits, refused past them with the next midnight UTC as the reset,
// and counted from zero again on the next day.
func TestLimitsResetAtMidnight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := progress.NewFakeClock(day1)
	s, _ := open(t, users.Config{Now: clk.Now})
	key, err := s.Add(ctx, "alice", users.Limits{RequestsPerDay: 2, GrabsPerDay: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Request(ctx, key); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if err := s.Grab(ctx, key, "r1"); err != nil {
		t.Fatal(err)
	}
	midnight := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	var le *users.LimitError
	if err := s.Request(ctx, key); !errors.As(err, &le) || le.Kind != users.Requests || le.Limit != 2 || !le.Reset.Equal(midnight) || le.Wait != 30*time.Second {
		t.Fatalf("third request: %v (%+v), want a request limit of 2 resetting at %v in 30s", err, le, midnight)
	}
	if err := s.Grab(ctx, key, "r2"); !errors.As(err, &le) || le.Kind != users.Grabs || le.Limit != 1 {
		t.Fatalf("second grab: %v, want a grab limit of 1", err)
	}
	g, err := s.Grabs(ctx, []string{"r1", "r2"})
	if err != nil || g["r1"] != 1 || g["r2"] != 0 {
		t.Fatalf("grabs %v, %v: the refused grab must not count", g, err)
	}
	u, err := s.User(ctx, "alice")
	if err != nil || u.RequestsToday != 2 || u.GrabsToday != 1 {
		t.Fatalf("user %+v, %v: want 2 requests and 1 grab today (refusals not counted)", u, err)
	}

	clk.Advance(midnight.Sub(day1))
	if u, _ := s.User(ctx, "alice"); u.RequestsToday != 0 || u.GrabsToday != 0 {
		t.Fatalf("after midnight the list shows %+v, want no use today", u)
	}
	if err := s.Request(ctx, key); err != nil {
		t.Fatalf("first request of the next day: %v", err)
	}
	if err := s.Grab(ctx, key, "r2"); err != nil {
		t.Fatalf("first grab of the next day: %v", err)
	}
	if u, _ := s.User(ctx, "alice"); u.RequestsToday != 1 || u.GrabsToday != 1 {
		t.Fatalf("next day: %+v, want 1 request and 1 grab", u)
	}
}

// TestCountIsAtomic: many requests at once at a limit of n succeed exactly
// n times.
func TestCountIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := open(t, users.Config{})
	const limit, tries = 7, 40
	key, err := s.Add(ctx, "bob", users.Limits{RequestsPerDay: limit})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for range tries {
		wg.Go(func() {
			err := s.Request(ctx, key)
			mu.Lock()
			defer mu.Unlock()
			var le *users.LimitError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &le):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok != limit || refused != tries-limit {
		t.Fatalf("%d accepted, %d refused; want %d and %d", ok, refused, limit, tries-limit)
	}
}

// TestUnlimitedAndUnknown: a limit of 0 is unlimited; a key no user has is
// ErrUnknownKey, for requests and grabs alike.
func TestUnlimitedAndUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := open(t, users.Config{})
	key, err := s.Add(ctx, "carol", users.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := s.Request(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Request(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, users.ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := s.Grab(ctx, "nope", "r"); !errors.Is(err, users.ErrUnknownKey) {
		t.Fatalf("unknown key's grab: %v", err)
	}
	if g, _ := s.Grabs(ctx, []string{"r"}); g["r"] != 0 {
		t.Fatalf("an unknown key's grab counted for the release: %v", g)
	}
}

// TestKeysStoredHashed: no file of the store holds a key, and Reset makes
// the old key unknown while the new one works.
func TestKeysStoredHashed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir := open(t, users.Config{})
	key, err := s.Add(ctx, "dave", users.Limits{RequestsPerDay: 10})
	if err != nil {
		t.Fatal(err)
	}
	key2, err := s.Reset(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Valid(ctx, key); ok {
		t.Fatal("the old key still works after Reset")
	}
	if ok, err := s.Valid(ctx, key2); !ok || err != nil {
		t.Fatalf("the new key does not work: %v", err)
	}
	if err := s.Request(ctx, key2); err != nil {
		t.Fatal(err)
	}
	// The WAL holds what was written since the last checkpoint: every
	// file of the directory is read.
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{key, key2} {
			if bytes.Contains(b, []byte(k)) {
				t.Fatalf("%s holds a key in clear", f.Name())
			}
		}
	}
}

// TestAccountsErrors: what a missing user, a taken name and bad input are.
func TestAccountsErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := open(t, users.Config{})
	if _, err := s.Add(ctx, "erin", users.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "erin", users.Limits{}); !errors.Is(err, users.ErrExists) {
		t.Fatalf("a taken name: %v", err)
	}
	for _, name := range []string{"", "-x", "a b", "ünï", string(make([]byte, users.MaxNameBytes+1))} {
		if _, err := s.Add(ctx, name, users.Limits{}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if _, err := s.Add(ctx, "frank", users.Limits{RequestsPerDay: -1}); err == nil {
		t.Error("a negative limit accepted")
	}
	n := 5
	if err := s.SetLimits(ctx, "erin", &n, nil); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.User(ctx, "erin"); u.RequestsPerDay != 5 || u.GrabsPerDay != 0 {
		t.Fatalf("limits %+v, want 5 requests and grabs kept", u.Limits)
	}
	for name, err := range map[string]error{
		"SetLimits": s.SetLimits(ctx, "nobody", &n, nil),
		"Remove":    s.Remove(ctx, "nobody"),
		"Reset":     func() error { _, err := s.Reset(ctx, "nobody"); return err }(),
		"User":      func() error { _, err := s.User(ctx, "nobody"); return err }(),
	} {
		if !errors.Is(err, users.ErrNotFound) {
			t.Errorf("%s of a missing user: %v, want ErrNotFound", name, err)
		}
	}
	if err := s.Remove(ctx, "erin"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("after Remove: %+v", list)
	}
}

// TestRegister: closed by default; once open it makes accounts with the
// registration's limits, each address once, at most RegistrationsPerDay a
// day.
func TestRegister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := progress.NewFakeClock(day1)
	s, _ := open(t, users.Config{Now: clk.Now, RegistrationsPerDay: 2})
	if _, err := s.Register(ctx, "a@example.org"); !errors.Is(err, users.ErrRegistrationClosed) {
		t.Fatalf("closed: %v", err)
	}
	if err := s.SetRegistration(ctx, users.Registration{Open: true, Limits: users.Limits{RequestsPerDay: 3, GrabsPerDay: 1}}); err != nil {
		t.Fatal(err)
	}
	key, err := s.Register(ctx, "a@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if u, err := s.User(ctx, "a@example.org"); err != nil || !u.Registered || u.RequestsPerDay != 3 || u.GrabsPerDay != 1 {
		t.Fatalf("registered %+v, %v", u, err)
	}
	if err := s.Request(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, "a@example.org"); !errors.Is(err, users.ErrExists) {
		t.Fatalf("twice: %v", err)
	}
	for _, bad := range []string{"no-at", "@example.org", "a@nodot", "a b@example.org", "a@b@example.org"} {
		if _, err := s.Register(ctx, bad); !errors.Is(err, users.ErrBadEmail) {
			t.Errorf("%q: %v, want ErrBadEmail", bad, err)
		}
	}
	if _, err := s.Register(ctx, "b@example.org"); err != nil {
		t.Fatal(err)
	}
	var rl *users.RegistrationLimitError
	if _, err := s.Register(ctx, "c@example.org"); !errors.As(err, &rl) || rl.Limit != 2 {
		t.Fatalf("third of the day: %v, want the limit of 2", err)
	}
	clk.Advance(time.Minute)
	if _, err := s.Register(ctx, "c@example.org"); err != nil {
		t.Fatalf("next day: %v", err)
	}
	if err := s.SetRegistration(ctx, users.Registration{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, "d@example.org"); !errors.Is(err, users.ErrRegistrationClosed) {
		t.Fatalf("closed again: %v", err)
	}
}
