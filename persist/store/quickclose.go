package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// QuickCloser is a Stream that can close without the work that makes its
// files compact: the server's open-stream cache closes evicted streams this
// way while it is behind, and with Close otherwise.
type QuickCloser interface {
	// CloseQuick closes the stream as Close does but may leave its
	// write-ahead log in place, for the next open to recover from,
	// instead of checkpointing it into the database and removing it.
	// kept says it did: Compacter.Compact makes the files compact later.
	CloseQuick() (kept bool, err error)
}

// Compacter is a Storage that can make the files of a closed stream
// compact, as a full Close would have left them.
type Compacter interface {
	// Compact checkpoints the WAL a quick close left into the stream's
	// database and removes the WAL and -shm. A stream that is missing or
	// has no WAL is left alone; one open elsewhere is correct either way
	// (its WAL then stays until its last connection closes).
	Compact(scope, name string) error
}

var (
	_ QuickCloser = (*sqliteStream)(nil)
	_ Compacter   = (*SQLite)(nil)
)

// quickCloseMaxWAL bounds the -wal file a quick close leaves: past it the
// stream is closed with Close, which checkpoints the WAL into the database
// and removes it, so a stream closed quickly again and again holds at most
// this much beside its database (and the -shm file, 32 KiB).
const quickCloseMaxWAL = 256 << 10

// CloseQuick implements QuickCloser. Closing the last connection to a file
// in WAL mode checkpoints it: an fsync of the WAL, the copy of its pages
// into the database, an fsync of the database, then the -wal and -shm are
// unlinked, and the next open's first write creates the -wal again and
// fsyncs its header and the directory. That is most of the cost of an
// open, write and close cycle (measured in docs/benchmarks.md). With
// SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE the connection closes without it: the
// committed transactions stay in the WAL, whose frames the next open reads
// back (recovery, proportional to the WAL's size: bounded by
// quickCloseMaxWAL) and whose next write is appended, without an fsync in
// synchronous=NORMAL. Durability is the tier's either way: a commit is in
// the WAL file once committed (fsynced before the answer with sync), and
// the checkpoint moves it, it does not make it safer. An archived stream
// backs up at every close (a checkpoint and a copy), so it always closes
// with Close.
func (s *sqliteStream) CloseQuick() (kept bool, err error) {
	quick := false
	if !s.memory && s.arch == nil && s.path != "" {
		if fi, err := os.Stat(s.path + "-wal"); err == nil && fi.Size() <= quickCloseMaxWAL {
			// Without the option (a driver whose connection this code
			// cannot reach) the close is simply a full one.
			quick = noCheckpointOnClose(s.conn) == nil
		}
	}
	if err := s.Close(); err != nil {
		return false, err
	}
	if quick {
		_, err := os.Stat(s.path + "-wal")
		kept = err == nil
	}
	return kept, nil
}

// Compact implements Compacter: a connection of its own reads the file (a
// read transaction opens the WAL) and closes, and the close of the file's
// last connection checkpoints and removes the WAL, as Stream.Close does. It
// runs no pragma that writes and opens nothing missing (mode=rw).
func (st *SQLite) Compact(scope, name string) error {
	if st.dir == "" {
		return nil
	}
	p, err := StreamPath(st.dir, scope, name)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p + "-wal"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// In the storage's own locking mode: an exclusive one makes no -shm.
	// Only the lock wait and locking mode (lockDSN): no pragma that reads
	// the schema, so SQLite never parses it. The read of the header opens
	// the WAL and the close checkpoints it, which needs no schema, and the
	// checkpoint syncs the WAL and then the database in SQLite's default
	// FULL as in NORMAL.
	db, err := sql.Open("sqlite", st.lockDSN(p, st.busyMs))
	if err != nil {
		return fmt.Errorf("compact stream: %w", err)
	}
	var v int
	err = db.QueryRow(`PRAGMA user_version`).Scan(&v)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if _, serr := os.Stat(p); errors.Is(serr, fs.ErrNotExist) {
			return nil // dropped meanwhile
		}
		return classifyDisk(fmt.Errorf("compact stream: %w", err))
	}
	if st.excl {
		// A -shm left by a server that ran without Exclusive on this
		// directory (and crashed, or closed quickly): nothing here
		// uses or removes it.
		if err := os.Remove(p + "-shm"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("compact stream: %w", err)
		}
	}
	return nil
}

// noCheckpointOnClose sets SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE on c's
// connection. TestCloseQuickLeavesWAL fails if that stops working.
func noCheckpointOnClose(c *sql.Conn) error {
	return dbConfig(c, sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, int32(1), uintptr(0))
}

// dbConfig calls sqlite3_db_config(op, args...) on c's connection.
// modernc.org/sqlite calls sqlite3_db_config only for the options of its
// DSN, so this reaches the driver connection's SQLite handle (its db and
// tls fields) by reflection; a driver whose connection has no such fields
// gets an error, and each caller then goes on without the option.
func dbConfig(c *sql.Conn, op int32, args ...any) error {
	return c.Raw(func(dc any) error {
		handle, t, err := sqliteHandle(dc)
		if err != nil {
			return fmt.Errorf("sqlite3_db_config: %w", err)
		}
		// libc.VaList packs each argument in 8 bytes, as the driver's own
		// dbConfigBool does.
		bp := libc.Xmalloc(t, types.Size_t(8*len(args)))
		if bp == 0 {
			return errors.New("sqlite3_db_config: out of memory")
		}
		defer libc.Xfree(t, bp)
		if rc := sqlite3.Xsqlite3_db_config(t, handle, op, libc.VaList(bp, args...)); rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("sqlite3_db_config(%d) returned %d", op, rc)
		}
		return nil
	})
}

// sqliteHandle is the SQLite handle and the thread state of a driver
// connection of modernc.org/sqlite (its db and tls fields), reached by
// reflection: the driver calls the C API for its own needs only.
func sqliteHandle(dc any) (uintptr, *libc.TLS, error) {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0, nil, errors.New("unknown driver connection")
	}
	v = v.Elem()
	db, tls := v.FieldByName("db"), v.FieldByName("tls")
	if !db.IsValid() || db.Kind() != reflect.Uintptr || !tls.IsValid() || tls.Type() != reflect.TypeFor[*libc.TLS]() {
		return 0, nil, fmt.Errorf("driver connection %s has no db and tls fields", v.Type())
	}
	handle := uintptr(db.Uint())
	t := (*libc.TLS)(unsafe.Pointer(tls.Pointer()))
	if handle == 0 || t == nil {
		return 0, nil, errors.New("connection closed")
	}
	return handle, t, nil
}
