package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// A config request's desc is bounded (MergeConfig), but a stream whose file
// holds a longer one, stored by an older version, still opens with it, and
// takes patches: one that leaves desc alone, and the reset.
func TestConfigDescBound(t *testing.T) {
	t.Parallel()
	if _, err := MergeConfig(persist.DefaultConfig(), []byte(`{"desc":"`+strings.Repeat("d", persist.MaxDescBytes+1)+`"}`)); persist.CodeOf(err) != persist.CodeTooLarge {
		t.Fatalf("a desc over MaxDescBytes: %v, want too-large", err)
	}
	dir := t.TempDir()
	sq := NewSQLite(SQLiteConfig{Dir: dir})
	st, err := sq.Open("hub", "legacy", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := persist.DefaultConfig()
	c.Desc = strings.Repeat("d", 1<<20) // as an older version stored it
	if _, _, err := st.SetConfig(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = sq.Open("hub", "legacy", time.Now()); err != nil {
		t.Fatalf("reopen with a long stored desc: %v", err)
	}
	defer st.Close()
	if got := len(st.Config().Desc); got != 1<<20 {
		t.Fatalf("stored desc read back as %d bytes", got)
	}
	next, err := MergeConfig(st.Config(), []byte(`{"max_msgs":5}`))
	if err != nil || next.MaxMsgs != 5 {
		t.Fatalf("a patch that leaves desc alone: %+v, %v", next.MaxMsgs, err)
	}
	if next, err = MergeConfig(next, []byte(`{"desc":""}`)); err != nil || next.Desc != "" {
		t.Fatalf("reset desc: %q, %v", next.Desc, err)
	}
}

// TestSetConfigFailureLeavesNothing: a config change that fails inside its
// transaction stores nothing and leaves the handle as the file is: its
// config, and the sync mode of its connection, are those of the stored
// config, also when another handle sharing the file changed that config's
// sync mode since this one last looked.
// (Was: the rollback ran with the new config still in place, and applied the new config's sync mode to the connection (NORMAL) while the handle went back to the stored config (sync: true): writes were then not fsynced although the stream's config asks for it.)
func TestSetConfigFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	syncMode := func(t *testing.T, s Stream) int {
		t.Helper()
		var m int
		if err := s.(*sqliteStream).conn.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	const normal, full = 1, 2
	// refuse makes every store of a config in the file fail, as a full
	// disk or an I/O error would, inside the transaction.
	refuse := func(t *testing.T, s Stream) {
		t.Helper()
		if _, err := s.(*sqliteStream).conn.ExecContext(context.Background(), `CREATE TRIGGER refuse_config BEFORE INSERT ON meta WHEN NEW.k = 'config' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("another handle changed sync", func(t *testing.T) {
		t.Parallel()
		now := time.Now()
		a, b := openShared(t, now)
		on := persist.DefaultConfig()
		on.Sync = true
		if _, _, err := b.SetConfig(on, now); err != nil {
			t.Fatal(err)
		}
		refuse(t, b)
		next := a.Config() // a has not looked since: sync false
		next.MaxMsgs = 5
		if _, _, err := a.SetConfig(next, now); err == nil {
			t.Fatal("config change stored although the file refused it")
		}
		if got := a.Config(); got != on {
			t.Fatalf("after the failed change the handle's config is %+v, want the stored %+v", got, on)
		}
		if m := syncMode(t, a); m != full {
			t.Fatalf("after the failed change the connection's synchronous is %d, want %d (FULL): the stored config has sync: true", m, full)
		}
	})
	t.Run("this change sets sync", func(t *testing.T) {
		t.Parallel()
		now := time.Now()
		s, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", "s", now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		refuse(t, s)
		next := persist.DefaultConfig()
		next.Sync = true
		if _, _, err := s.SetConfig(next, now); err == nil {
			t.Fatal("config change stored although the file refused it")
		}
		if got := s.Config(); got != persist.DefaultConfig() {
			t.Fatalf("after the failed change the handle's config is %+v, want the default", got)
		}
		if m := syncMode(t, s); m != normal {
			t.Fatalf("after the failed change the connection's synchronous is %d, want %d (NORMAL)", m, normal)
		}
	})
}
