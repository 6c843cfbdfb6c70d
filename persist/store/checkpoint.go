package store

import (
	"context"
	"database/sql"
	"fmt"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// A stream's WAL grows with every commit until a checkpoint copies it into
// the database file, after which the next commit starts the WAL over.
// SQLite runs that checkpoint itself inside the commit that takes the WAL
// past wal_autocheckpoint (1,000 pages): an fsync of the WAL, the copy, an
// fsync of the database, all before that commit's writers hear back, and
// while the requests queued behind them wait: the tail of a set's latency
// (docs/benchmarks.md).
//
// So a stream asks for its checkpoint earlier, at IdleCheckpointPages, and
// the server runs it when the stream has nothing queued (Checkpointer):
// under a load with idle moments no commit carries one, and only requests
// arriving during it wait. SQLite's own stays the bound under a load with
// none, so a WAL is never larger than it was (the disk reserve is sized by
// it, reserve.go).

// IdleCheckpointPages is the WAL size, in pages, at which a stream asks
// for a checkpoint between requests: half of SQLite's own
// wal_autocheckpoint, so that a stream idle now and then never reaches
// that one.
const IdleCheckpointPages = 500

// Checkpointer is a Stream that can move its WAL into its database between
// requests. Its owner (the server, which serves one stream's requests one
// batch at a time) calls Checkpoint, when CheckpointDue says so, at a
// moment nothing waits for the stream.
type Checkpointer interface {
	// CheckpointDue reports, without I/O, whether the WAL has grown enough
	// since the last checkpoint to want one.
	CheckpointDue() bool
	// Checkpoint copies the WAL into the database (a PASSIVE checkpoint:
	// it waits for no reader) so the next commit starts it over.
	Checkpoint() error
}

var _ Checkpointer = (*sqliteStream)(nil)

func (s *sqliteStream) CheckpointDue() bool {
	return !s.memory && s.walPages >= IdleCheckpointPages
}

func (s *sqliteStream) Checkpoint() error {
	// Counted as done whatever the outcome: a checkpoint that failed (a
	// full disk) is tried again after as many pages more, not at every
	// idle moment; SQLite's own still bounds the WAL meanwhile.
	s.walPages = 0
	if _, err := s.execSQL(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// notePages adds the pages the last commit wrote to the WAL to walPages.
// SQLite counts them per connection (SQLITE_DBSTATUS_CACHE_WRITE, read and
// reset here), so they include what a checkpoint inside the commit moved
// already: walPages may run ahead of the WAL, which costs at most one
// checkpoint with little to copy.
func (s *sqliteStream) notePages() {
	if s.memory {
		return
	}
	n, err := dbStatus(s.conn, sqlite3.SQLITE_DBSTATUS_CACHE_WRITE, true)
	if err != nil {
		// Not this driver, or closed: no count, so no idle checkpoint,
		// and SQLite's own checkpoint works as it always did.
		return
	}
	s.walPages += n
}

// dbStatus returns sqlite3_db_status(op)'s current value on c's connection,
// resetting it with reset.
func dbStatus(c *sql.Conn, op int32, reset bool) (int64, error) {
	var cur int64
	err := c.Raw(func(dc any) error {
		handle, t, err := sqliteHandle(dc)
		if err != nil {
			return err
		}
		p := t.Alloc(8) // the current and high-water values, in C memory
		defer t.Free(8)
		r := int32(0)
		if reset {
			r = 1
		}
		if rc := sqlite3.Xsqlite3_db_status(t, handle, op, p, p+4, r); rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("sqlite3_db_status(%d) returned %d", op, rc)
		}
		cur = int64(libc.AtomicLoadNInt32(p, 0))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite3_db_status: %w", err)
	}
	return cur, nil
}
