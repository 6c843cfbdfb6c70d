package store

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestIdleCheckpointKeepsTheWALSmall: a stream counts the pages its commits
// put in the WAL and asks for a checkpoint at IdleCheckpointPages; taken
// when asked, the WAL never grows to SQLite's own checkpoint (1,000
// pages), so no commit runs one. Not taken, it does grow that far: the
// count and the bound are what keep it small.
func TestIdleCheckpointKeepsTheWALSmall(t *testing.T) {
	t.Parallel()
	const commits = 1500
	const frame = 24 + newFilePageSize // a WAL frame: its header and a page
	for _, tc := range []struct {
		exclusive, take bool
	}{{false, true}, {true, true}, {true, false}} {
		t.Run(fmt.Sprintf("exclusive=%v,take=%v", tc.exclusive, tc.take), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: tc.exclusive})
			s, err := st.Open("a", "s", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ck, ok := s.(Checkpointer)
			if !ok {
				t.Fatal("a SQLite stream is not a Checkpointer")
			}
			p, err := StreamPath(dir, "a", "s")
			if err != nil {
				t.Fatal(err)
			}
			value := make([]byte, 100)
			var most int64
			taken := 0
			for i := range commits {
				if _, _, err := s.Write([]WriteOp{{Key: fmt.Sprint("k", i), Value: value}}, time.Now()); err != nil {
					t.Fatal(err)
				}
				fi, err := os.Stat(p + "-wal")
				if err != nil {
					t.Fatal(err)
				}
				most = max(most, fi.Size())
				if tc.take && ck.CheckpointDue() {
					if err := ck.Checkpoint(); err != nil {
						t.Fatal(err)
					}
					taken++
					if ck.CheckpointDue() {
						t.Fatal("still due after a checkpoint")
					}
				}
			}
			pages := most / frame
			switch {
			case tc.take && (taken == 0 || pages > IdleCheckpointPages+16):
				t.Fatalf("%d checkpoints taken, the WAL reached %d pages: want some, and at most a commit past %d", taken, pages, IdleCheckpointPages)
			case !tc.take && pages < 1000:
				t.Fatalf("with no checkpoint taken the WAL reached only %d pages: the test's commits do not reach SQLite's own", pages)
			}
			t.Logf("%d commits: the WAL reached %d pages, %d checkpoints taken", commits, pages, taken)
		})
	}
}
