package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// Packs keep many streams in one SQLite file. A stream with a file of its
// own costs an open(2) of two or three files, SQLite's schema load and a
// connection (about 180 KiB) each time the open-stream cache brings it
// back, and two or three descriptors while it is open: past the cache's
// cap, a server whose writes go to random streams among tens of thousands
// spends nearly all its time opening and closing them
// (docs/benchmarks.md, "Many streams"). In a pack, a stream is rows of a
// few shared tables keyed by its id (sid): opening it is a lookup on a
// connection that is already open, it holds no descriptor, and the
// commits of every stream of a pack go to one write-ahead log.
//
// A pack is one of SQLiteConfig.Packs files under Dir/.packs; a stream's
// pack is a hash of its scope and name, so the count is fixed when the
// directory gets its first pack (Dir/.packs/count) and never changes. A
// stream that has a file of its own keeps it (the file is looked at
// first), so a data directory can gain packs at any time; new streams go
// to packs while SQLiteConfig.Packs is set, and once a directory has
// packs, streams are looked up in them whatever the setting, so none is
// lost to a server started without it.
//
// The stream code is the same as a file's (sqliteStream): its statements
// are rewritten for the pack's tables (packSQL), bind the stream's id
// first, and run on the pack's one connection under the pack's lock, held
// by each call of a stream in the pack (packStream). What a pack does not
// do: an archive copy (Archive and Packs exclude each other), sharing the
// directory with a second server (the pack's file is
// opened with locking_mode=EXCLUSIVE, as SQLiteConfig.Exclusive does for
// stream files), a quick close or a compaction (nothing to close).

// packDirName is the directory of the packs under Dir: not a valid scope,
// so the walk of the scopes never takes it for one.
const packDirName = ".packs"

// packCountFile holds the number of packs of the directory.
const packCountFile = "count"

// MaxPacks bounds SQLiteConfig.Packs: each pack is a connection and two
// descriptors held for the storage's life.
const MaxPacks = 256

// packSchema is every table of a pack. A stream's rows are together in
// each b-tree (its sid first in every key), so its reads and its writes
// touch its own pages; messages is WITHOUT ROWID to be keyed so.
const packSchema = `
CREATE TABLE IF NOT EXISTS streams(
	sid   INTEGER PRIMARY KEY,
	scope TEXT NOT NULL,
	name  TEXT NOT NULL,
	UNIQUE(scope, name)
);
CREATE TABLE IF NOT EXISTS messages(
	sid     INTEGER NOT NULL,
	seq     INTEGER NOT NULL,
	key     TEXT,
	time    INTEGER NOT NULL,
	headers BLOB,
	enc     INTEGER NOT NULL DEFAULT 0,
	raw     BLOB,
	size    INTEGER NOT NULL,
	ttl     INTEGER,
	expires INTEGER,
	PRIMARY KEY(sid, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS messages_key ON messages(sid, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_expires ON messages(sid, expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta(sid INTEGER NOT NULL, k TEXT NOT NULL, v BLOB, PRIMARY KEY(sid, k)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS msgids(sid INTEGER NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, time INTEGER NOT NULL, PRIMARY KEY(sid, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS msgids_time ON msgids(sid, time);
CREATE TABLE IF NOT EXISTS delids(sid INTEGER NOT NULL, id TEXT NOT NULL, seqs BLOB NOT NULL, time INTEGER NOT NULL, PRIMARY KEY(sid, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS delids_time ON delids(sid, time);
-- A stream's kept totals (totals.go) are dropped by its first write
-- transaction instead (begin): a trigger per deleted row cost every keyed
-- set 10-15 us.
DROP TRIGGER IF EXISTS totals_stale_delete;
DROP TRIGGER IF EXISTS totals_stale_update;
`

var (
	packFromRE   = regexp.MustCompile(`\bFROM (messages|meta|msgids|delids)\b( WHERE )?`)
	packInsertRE = regexp.MustCompile(`\bINTO (messages|meta|msgids|delids)\(`)
	packTupleRE  = regexp.MustCompile(`(VALUES|\),) ?\(`)
	packQueries  sync.Map // query -> packQuery
)

type packQuery struct {
	q   string
	sid bool
}

// packSQL is query, written for a stream's own file, rewritten for a
// pack: every table a stream has is qualified by the stream's id, bound
// as ?1 (so it must be the first parameter in the text, which every
// statement of the store satisfies: a table's name comes before any of
// its conditions). sid reports whether the result binds it. A statement
// naming no table of a stream (BEGIN, COMMIT, a PRAGMA) is returned as it
// is, and so is one written in the pack's form already (a multi-row
// INSERT whose columns start with sid: insertStmt), which binds it. A
// WHERE clause gets the id as its first term, joined by AND: the store's
// conditions use no OR, which would bind looser than the AND.
// TestPackSameAsFiles runs every statement of the store both ways.
func packSQL(query string) (q string, sid bool) {
	if v, ok := packQueries.Load(query); ok {
		pq := v.(packQuery)
		return pq.q, pq.sid
	}
	q = packFromRE.ReplaceAllStringFunc(query, func(m string) string {
		sub := packFromRE.FindStringSubmatch(m)
		if sub[2] != "" {
			return "FROM " + sub[1] + " WHERE sid=?1 AND "
		}
		return "FROM " + sub[1] + " WHERE sid=?1"
	})
	withSID := false
	if loc := packInsertRE.FindStringIndex(q); loc != nil && strings.HasPrefix(q[loc[1]:], "sid, ") {
		// Written in the pack's form already (insertStmt).
		withSID = true
	} else if loc != nil {
		q = q[:loc[1]] + "sid, " + q[loc[1]:]
		head, tail := q[:loc[1]], q[loc[1]:]
		if i := strings.Index(tail, "VALUES"); i >= 0 {
			// Each row's tuple binds the id first.
			end := len(tail)
			if j := strings.Index(tail, " RETURNING"); j > i {
				end = j
			}
			vals := packTupleRE.ReplaceAllString(tail[i:end], "$1(?1, ")
			tail = tail[:i] + vals + tail[end:]
		}
		q = head + tail
	}
	pq := packQuery{q: q, sid: withSID || q != query}
	packQueries.Store(query, pq)
	return pq.q, pq.sid
}

// execSQL, querySQL and queryRowSQL run an ad-hoc statement of the stream
// as its connection's ExecContext, QueryContext and QueryRowContext do. In
// a pack they run the statement rewritten for it (packSQL), prepared once
// and kept by the pack (pack.prepared): its streams open and close far
// more often than a file's connection does, and compiling a statement
// costs more than running it on a small stream.
func (s *sqliteStream) execSQL(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.pk == nil {
		return s.conn.ExecContext(ctx, q, args...)
	}
	st, args, err := s.pk.prepared(ctx, q, s.sid, args)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *sqliteStream) querySQL(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s.pk == nil {
		return s.conn.QueryContext(ctx, q, args...)
	}
	st, args, err := s.pk.prepared(ctx, q, s.sid, args)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *sqliteStream) queryRowSQL(ctx context.Context, q string, args ...any) rowScanner {
	if s.pk == nil {
		return s.conn.QueryRowContext(ctx, q, args...)
	}
	st, args, err := s.pk.prepared(ctx, q, s.sid, args)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row whose query failed before it ran.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// prepared returns the pack's statement for query (rewritten by packSQL),
// preparing it on first use, and args with the stream's id first when the
// statement binds it. The caller holds p.mu. Statements whose text is
// built per call (a PRAGMA with a number) are few and kept too: their
// texts come from a small set.
func (p *pack) prepared(ctx context.Context, query string, sid int64, args []any) (*sql.Stmt, []any, error) {
	q, withSID := packSQL(query)
	if withSID {
		args = append([]any{sid}, args...)
	}
	if st := p.stmts[query]; st != nil {
		return st, args, nil
	}
	st, err := p.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[query] = st
	return st, args, nil
}

// pack is one pack file: its one connection, the statements of its
// streams, and the lock each call of one of its streams holds.
type pack struct {
	mu   sync.Mutex
	cur  int64 // the sid of the stream holding mu: what the statements bind first
	db   *sql.DB
	conn *sql.Conn
	st   *stmtSet
	path string
	// stmts are the ad-hoc statements of its streams, prepared once
	// (prepared); st the statements they share by name.
	stmts map[string]*sql.Stmt
	// sids are the ids of the streams looked up (remember).
	sids map[string]int64
	// handles counts the open handles of each stream (an evicted one may
	// still be closing when the stream is opened again): only the last
	// keeps its totals (keepTotals).
	handles map[int64]int
	// baseFull: the connection's own mode is synchronous=FULL (the
	// storage that opened it has Sync), so no transaction switches it.
	baseFull bool
	// full: a stream's transaction made the connection synchronous=FULL
	// (packSyncBegin); the next end of a transaction puts NORMAL back.
	full bool
}

// openPack opens (creating if needed) the pack file at path.
func openPack(path string, full bool, busyMs int) (*pack, error) {
	mode := "NORMAL"
	if full {
		mode = "FULL"
	}
	dsn := fileURI(path) + "?_pragma=busy_timeout(" + strconv.Itoa(busyMs) + ")&_pragma=locking_mode(EXCLUSIVE)&_pragma=synchronous(" + mode + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open pack: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open pack: %w", err)
	}
	p := &pack{db: db, conn: conn, path: path, handles: map[int64]int{}, baseFull: full}
	p.st = newStmtSet(&p.cur)
	// auto_vacuum only takes on a file with no table yet; it lets a full
	// disk's streams give pages back (reserve.go), as a stream file's.
	for _, q := range []string{`PRAGMA page_size = ` + strconv.Itoa(newFilePageSize), `PRAGMA auto_vacuum = INCREMENTAL`, `PRAGMA journal_mode = WAL`, packSchema} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			p.close()
			return nil, fmt.Errorf("open pack %s: %w", filepath.Base(path), err)
		}
	}
	return p, nil
}

// close checkpoints the pack's log into its file and closes it.
func (p *pack) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for _, l := range p.st.all() {
		if err := l.close(p.conn); err != nil && first == nil {
			first = err
		}
	}
	for q, st := range p.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(p.stmts, q)
	}
	if err := p.conn.Close(); err != nil && first == nil {
		first = err
	}
	if err := p.db.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// lookup finds the sid of scope/name, creating the stream's row when
// create; found is false when there is none (and create is not set). The
// caller holds p.mu.
func (p *pack) lookup(scope, name string, create bool) (sid int64, found bool, err error) {
	ctx := context.Background()
	k := scope + "\x00" + name
	if sid, ok := p.sids[k]; ok {
		return sid, true, nil
	}
	st, _, err := p.prepared(ctx, `SELECT sid FROM streams WHERE scope = ? AND name = ?`, 0, nil)
	if err == nil {
		err = st.QueryRowContext(ctx, scope, name).Scan(&sid)
	}
	switch {
	case err == nil:
		p.remember(k, sid)
		return sid, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, false, fmt.Errorf("pack: look up stream: %w", err)
	case !create:
		return 0, false, nil
	}
	res, err := p.conn.ExecContext(ctx, `INSERT INTO streams(scope, name) VALUES(?, ?)`, scope, name)
	if err != nil {
		return 0, false, fmt.Errorf("pack: add stream: %w", err)
	}
	if sid, err = res.LastInsertId(); err != nil {
		return 0, false, fmt.Errorf("pack: add stream: %w", err)
	}
	p.remember(k, sid)
	return sid, true, nil
}

// packSidsMax bounds the ids a pack remembers (about 100 bytes each): past
// it the map starts over, and lookups query the streams table again.
const packSidsMax = 1 << 18

// remember keeps scope/name's sid (k is lookup's key): the server asks
// whether a stream exists around every open, and only this connection
// writes the pack (it is exclusive), so what it learnt stays true until
// remove. The caller holds p.mu.
func (p *pack) remember(k string, sid int64) {
	if p.sids == nil || len(p.sids) >= packSidsMax {
		p.sids = map[string]int64{}
	}
	p.sids[k] = sid
}

// remove deletes every row of the stream sid, in one transaction. The
// caller holds p.mu.
func (p *pack) remove(sid int64) (err error) {
	ctx := context.Background()
	if _, err := p.conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("pack: remove stream: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = p.conn.ExecContext(ctx, `ROLLBACK`)
		}
	}()
	for _, t := range []string{"messages", "meta", "msgids", "delids", "streams"} {
		if _, err := p.conn.ExecContext(ctx, `DELETE FROM `+t+` WHERE sid = ?`, sid); err != nil {
			return fmt.Errorf("pack: remove stream: %s: %w", t, err)
		}
	}
	if _, err := p.conn.ExecContext(ctx, `COMMIT`); err != nil {
		return fmt.Errorf("pack: remove stream: %w", err)
	}
	return nil
}

// packSet is the packs of a data directory, opened on first use. The
// storages of one process on the same directory share it (packSets): the
// servers of `up --servers N` each have a storage on one directory, and a
// pack's file is one connection's (exclusive).
type packSet struct {
	mu     sync.Mutex
	n      int  // the directory's pack count; 0 = none (yet)
	looked bool // n was read from the directory (or made)
	packs  []*pack
	refs   int // storages holding it (under packSets.mu)
	key    string
}

// packSets are the pack sets of the process, by data directory.
var packSets = struct {
	sync.Mutex
	m map[string]*packSet
}{m: map[string]*packSet{}}

// packSet returns the storage's pack set, taking a reference to the
// directory's on first use (Close gives it back).
func (st *SQLite) packSet() *packSet {
	st.pkMu.Lock()
	defer st.pkMu.Unlock()
	if st.pk != nil {
		return st.pk
	}
	key := st.dir
	if abs, err := filepath.Abs(st.dir); err == nil {
		key = abs
	}
	packSets.Lock()
	ps := packSets.m[key]
	if ps == nil {
		ps = &packSet{key: key}
		packSets.m[key] = ps
	}
	ps.refs++
	packSets.Unlock()
	st.pk = ps
	return ps
}

// packDir is where the packs of the storage live.
func (st *SQLite) packDir() string { return filepath.Join(st.dir, packDirName) }

// PackCount returns the number of packs of the data directory, making the
// directory's packs first when SQLiteConfig.Packs asks for them and it has
// none: 0 when it has none and none are asked for. A directory whose packs
// number other than SQLiteConfig.Packs is an error: a stream's pack is a
// hash modulo the count, so the count cannot change.
func (st *SQLite) PackCount() (int, error) {
	if st.dir == "" {
		return 0, nil
	}
	ps := st.packSet()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return st.packCountLocked(ps)
}

func (st *SQLite) packCountLocked(ps *packSet) (int, error) {
	if st.packs < 0 || st.packs > MaxPacks {
		return 0, fmt.Errorf("packs: %d: want 0 to %d", st.packs, MaxPacks)
	}
	if ps.looked && (ps.n > 0 || st.packs == 0) {
		if st.packs != 0 && st.packs != ps.n {
			return 0, persist.Errorf(persist.CodeBadRequest, "data directory %s has %d packs: a stream's pack depends on their number, so it cannot become %d", st.dir, ps.n, st.packs)
		}
		return ps.n, nil
	}
	cf := filepath.Join(st.packDir(), packCountFile)
	b, err := os.ReadFile(cf)
	switch {
	case err == nil:
		n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr != nil || n < 1 || n > MaxPacks {
			return 0, fmt.Errorf("packs: %s holds %q: want a number from 1 to %d", cf, b, MaxPacks)
		}
		if st.packs != 0 && st.packs != n {
			return 0, persist.Errorf(persist.CodeBadRequest, "data directory %s has %d packs: a stream's pack depends on their number, so it cannot become %d", st.dir, n, st.packs)
		}
		ps.n = n
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("packs: %w", err)
	case st.packs > 0:
		if err := writePackCount(st.packDir(), st.packs); err != nil {
			return 0, classifyDisk(err)
		}
		ps.n = st.packs
	}
	ps.packs = make([]*pack, ps.n)
	ps.looked = true
	return ps.n, nil
}

// writePackCount makes dir and its count file, which appears whole or not
// at all (written aside, synced, renamed).
func writePackCount(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("packs: %w", err)
	}
	tmp := filepath.Join(dir, packCountFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("packs: %w", err)
	}
	_, err = f.WriteString(strconv.Itoa(n) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, packCountFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("packs: %w", err)
	}
	syncDir(dir)
	return nil
}

// packOf returns the pack of scope/name, opening it if needed; nil when
// the directory has no packs.
func (st *SQLite) packOf(scope, name string) (*pack, error) {
	if st.dir == "" {
		return nil, nil
	}
	ps := st.packSet()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n, err := st.packCountLocked(ps)
	if err != nil || n == 0 {
		return nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return st.packLocked(ps, int(h.Sum32()%uint32(n)))
}

// packLocked returns pack i of ps, opening it if needed; the caller holds
// ps.mu.
func (st *SQLite) packLocked(ps *packSet, i int) (*pack, error) {
	if p := ps.packs[i]; p != nil {
		return p, nil
	}
	p, err := openPack(filepath.Join(st.packDir(), fmt.Sprintf("pack-%03d.db", i)), st.sync, st.busyMs)
	if err != nil {
		return nil, err
	}
	ps.packs[i] = p
	return p, nil
}

// openPacked opens scope/name in its pack when it is there, or creates it
// there when create and the storage puts new streams in packs; ok is false
// when the stream is not (to be) in a pack: it has a file of its own
// (p), or the directory has no packs, or it does not exist and is not to
// be created in one.
func (st *SQLite) openPacked(scope, name, p string, create bool, now time.Time) (_ Stream, ok bool, _ error) {
	if _, err := os.Lstat(p); err == nil {
		return nil, false, nil // a file of its own
	}
	pk, err := st.packOf(scope, name)
	if err != nil || pk == nil {
		return nil, false, err
	}
	pk.mu.Lock()
	defer pk.mu.Unlock()
	sid, found, err := pk.lookup(scope, name, false)
	if err != nil {
		return nil, false, err
	}
	created := false
	if !found {
		if !create || st.packs == 0 {
			return nil, false, nil
		}
		// A new stream adds rows: not while the disk is full.
		st.space.ensure()
		if err := st.space.admit(); err != nil {
			return nil, false, err
		}
		if sid, _, err = pk.lookup(scope, name, true); err != nil {
			return nil, false, err
		}
		created = true
	}
	s := &sqliteStream{
		conn: pk.conn, stmtSet: pk.st, pk: pk, sid: sid,
		scope: scope, name: name, alone: true,
		space: st.space, syncAll: st.sync, msgids: map[string]dedupEntry{},
	}
	pk.cur = sid
	if err := s.init(now, openHow{}); err != nil {
		if created {
			// As a file an open made is removed when it fails: a
			// stream row left would make the stream exist, empty.
			if rerr := pk.remove(sid); rerr == nil {
				delete(pk.sids, scope+"\x00"+name)
			}
		}
		return nil, false, err
	}
	s.opened = true
	pk.handles[sid]++
	return &packStream{s: s}, true, nil
}

// hasPacked reports whether scope/name is a stream of a pack.
func (st *SQLite) hasPacked(scope, name string) (bool, error) {
	pk, err := st.packOf(scope, name)
	if err != nil || pk == nil {
		return false, err
	}
	pk.mu.Lock()
	defer pk.mu.Unlock()
	_, found, err := pk.lookup(scope, name, false)
	return found, err
}

// removePacked deletes scope/name from its pack, if it is there.
func (st *SQLite) removePacked(scope, name string) error {
	pk, err := st.packOf(scope, name)
	if err != nil || pk == nil {
		return err
	}
	pk.mu.Lock()
	defer pk.mu.Unlock()
	sid, found, err := pk.lookup(scope, name, false)
	if err != nil || !found {
		return err
	}
	if err := pk.remove(sid); err != nil {
		return err
	}
	delete(pk.sids, scope+"\x00"+name)
	return nil
}

// packScopeCount counts the streams of scope in every pack.
func (st *SQLite) packScopeCount(scope string) (int, error) {
	total := 0
	err := st.eachPack(func(pk *pack) error {
		var n int
		err := pk.conn.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM streams WHERE scope = ?`, scope).Scan(&n)
		total += n
		return err
	})
	return total, err
}

// packScopes calls fn with each scope that has streams in a pack and no
// directory of its own (Scopes lists those), a batch of scopes at a time,
// with no pack locked while fn runs.
func (st *SQLite) packScopes(ctx context.Context, fn func(scope string) error) error {
	var scopes []string
	last := ""
	for {
		scopes = scopes[:0]
		seen := map[string]bool{}
		err := st.eachPack(func(pk *pack) error {
			rows, err := pk.conn.QueryContext(ctx, `SELECT DISTINCT scope FROM streams WHERE scope > ? ORDER BY scope LIMIT ?`, last, scanBatch)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var sc string
				if err := rows.Scan(&sc); err != nil {
					return err
				}
				if !seen[sc] {
					seen[sc] = true
					scopes = append(scopes, sc)
				}
			}
			return rows.Err()
		})
		if err != nil {
			return fmt.Errorf("packs: scopes: %w", err)
		}
		if len(scopes) == 0 {
			return nil
		}
		// Only the batch's smallest scanBatch are surely complete below
		// the next start: each pack gave its first scanBatch past last.
		slices.Sort(scopes)
		if len(scopes) > scanBatch {
			scopes = scopes[:scanBatch]
		}
		for _, sc := range scopes {
			if err := ctx.Err(); err != nil {
				return err
			}
			if fi, err := os.Stat(filepath.Join(st.dir, sc)); err == nil && fi.IsDir() {
				continue // listed with the directories
			}
			if err := fn(sc); err != nil {
				return err
			}
		}
		last = scopes[len(scopes)-1]
	}
}

// eachPack calls fn with each pack of the directory, locked.
func (st *SQLite) eachPack(fn func(*pack) error) error {
	n, err := st.PackCount()
	if err != nil || n == 0 {
		return err
	}
	ps := st.packSet()
	for i := range n {
		ps.mu.Lock()
		pk, err := st.packLocked(ps, i)
		ps.mu.Unlock()
		if err != nil {
			return err
		}
		pk.mu.Lock()
		err = fn(pk)
		pk.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// closePacks gives back the storage's reference to the directory's packs;
// the last storage of the process to do so closes them.
func (st *SQLite) closePacks() error {
	st.pkMu.Lock()
	ps := st.pk
	st.pk = nil
	st.pkMu.Unlock()
	if ps == nil {
		return nil
	}
	packSets.Lock()
	ps.refs--
	last := ps.refs == 0
	if last {
		delete(packSets.m, ps.key)
	}
	packSets.Unlock()
	if !last {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var first error
	for i, p := range ps.packs {
		if p == nil {
			continue
		}
		if err := p.close(); err != nil && first == nil {
			first = fmt.Errorf("close pack: %w", err)
		}
		ps.packs[i] = nil
	}
	ps.looked = false
	return first
}

// packStream is a stream in a pack: each call holds the pack's lock, which
// makes the pack's connection and statements the stream's for its time.
// What a stream keeps in memory (Bytes, Config, NeedsExpiry) is read
// without it. It has none of a stream file's extras (QuickCloser,
// Checkpointer): the pack's log is checkpointed by SQLite.
type packStream struct{ s *sqliteStream }

var _ Stream = (*packStream)(nil)

// InPack reports whether s is a stream of a pack, which holds no file
// descriptor of its own (for the server's count of them).
func InPack(s Stream) bool {
	_, ok := s.(*packStream)
	return ok
}

func (p *packStream) lock() func() {
	pk := p.s.pk
	pk.mu.Lock()
	pk.cur = p.s.sid
	return pk.mu.Unlock
}

func (p *packStream) Write(ops []WriteOp, now time.Time) ([]WriteResult, []Change, error) {
	defer p.lock()()
	return p.s.Write(ops, now)
}

func (p *packStream) Get(seq uint64) (*persist.Frame, error) {
	defer p.lock()()
	return p.s.Get(seq)
}

func (p *packStream) GetKey(key string) (*persist.Frame, error) {
	defer p.lock()()
	return p.s.GetKey(key)
}

func (p *packStream) GetAll(start, end uint64, limit int, fn func(*persist.Frame) error) (uint64, error) {
	defer p.lock()()
	return p.s.GetAll(start, end, limit, fn)
}

func (p *packStream) Delete(d persist.Delete, now time.Time) (DeleteResult, []Change, error) {
	defer p.lock()()
	return p.s.Delete(d, now)
}

func (p *packStream) Keys(maxJSON int) ([]string, error) {
	defer p.lock()()
	return p.s.Keys(maxJSON)
}

func (p *packStream) Inventory() (persist.Inventory, error) {
	defer p.lock()()
	return p.s.Inventory()
}

func (p *packStream) Revalidate() error { return nil } // alone on its rows: the pack is exclusive

func (p *packStream) SetConfig(c persist.Config, now time.Time) (persist.Config, []Change, error) {
	defer p.lock()()
	return p.s.SetConfig(c, now)
}

func (p *packStream) Expire(now time.Time) ([]Change, error) {
	defer p.lock()()
	return p.s.Expire(now)
}

func (p *packStream) Bytes() int64            { return p.s.Bytes() }
func (p *packStream) Config() persist.Config  { return p.s.Config() }
func (p *packStream) OpenedChanges() []Change { return p.s.OpenedChanges() }
func (p *packStream) NeedsExpiry() bool       { return p.s.NeedsExpiry() }

// Close keeps a large stream's totals in the pack (totals.go); nothing
// else of the stream is open.
func (p *packStream) Close() error {
	defer p.lock()()
	err := p.s.Close()
	pk := p.s.pk
	if pk.handles[p.s.sid]--; pk.handles[p.s.sid] <= 0 {
		delete(pk.handles, p.s.sid)
	}
	return err
}
