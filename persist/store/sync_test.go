package store

import (
	"testing"
	"time"
)

// synchronousOf is the PRAGMA synchronous of s's connection: 1 NORMAL, 2 FULL.
func synchronousOf(t *testing.T, s Stream) int {
	t.Helper()
	var mode int
	if err := s.(*sqliteStream).conn.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// SQLiteConfig.Sync makes every stream FULL, whatever its config says and
// across a config change and a reopen; without it a stream is NORMAL unless
// its config asks for sync.
func TestSyncStorageMakesEveryStreamFull(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		sync bool
		want int
	}{{false, 1}, {true, 2}} {
		st := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Sync: tc.sync})
		s, err := st.Open("hub", "log", now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Write([]WriteOp{{Value: []byte("v")}}, now); err != nil {
			t.Fatal(err)
		}
		if got := synchronousOf(t, s); got != tc.want {
			t.Fatalf("Sync %v: new stream's synchronous %d, want %d", tc.sync, got, tc.want)
		}
		cfg := s.Config()
		cfg.Sync = true
		if _, _, err := s.SetConfig(cfg, now); err != nil {
			t.Fatal(err)
		}
		if got := synchronousOf(t, s); got != 2 {
			t.Fatalf("Sync %v: synchronous %d after the stream's sync config, want 2", tc.sync, got)
		}
		cfg.Sync = false
		if _, _, err := s.SetConfig(cfg, now); err != nil {
			t.Fatal(err)
		}
		if got := synchronousOf(t, s); got != tc.want {
			t.Fatalf("Sync %v: synchronous %d after sync config off, want %d", tc.sync, got, tc.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = st.Open("hub", "log", now)
		if err != nil {
			t.Fatal(err)
		}
		if got := synchronousOf(t, s); got != tc.want {
			t.Fatalf("Sync %v: reopened stream's synchronous %d, want %d", tc.sync, got, tc.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
