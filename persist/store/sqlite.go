package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// busyTimeoutMs is how long a connection waits for a lock another one
// holds: a stream reopened while its previous handle is still closing
// (checkpointing), or a file another server on the data directory holds
// open with Exclusive. A wait past it fails the request unavailable, which
// clients retry; it is well under the client's attempt timeout
// (persist.ClientTimeoutDefault, 5 s) so that the answer reaches the client
// while the attempt still waits. At 5 s the attempt always ended first, and
// a set without a msgID is not retried after a timeout.
const busyTimeoutMs = 2000

// The seq is always given by us (lastSeq + 1). Files created before
// keep AUTOINCREMENT, whose sqlite_sequence row costs every commit one
// more page in the WAL; newer files keep the highest seq in meta 'seq'
// instead, written only by the commits that delete the newest row (see
// newestGone). Both are read on open.
//
// coreSchema is what every stream uses. Each b-tree is at least one page
// of the file, and most streams never use msgIDs, delete ids or TTLs, so
// the tables and index of those (lazyTables) are created by the write
// transaction that first needs them.
const coreSchema = `
CREATE TABLE IF NOT EXISTS messages(
	seq     INTEGER PRIMARY KEY,
	key     TEXT,
	time    INTEGER NOT NULL,
	headers BLOB,
	enc     INTEGER NOT NULL DEFAULT 0,
	raw     BLOB,
	size    INTEGER NOT NULL,
	ttl     INTEGER,
	expires INTEGER
);
-- Only keyed rows enter the key index: a plain append touches one b-tree.
CREATE UNIQUE INDEX IF NOT EXISTS messages_key ON messages(key) WHERE key IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
`

// lazyTables is a set of the b-trees a stream file gets on first use.
type lazyTables uint8

const (
	lazyMsgIDs  lazyTables = 1 << iota // msgids, msgids_time
	lazyDelIDs                         // delids, delids_time
	lazyExpires                        // messages_expires
	lazyAll     = lazyMsgIDs | lazyDelIDs | lazyExpires
)

// lazyDefs are the lazy b-trees: each is created as a unit (a table with
// its index, in one transaction), so the presence of name, its first
// b-tree, says the file has all of ddl.
var lazyDefs = []struct {
	bit  lazyTables
	name string
	ddl  string
}{
	{lazyMsgIDs, "msgids", `
CREATE TABLE IF NOT EXISTS msgids(id TEXT PRIMARY KEY, seq INTEGER NOT NULL, time INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS msgids_time ON msgids(time);`},
	// A delete's request id and the seqs its first attempt removed
	// (seqRuns), so that a retried delete answers what the first one did.
	{lazyDelIDs, "delids", `
CREATE TABLE IF NOT EXISTS delids(id TEXT PRIMARY KEY, seqs BLOB NOT NULL, time INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS delids_time ON delids(time);`},
	// Created before the first row with an expiry, and kept: without it
	// no row has one, so the TTL count and expiry need no scan (on a
	// stream of many rows the creation is a scan, once).
	{lazyExpires, "messages_expires", `
CREATE INDEX IF NOT EXISTS messages_expires ON messages(expires) WHERE expires IS NOT NULL;`},
}

// fullSchema is every b-tree, as files had before lazyTables; it is what
// a file from before the schema versions gets (see ensureSchema).
var fullSchema = func() string {
	q := coreSchema
	for _, l := range lazyDefs {
		q += l.ddl + "\n"
	}
	return q
}()

// lazyMaskSQL is an expression whose value is the lazyTables the file has.
var lazyMaskSQL = func() string {
	q := `(SELECT COALESCE(SUM(CASE name`
	names := ""
	for _, l := range lazyDefs {
		q += ` WHEN '` + l.name + `' THEN ` + strconv.Itoa(int(l.bit))
		if names != "" {
			names += ", "
		}
		names += `'` + l.name + `'`
	}
	return q + ` END), 0) FROM sqlite_master WHERE name IN (` + names + `))`
}()

const msgCols = `seq, key, time, headers, enc, raw, ttl`

// SQLiteConfig configures the SQLite storage.
type SQLiteConfig struct {
	// Dir holds one SQLite file per stream (see paths.go). Empty means no
	// stream can be opened: the server keeps ephemeral streams only (in
	// Memory), and opening a persistent one is bad-request.
	Dir string
	// Archive, if set, is a directory holding a backup copy of every
	// persistent stream, laid out like Dir (see archive.go); a stream whose
	// archive copy is newer than its local file, or whose local file is
	// missing, is restored from it on open. Empty means no archive.
	Archive string
	// ReserveBytes is the size of the disk reserve kept in Dir, given back
	// when the disk fills so that deletes can still run (see reserve.go).
	// Zero means ReserveBytesDefault; negative means no reserve.
	ReserveBytes int64
	// Sync makes every stream's file synchronous=FULL, whatever its own
	// "sync" config says: a commit is on the disk (the WAL fsynced) before
	// its writes are answered, so an acknowledged write survives a power
	// loss, not only a crash of the process. False (the default) keeps
	// NORMAL for the streams that do not ask for FULL.
	Sync bool
	// Exclusive opens every stream file with locking_mode=EXCLUSIVE: the
	// stream's one connection takes the file's lock at its first read and
	// keeps it until it closes, and its WAL index lives in the process's
	// memory, so there is no -shm file to create, map and remove and no
	// lock call per transaction (an open, a set and a close cost about a
	// third less; docs/benchmarks.md). It is only for a storage alone on
	// Dir: while a stream is open no other process, nor another
	// connection of this one, can read or write its file (they wait
	// busy_timeout, then fail SQLITE_BUSY). False (the default) lets two
	// servers sharing Dir both reach a stream (sqlite_shared.go).
	Exclusive bool
	// Packs, if positive, keeps new streams in that many shared files
	// under Dir/.packs instead of a file each (pack.go): a stream costs
	// no descriptor and no connection of its own, so many small streams
	// open and close cheaply. Fixed when the directory gets its first
	// pack; at most MaxPacks. A directory with packs is read from them
	// whatever this says. Excludes Archive.
	Packs int
}

// SQLite keeps each persistent stream in its own SQLite file under Dir.
// Ephemeral streams are kept by Memory.
type SQLite struct {
	dir     string // "" = no stream can be opened here
	archive string // "" = no archive (see archive.go)
	space   *space // the disk reserve and full state of dir
	sync    bool   // every stream FULL (SQLiteConfig.Sync)
	excl    bool   // locking_mode=EXCLUSIVE (SQLiteConfig.Exclusive)
	busyMs  int    // busy_timeout of its connections: busyTimeoutMs (tests shorten it)
	packs   int    // new streams go to packs (SQLiteConfig.Packs)
	pkMu    sync.Mutex
	pk      *packSet // the directory's packs, once used (pack.go)
}

var (
	_ Storage = (*SQLite)(nil)
	_ Stream  = (*sqliteStream)(nil)
)

// NewSQLite returns the SQLite storage of cfg; it opens nothing yet.
func NewSQLite(cfg SQLiteConfig) *SQLite {
	reserve := cfg.ReserveBytes
	if reserve == 0 {
		reserve = ReserveBytesDefault
	}
	return &SQLite{dir: cfg.Dir, archive: cfg.Archive, space: newSpace(cfg.Dir, reserve), sync: cfg.Sync, excl: cfg.Exclusive, busyMs: busyTimeoutMs, packs: cfg.Packs}
}

// Close implements Storage; open streams are closed by their owner, and
// the packs (pack.go) here, once their streams are.
func (st *SQLite) Close() error { return st.closePacks() }

// uriEscaper escapes what SQLite URIs reserve. Made once: a Replacer
// builds its tables at its first use, which cost every open as much as
// some of its statements.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// fileURI turns a path into a SQLite URI, escaping what URIs reserve.
func fileURI(p string) string {
	return "file:" + uriEscaper.Replace(filepath.ToSlash(p))
}

// Open implements Storage. A new stream's file is a copy of the template
// (template.go). A failure of the disk is a *DiskError, and a stream file
// this call created is removed again when the open fails (see
// removeCreated), so a full or read-only disk leaves no files behind.
func (st *SQLite) Open(scope, name string, now time.Time) (Stream, error) {
	return st.openClassified(scope, name, true, now)
}

// OpenExisting implements Storage. A persistent stream exists when its file
// does, or when the archive holds a copy of it: that copy is state the
// stream's users wrote and this server lost, so a read restores it (as a
// write would) rather than answering as if it had never been.
func (st *SQLite) OpenExisting(scope, name string, now time.Time) (Stream, error) {
	return st.openClassified(scope, name, false, now)
}

// openClassified is open with disk failures made *DiskError (and the space
// reserve given up on a full disk).
func (st *SQLite) openClassified(scope, name string, create bool, now time.Time) (Stream, error) {
	s, err := st.open(scope, name, create, now)
	if err != nil {
		if errors.Is(err, ErrNoStream) {
			return nil, err
		}
		if per := FilesPerStream(st.excl); outOfDescriptors(err, per) {
			return nil, descriptorError(err, per)
		}
		if isBusy(err) {
			// Another connection kept the file locked past busy_timeout:
			// with Exclusive, most likely a server that shares the
			// directory and holds the stream open (it owned the scope).
			why := ""
			if st.excl {
				why = " (--exclusive-files: another server on this data directory may hold the stream open)"
			}
			return nil, persist.Errorf(persist.CodeUnavailable, "stream file is locked by another connection%s; retry later: %v", why, err)
		}
		err = classifyDisk(err)
		st.space.release(err)
		return nil, err
	}
	return s, nil
}

// open opens a stream; without create it creates nothing (see OpenExisting).
func (st *SQLite) open(scope, name string, create bool, now time.Time) (Stream, error) {
	if st.dir == "" {
		return nil, persist.Errorf(persist.CodeBadRequest, "this server has no data directory: only ephemeral streams (%s: true)", persist.HdrEphemeral)
	}
	p, err := StreamPath(st.dir, scope, name)
	if err != nil {
		return nil, err
	}
	if st.archive == "" {
		if s, ok, err := st.openPacked(scope, name, p, create, now); err != nil || ok {
			return s, err
		}
	}
	if !create {
		ok, err := st.exists(scope, name, p)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, ErrNoStream
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	st.space.ensure()
	var created string // the stream file, when this open creates it
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		// A new stream adds a file: not while the disk is full.
		if err := st.space.admit(); err != nil {
			return nil, err
		}
		created = p
	}
	var arch *streamArchive
	if st.archive != "" {
		if arch, err = archiveStream(st.archive, scope, name, p); err != nil {
			return nil, err
		}
		if arch.saved >= 0 {
			created = "" // the archive's copy was restored to p
		}
	}
	var template []byte
	if created != "" {
		if template, err = streamTemplate(); err != nil {
			return nil, err
		}
		switch err := createStreamFile(p, template); {
		case errors.Is(err, fs.ErrExist):
			created = "" // made meanwhile by another server on this directory
		case err != nil:
			return nil, err
		default:
			defer func() {
				if created != "" {
					removeCreated(created, template)
				}
			}()
		}
	}
	s, err := openStream(st.streamDSN(p, st.busyMs), scope, name, openHow{sp: st.space, full: st.sync, exclusive: st.excl}, now)
	if err != nil {
		if !create {
			if _, serr := os.Stat(p); errors.Is(serr, fs.ErrNotExist) {
				return nil, ErrNoStream
			}
		}
		return nil, err
	}
	if arch != nil {
		if err := arch.baseline(context.Background(), s); err != nil {
			s.Close()
			return nil, err
		}
		s.arch = arch // set last: a stream that failed to open is not backed up
	}
	s.path = p
	created = "" // opened: the file is the stream's now
	return s, nil
}

// streamDSN is the DSN of the stream file p, which exists: the storage
// makes every stream file (createStreamFile, or an archive copy's restore)
// and SQLite only opens one (mode=rw), so a file removed since it was
// looked at is not made again, empty. The driver runs the pragmas
// busy_timeout first and then in alphabetical order, and none of them
// writes to an existing file (journal_mode(WAL) on a file in WAL mode
// already is a no-op, and converts one that is not, an archive copy).
//
// An exclusive storage adds locking_mode(EXCLUSIVE), which only keeps the
// WAL index out of shared memory when it is set before the WAL is first
// read; the driver would run journal_mode(WAL) before it (the alphabet),
// so the DSN then leaves journal_mode out and init runs it
// (openHow.exclusive). busyMs is how long a connection waits for a lock.
func (st *SQLite) streamDSN(p string, busyMs int) string {
	mode := "NORMAL"
	if st.sync {
		mode = "FULL"
	}
	dsn := st.lockDSN(p, busyMs) + "&_pragma=synchronous(" + mode + ")"
	if st.excl {
		return dsn
	}
	return dsn + "&_pragma=journal_mode(WAL)"
}

// lockDSN is what every connection to the stream file p opens with: only
// an existing file (mode=rw), a wait of busyMs for a lock, and the
// storage's locking mode. Its pragmas do not read the schema (synchronous
// and journal_mode do), so a connection that needs none, as Compact's,
// opens with lockDSN alone and SQLite never parses it.
func (st *SQLite) lockDSN(p string, busyMs int) string {
	dsn := fileURI(p) + "?mode=rw&_pragma=busy_timeout(" + strconv.Itoa(busyMs) + ")"
	if st.excl {
		dsn += "&_pragma=locking_mode(EXCLUSIVE)"
	}
	return dsn
}

// openHow is how openStream opens a stream's database.
type openHow struct {
	memory bool   // a private in-memory database (Memory)
	sp     *space // the disk reserve its writes wait on; nil for none
	full   bool   // the DSN opens it synchronous=FULL whatever its config says
	// exclusive: the DSN sets locking_mode=EXCLUSIVE and leaves
	// journal_mode out (see streamDSN), so init sets WAL on an existing
	// file, which converts an archive copy that is not; and no other
	// connection can commit to the file while this one is open.
	exclusive bool
}

// openStream opens the SQLite database of dsn as the stream name of scope:
// a file of SQLite, or a private in-memory database of Memory. On failure
// nothing is left open.
func openStream(dsn, scope, name string, how openHow, now time.Time) (*sqliteStream, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s := &sqliteStream{db: db, scope: scope, name: name, memory: how.memory, alone: how.memory || how.exclusive, space: how.sp, syncAll: how.full, msgids: map[string]dedupEntry{}}
	s.prepareLazily()
	if err := s.init(now, how); err != nil {
		s.Close()
		return nil, err
	}
	s.opened = true
	return s, nil
}

// exists reports whether the persistent stream whose file is p has stored
// state: its file, or else an archive copy. It creates nothing.
func (st *SQLite) exists(scope, name, p string) (bool, error) {
	if _, err := os.Stat(p); err == nil {
		return true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("open stream: %w", err)
	}
	if st.archive == "" {
		return false, nil
	}
	ap, err := StreamPath(st.archive, scope, name)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(ap); err == nil {
		return true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("open stream: archive: %w", err)
	}
	return false, nil
}

// dedupEntry remembers where a msgID's first write landed.
type dedupEntry struct {
	seq  uint64
	time int64
}

// dedupItem is one msgID in arrival order, for pruning the window.
type dedupItem struct {
	id   string
	time int64
}

// sqliteStream is one stream: a single connection, prepared statements, and
// in-memory totals so limits need no query per write. Both storages use it:
// SQLite on a file, Memory on a private in-memory database.
type sqliteStream struct {
	db    *sql.DB
	conn  *sql.Conn
	scope string
	name  string
	// memory: the database is in memory (Memory), so max_bytes is clamped
	// by EphemeralMaxBytes and there is no sync mode to set.
	memory bool
	// syncAll: the storage makes every stream FULL (SQLiteConfig.Sync).
	syncAll bool
	// alone: no other connection can commit to the database while this
	// one is open (a private in-memory one, or a file opened with
	// SQLiteConfig.Exclusive), so what the handle keeps in memory is
	// never stale and needs no data_version check (sqlite_shared.go).
	alone bool

	cfg     persist.Config
	count   int64  // messages
	bytes   int64  // sum of sizes
	lastSeq uint64 // highest seq ever assigned
	// seqTable: the file has sqlite_sequence (made with AUTOINCREMENT),
	// which keeps the highest seq by itself.
	seqTable bool
	// lazy is the lazyTables the file has, read at open and again when
	// another connection committed (reloadIfShared); the write transaction
	// that first needs one creates it (ensureLazy). A missing one reads as
	// empty, without a query.
	lazy lazyTables
	// newestGone: the current transaction deleted the row of lastSeq other
	// than by a keyed replace (which inserts a higher one), so commit
	// records lastSeq in meta for the next open.
	newestGone bool
	// lastTime is the time of the newest row. Writes never go below it, so
	// times never decrease along seq and age and rate queries can walk seq.
	lastTime int64
	ttlRows  int64 // rows with a TTL (an upper bound: expired rows are subtracted when seen)
	// rates is what this handle committed in the last second while the
	// stream has a rate limit; txRate what the write under way stored.
	rates  rateLog
	txRate rateWindow
	// openedChanges are the changes of the open's expiry (OpenedChanges).
	openedChanges []Change
	// walPages counts the pages committed to the WAL since the last idle
	// checkpoint (checkpoint.go).
	walPages int64
	// readChecked is when a read last revalidated (readRows); zero: never.
	readChecked time.Time
	// freed is, in memory, what the rows removed since shrinkMemory last
	// looked at the free pages may have freed (see memoryShrinkMinBytes);
	// 0 on a file, whose free pages cost no memory.
	freed int64
	// syncStale: reloadConfig took a config whose sync mode is not applied
	// to the connection yet (see endTx).
	syncStale bool
	// opened: init succeeded, so the totals are the file's (keepTotals).
	opened bool
	// kept is what meta 'totals' holds as far as this handle knows, zero
	// when it holds none or may hold something else (totals.go).
	kept totals
	// dataVersion is PRAGMA data_version when the figures kept here (the
	// totals above, cfg, the msgIDs' bounds) were last known right; another
	// connection's commit changes it (see sqlite_shared.go).
	dataVersion int64

	// msgids is the window of the msgIDs this handle stored (and those in
	// the file when it opened), answering a retry without a query while it
	// is the file's only writer. dedupFIFO holds them in time order, pruned
	// from the front.
	msgids    map[string]dedupEntry
	dedupFIFO []dedupItem
	// foreignUntil is the time before which a msgID missing from msgids is
	// looked up in the table, because another connection stored msgIDs
	// the window does not hold: the newest msgids row when that was last
	// noticed, plus DedupWindow. 0 = never.
	foreignUntil int64
	// msgidsOldest is the time of the oldest msgids row when another
	// connection's were last noticed, then kept up by Expire; 0 = none of
	// theirs known. It lets Expire prune their rows, which this handle's
	// window does not list.
	msgidsOldest int64
	// delidsOldest is the time of the oldest row of delids, 0 when it is
	// empty: delete ids are looked up in the table, not held in memory (a
	// delete's answer can be long), and this says when Expire has some to
	// forget.
	delidsOldest int64

	arch  *streamArchive // nil = not archived
	space *space         // the data directory's reserve; nil in memory
	path  string         // the database file; "" in memory

	// The stream's statements: its own, or for a stream in a pack the
	// pack's, shared by its streams (pack.go).
	*stmtSet
	// pk is the pack holding the stream, nil for a stream with a file of
	// its own (or in memory); sid is its id there (pack.go).
	pk  *pack
	sid int64
	// A run of plain rows waiting for insertMany: consecutive seqs from
	// runSeq, all at runTime, all keyed or all unkeyed, with these bound
	// values (runCols per row).
	runSeq   uint64
	runTime  int64
	runKeyed bool
	runVals  []any
	runKeys  map[string]struct{} // the keys in the run
	execArgs []any               // reused argument buffer of insertMany and delMany
	// Keyed replaces of the run whose old rows are still to be deleted, and
	// for every deferred delete of the current Write, in order, the seq it
	// removed (0 = the key had no row); replaceKeys are the last len(replaceKeys).
	replaceKeys  []string
	replacedSeqs []uint64
}

// stmtSet is the statements of a stream's connection (see lazyStmt).
type stmtSet struct {
	insert, keySeq, delSeq, delKey, getSeq, getKey, putMsgID lazyStmt
	getMsgID, getDelID, putDelID                             lazyStmt
	beginStmt, commitStmt, dataVer                           lazyStmt
	// insertMany[keyed][i] is the multi-row INSERT of insertRuns[i] plain
	// rows, unkeyed or keyed, prepared on first use: one statement per run
	// of plain rows instead of one per row.
	insertMany [2][len(insertRuns)]lazyStmt
	// delMany[i] deletes up to insertRuns[i] keys in one statement,
	// prepared on first use.
	delMany [len(insertRuns)]lazyStmt
}

func (s *sqliteStream) init(now time.Time, how openHow) error {
	ctx := context.Background()
	// A stream in a pack uses the pack's connection, whose schema has
	// every table (pack.go): nothing to open, stamp or create.
	version := fullSchemaVersion
	if s.pk == nil {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("open stream: %w", err)
		}
		s.conn = conn
		if how.exclusive {
			if _, err := conn.ExecContext(ctx, `PRAGMA journal_mode = WAL`); err != nil {
				return fmt.Errorf("open stream: journal mode: %w", err)
			}
		}
		if version, err = s.ensureSchema(s.memory); err != nil {
			return err
		}
	}
	conn := s.conn
	var err error
	// Read before the totals: a commit by another connection after this
	// makes the next write transaction reload them (reloadIfShared). A
	// stream alone on its database never looks.
	if !s.alone {
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&s.dataVersion); err != nil {
			return fmt.Errorf("open stream: data version: %w", err)
		}
	}
	// What the handle keeps in memory, in a few simple statements (meta's
	// rows, the schema's names, the newest row, the totals only when meta
	// keeps none): opens are frequent (see lazyStmt), and compiling a
	// statement costs more than running it on a small stream; one
	// statement of subqueries for all of it took twice as long to compile
	// as these (docs/benchmarks.md). A connection that may share the file
	// reads them in one read transaction, so they are of one commit.
	var (
		stored  sql.NullString
		cfgJSON []byte
		metaSeq sql.NullInt64
		maxSeq  int64
		kept    []byte
	)
	if !s.alone {
		if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
			return fmt.Errorf("open stream: %w", err)
		}
	}
	err = s.readOpenState(ctx, version == fullSchemaVersion, &stored, &cfgJSON, &metaSeq, &maxSeq, &kept)
	if !s.alone {
		if _, cerr := conn.ExecContext(ctx, `COMMIT`); err == nil && cerr != nil {
			err = fmt.Errorf("open stream: %w", cerr)
		}
	}
	if err != nil {
		return err
	}
	// The stored name guards against two names sharing a file.
	switch {
	case !stored.Valid:
		if _, err := s.execSQL(ctx, `INSERT INTO meta(k, v) VALUES('name', ?), ('scope', ?)`, s.name, s.scope); err != nil {
			return fmt.Errorf("open stream: %w", err)
		}
	case stored.String != s.name:
		return persist.Errorf(persist.CodeInternal, "stream file of %q is claimed by another name", s.name)
	}
	s.cfg = persist.DefaultConfig()
	if cfgJSON != nil {
		if s.cfg, err = storedConfig(cfgJSON); err != nil {
			return fmt.Errorf("open stream: stored config: %w", err)
		}
	}
	if s.memory {
		s.cfg = ClampEphemeral(s.cfg)
	}
	if s.cfg.Sync && !s.syncAll { // the DSN's mode is NORMAL, or FULL for all
		if err := s.applySync(); err != nil {
			return err
		}
	}
	s.lastSeq = uint64(max(maxSeq, metaSeq.Int64))
	if s.seqTable {
		var auto uint64
		err := conn.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name='messages'`).Scan(&auto)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("open stream: sequence: %w", err)
		}
		s.lastSeq = max(s.lastSeq, auto)
	}
	if err := s.useKeptTotals(ctx, kept); err != nil {
		return err
	}
	if s.lazy&lazyMsgIDs != 0 {
		if err := s.loadMsgIDs(now); err != nil {
			return err
		}
	}
	// Expire what aged out while the stream was closed; the deletes are
	// the opener's to report (OpenedChanges), as the timer's are.
	s.openedChanges, err = s.Expire(now)
	return err
}

// OpenedChanges implements Stream.
func (s *sqliteStream) OpenedChanges() []Change {
	c := s.openedChanges
	s.openedChanges = nil
	return c
}

// openSchemaNames lists the schema's b-trees whose presence init needs:
// the lazy tables' first b-trees and sqlite_sequence (a file made with
// AUTOINCREMENT).
var openSchemaNames = func() string {
	q := `SELECT name FROM sqlite_master WHERE name IN ('sqlite_sequence'`
	for _, l := range lazyDefs {
		q += `, '` + l.name + `'`
	}
	return q + `)`
}()

// readOpenState reads what init keeps of the file: meta's rows (readMeta),
// the lazy tables it has (all of them when full, a file known to have
// every one) and whether it has sqlite_sequence, the newest row's seq and
// time, and, unless meta keeps the totals (kept), the count and bytes and
// the rows with an expiry (counted only when the expiry index is there:
// without it no row has one, and the count would scan the table); and the
// oldest delete id's time when delids is there.
func (s *sqliteStream) readOpenState(ctx context.Context, full bool, stored *sql.NullString, cfgJSON *[]byte, metaSeq *sql.NullInt64, maxSeq *int64, kept *[]byte) error {
	if err := s.readMeta(ctx, stored, cfgJSON, metaSeq, kept); err != nil {
		return err
	}
	if s.pk != nil {
		// A pack has every table and no sqlite_sequence.
		s.lazy, s.seqTable = lazyAll, false
		return s.readNewestAndTotals(ctx, maxSeq, kept)
	}
	rows, err := s.querySQL(ctx, openSchemaNames)
	if err != nil {
		return fmt.Errorf("open stream: schema: %w", err)
	}
	s.lazy, s.seqTable = 0, false
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("open stream: schema: %w", err)
		}
		if name == "sqlite_sequence" {
			s.seqTable = true
		}
		for _, l := range lazyDefs {
			if name == l.name {
				s.lazy |= l.bit
			}
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return fmt.Errorf("open stream: schema: %w", err)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("open stream: schema: %w", err)
	}
	if full {
		s.lazy = lazyAll
	}
	return s.readNewestAndTotals(ctx, maxSeq, kept)
}

// readNewestAndTotals is readOpenState's part after the schema: the newest
// row, the totals unless kept, the oldest delete id.
func (s *sqliteStream) readNewestAndTotals(ctx context.Context, maxSeq *int64, kept *[]byte) error {
	s.lastTime, *maxSeq = 0, 0
	err := s.queryRowSQL(ctx, `SELECT seq, time FROM messages ORDER BY seq DESC LIMIT 1`).Scan(maxSeq, &s.lastTime)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("open stream: newest row: %w", err)
	}
	s.count, s.bytes, s.ttlRows = 0, 0, 0
	if *kept == nil {
		if err := s.queryRowSQL(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages`).Scan(&s.count, &s.bytes); err != nil {
			return fmt.Errorf("open stream: totals: %w", err)
		}
		if s.lazy&lazyExpires != 0 {
			if err := s.queryRowSQL(ctx, `SELECT COUNT(*) FROM messages WHERE expires IS NOT NULL`).Scan(&s.ttlRows); err != nil {
				return fmt.Errorf("open stream: totals: %w", err)
			}
		}
	}
	s.delidsOldest = 0
	if s.lazy&lazyDelIDs != 0 {
		if err := s.queryRowSQL(ctx, `SELECT COALESCE(MIN(time), 0) FROM delids`).Scan(&s.delidsOldest); err != nil {
			return fmt.Errorf("open stream: delete ids: %w", err)
		}
	}
	return nil
}

// readMeta reads the meta rows init needs: the stream's name, its config,
// the seq kept apart from the rows, and the kept totals; each stays
// zero (NULL) when the file has no such row.
func (s *sqliteStream) readMeta(ctx context.Context, name *sql.NullString, cfgJSON *[]byte, seq *sql.NullInt64, kept *[]byte) error {
	rows, err := s.querySQL(ctx, `SELECT k, v FROM meta`)
	if err != nil {
		return fmt.Errorf("open stream: meta: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v []byte // a copy, whatever the value's type (SQLite renders numbers as text)
		if err := rows.Scan(&k, &v); err != nil {
			return fmt.Errorf("open stream: meta: %w", err)
		}
		switch k {
		case "name":
			*name = sql.NullString{String: string(v), Valid: v != nil}
		case "config":
			*cfgJSON = v
		case "seq":
			if v != nil {
				n, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return fmt.Errorf("open stream: meta seq %q: %w", v, err)
				}
				*seq = sql.NullInt64{Int64: n, Valid: true}
			}
		case totalsKey:
			*kept = v
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open stream: meta: %w", err)
	}
	return nil
}

// loadMsgIDs fills the dedup window from the msgids table.
func (s *sqliteStream) loadMsgIDs(now time.Time) error {
	rows, err := s.querySQL(context.Background(), `SELECT id, seq, time FROM msgids WHERE time > ? ORDER BY time`, now.Add(-DedupWindow).UnixMilli())
	if err != nil {
		return fmt.Errorf("open stream: msgids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var it dedupItem
		var e dedupEntry
		if err := rows.Scan(&it.id, &e.seq, &e.time); err != nil {
			return fmt.Errorf("open stream: msgids: %w", err)
		}
		it.time = e.time
		s.msgids[it.id] = e
		s.dedupFIFO = append(s.dedupFIFO, it)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open stream: msgids: %w", err)
	}
	return nil
}

// ensureLazy creates the b-trees of t the file lacks. It runs inside the
// write transaction that is about to use them, so they exist in the file
// exactly when that transaction commits (rollback restores s.lazy). IF NOT
// EXISTS makes it safe when another connection created one since this
// handle looked: begin rechecks after such a commit anyway, and nobody
// else can commit inside this transaction.
func (s *sqliteStream) ensureLazy(t lazyTables) error {
	if s.lazy&t == t {
		return nil
	}
	for _, l := range lazyDefs {
		if t&l.bit == 0 || s.lazy&l.bit != 0 {
			continue
		}
		if _, err := s.execSQL(context.Background(), l.ddl); err != nil {
			return fmt.Errorf("create %s: %w", l.name, err)
		}
		s.lazy |= l.bit
	}
	return nil
}

// prepareLazily gives the stream statements of its own.
func (s *sqliteStream) prepareLazily() { s.stmtSet = newStmtSet(nil) }

// newStmtSet gives the statements their SQL; each is prepared on first use
// (see lazyStmt). sid is nil for a stream's own connection, else where the
// pack keeps the id of the stream using them (pack.go).
func newStmtSet(sid *int64) *stmtSet {
	s := &stmtSet{}
	for _, l := range s.all() {
		l.sid = sid
	}
	for _, p := range []struct {
		st  *lazyStmt
		sql string
	}{
		{&s.insert, `INSERT INTO messages(seq, key, time, headers, enc, raw, size, ttl, expires) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.keySeq, `SELECT seq, size FROM messages WHERE key = ?`},
		{&s.delSeq, `DELETE FROM messages WHERE seq = ? RETURNING size, expires IS NOT NULL`},
		{&s.delKey, `DELETE FROM messages WHERE key = ? RETURNING seq, size, expires IS NOT NULL`},
		{&s.beginStmt, `BEGIN IMMEDIATE`},
		{&s.commitStmt, `COMMIT`},
		{&s.dataVer, `PRAGMA data_version`},
		{&s.getSeq, `SELECT ` + msgCols + ` FROM messages WHERE seq = ?`},
		{&s.getKey, `SELECT ` + msgCols + ` FROM messages WHERE key = ?`},
		{&s.putMsgID, `INSERT OR REPLACE INTO msgids(id, seq, time) VALUES(?, ?, ?)`},
		{&s.getMsgID, `SELECT seq, time FROM msgids WHERE id = ?`},
		{&s.getDelID, `SELECT seqs, time FROM delids WHERE id = ?`},
		{&s.putDelID, `INSERT OR REPLACE INTO delids(id, seqs, time) VALUES(?, ?, ?)`},
	} {
		p.st.query = p.sql
	}
	return s
}

// all lists every statement of the set, for Close.
func (s *stmtSet) all() []*lazyStmt {
	l := []*lazyStmt{&s.insert, &s.keySeq, &s.delSeq, &s.delKey, &s.getSeq, &s.getKey, &s.putMsgID, &s.getMsgID, &s.getDelID, &s.putDelID, &s.beginStmt, &s.commitStmt, &s.dataVer}
	for i := range insertRuns {
		l = append(l, &s.insertMany[0][i], &s.insertMany[1][i], &s.delMany[i])
	}
	return l
}

// The schema versions, a file's PRAGMA user_version:
//
//   - 0: a new file, or one from before the versions, holding any part
//     of fullSchema: it is run and the file stamped fullSchemaVersion.
//   - fullSchemaVersion: every b-tree of fullSchema (files made before
//     lazyTables).
//   - lazySchemaVersion: those of coreSchema, and the lazyTables made
//     since (s.lazy). Negative because builds from before it skip their
//     DDL at a version of 1 or more only: opened by one of them, such a
//     file gets its every table (and version 1) instead of failing on a
//     missing one.
//
// A version this build does not know (a newer build's) is opened as a
// lazy one, which is right for any file that has coreSchema.
const (
	fullSchemaVersion = 1
	lazySchemaVersion = -1
)

// ensureSchema creates what the file lacks unless its version says it has
// it, and returns the version: a stream reopened many times (the
// open-stream cache evicts and reopens) reads one header field instead of
// running the DDL each time. blank: the database is new (in memory: a
// new file is a copy of the template, which has its version), so it gets
// coreSchema only; any other file at 0 runs fullSchema once, as before
// lazy tables.
func (s *sqliteStream) ensureSchema(blank bool) (int, error) {
	ctx := context.Background()
	var v int
	if err := s.queryRowSQL(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("open stream: schema version: %w", err)
	}
	if v != 0 {
		// Any other version has coreSchema: init reads which lazy
		// tables it has, and ensureLazy makes the others.
		return v, nil
	}
	ddl, stamp := fullSchema, fullSchemaVersion
	if blank {
		ddl, stamp = coreSchema, lazySchemaVersion
	}
	if _, err := s.execSQL(ctx, ddl); err != nil {
		return 0, fmt.Errorf("open stream: schema: %w", err)
	}
	// The stamp only saves later opens the DDL: a file that cannot take it
	// (a read-only directory, a full disk) opens as before and is stamped
	// at a later open. A new file left at 0 runs fullSchema then, which
	// is right for any file.
	if _, err := s.execSQL(ctx, `PRAGMA user_version = `+strconv.Itoa(stamp)); err != nil {
		return 0, nil
	}
	return stamp, nil
}

// storedSeqMax is the highest seq recorded apart from the rows: the
// AUTOINCREMENT counter of an older file, or meta 'seq', whichever is
// higher (0 = none).
func (s *sqliteStream) storedSeqMax() (uint64, error) {
	ctx := context.Background()
	var auto, meta uint64
	if s.seqTable {
		err := s.queryRowSQL(ctx, `SELECT seq FROM sqlite_sequence WHERE name='messages'`).Scan(&auto)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("sequence: %w", err)
		}
	}
	err := s.queryRowSQL(ctx, `SELECT v FROM meta WHERE k='seq'`).Scan(&meta)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sequence: %w", err)
	}
	return max(auto, meta), nil
}

func (s *sqliteStream) applySync() error {
	if s.memory || s.pk != nil {
		return nil // a pack's streams set FULL around their commits (commit)
	}
	mode := "NORMAL"
	if s.cfg.Sync || s.syncAll {
		mode = "FULL"
	}
	if _, err := s.execSQL(context.Background(), "PRAGMA synchronous="+mode); err != nil {
		return fmt.Errorf("stream sync mode: %w", err)
	}
	return nil
}

// Close implements Stream.
func (s *sqliteStream) Close() error {
	s.keepTotals() // before the archive's backup, which then has them too
	if s.pk != nil {
		// The connection and the statements are the pack's; what the
		// handle holds is memory.
		return nil
	}
	var first error
	if s.arch != nil {
		first = s.arch.backup(s)
	}
	for _, l := range s.all() {
		if err := l.close(s.conn); err != nil && first == nil {
			first = err
		}
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := s.db.Close(); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return fmt.Errorf("close stream: %w", first)
	}
	return nil
}

// Remove implements Storage. The archive copy goes first: were the local
// files removed and the copy not, the next open would restore the stream
// from it. The local -wal, -shm and -journal go before the database file,
// because a stale WAL left next to a database created later at the same
// path would be replayed into it. The caller closed the stream with Close
// as its file's last connection (the server's drop waits for every other
// close first), which checkpointed the WAL into the database, so losing it
// loses nothing (a quick close, CloseQuick, would have left it holding
// commits). A failure
// part-way leaves a stream that still exists (emptied, when the server
// removed its messages first) and a repeated Remove finishes the job.
func (st *SQLite) Remove(scope, name string) error {
	if st.dir == "" {
		return persist.Errorf(persist.CodeBadRequest, "this server has no data directory: only ephemeral streams (%s: true)", persist.HdrEphemeral)
	}
	p, err := StreamPath(st.dir, scope, name)
	if err != nil {
		return err
	}
	if st.archive != "" {
		ap, err := StreamPath(st.archive, scope, name)
		if err != nil {
			return err
		}
		if err := removeIfExists(ap); err != nil {
			return fmt.Errorf("remove stream: archive copy: %w", classifyDisk(err))
		}
		syncDir(filepath.Dir(ap))
	}
	for _, f := range []string{p + "-wal", p + "-shm", p + "-journal", p} {
		if err := removeIfExists(f); err != nil {
			return fmt.Errorf("remove stream: %w", classifyDisk(err))
		}
	}
	syncDir(filepath.Dir(p))
	if st.archive == "" {
		if err := st.removePacked(scope, name); err != nil {
			return fmt.Errorf("remove stream: %w", classifyDisk(err))
		}
	}
	return nil
}

// removeIfExists removes the file p; one that is not there is no error.
func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
