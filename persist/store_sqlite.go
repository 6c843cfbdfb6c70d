package persist

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/switchyard-dev/switchyard/bus"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// compressMin is the value size above which values are stored zstd-compressed
// (when that makes them smaller).
const compressMin = 1024

// Value encodings in the enc column.
const (
	encRaw  = 0
	encZstd = 1
)

// busyTimeoutMs lets a stream reopened while its previous handle is still
// closing (checkpointing) wait for the lock instead of failing.
const busyTimeoutMs = 5000

const schema = `
CREATE TABLE IF NOT EXISTS messages(
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
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
CREATE INDEX IF NOT EXISTS messages_expires ON messages(expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS msgids(id TEXT PRIMARY KEY, seq INTEGER NOT NULL, time INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS msgids_time ON msgids(time);
`

const msgCols = `seq, key, time, headers, enc, raw, ttl`

var (
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	zstdOnce sync.Once
	zstdErr  error
)

// codecs returns the shared zstd encoder and decoder; EncodeAll and DecodeAll
// are safe for concurrent use.
func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zenc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if zstdErr != nil {
			return
		}
		zdec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
	})
	return zenc, zdec, zstdErr
}

// sqliteStorage keeps each stream in its own SQLite file under dir, and
// ephemeral streams in private in-memory SQLite databases.
type sqliteStorage struct {
	dir     string // "" = ephemeral streams only
	archive string // "" = no archive (see archive.go)
}

var (
	_ Storage     = (*sqliteStorage)(nil)
	_ StreamStore = (*sqliteStream)(nil)
)

// newSQLiteStorage returns a storage rooted at dir ("" allows ephemeral
// streams only).
func newSQLiteStorage(dir string) *sqliteStorage { return &sqliteStorage{dir: dir} }

// Close implements Storage; open streams are closed by their owner.
func (st *sqliteStorage) Close() error { return nil }

// fileURI turns a path into a SQLite URI, escaping what URIs reserve.
func fileURI(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(filepath.ToSlash(p))
}

// Open implements Storage.
func (st *sqliteStorage) Open(scope, name string, ephemeral bool, now time.Time) (StreamStore, error) {
	var dsn string
	var arch *streamArchive
	if ephemeral {
		if !bus.ValidScope(scope) {
			return nil, Errorf(CodeBadRequest, "invalid scope %q", scope)
		}
		if err := validStreamName(name); err != nil {
			return nil, err
		}
		// A private in-memory database lives as long as its one connection.
		dsn = ":memory:"
	} else {
		if st.dir == "" {
			return nil, Errorf(CodeBadRequest, "this server has no data directory: only ephemeral streams (%s: true)", HdrEphemeral)
		}
		p, err := streamPath(st.dir, scope, name)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("open stream: %w", err)
		}
		if st.archive != "" {
			if arch, err = archiveStream(st.archive, scope, name, p); err != nil {
				return nil, err
			}
		}
		dsn = fileURI(p) + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(" + strconv.Itoa(busyTimeoutMs) + ")"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s := &sqliteStream{db: db, scope: scope, name: name, ephemeral: ephemeral, msgids: map[string]dedupEntry{}}
	if err := s.init(now); err != nil {
		s.Close()
		return nil, err
	}
	if arch != nil {
		if err := arch.baseline(context.Background(), s); err != nil {
			s.Close()
			return nil, err
		}
		s.arch = arch // set last: a stream that failed to open is not backed up
	}
	return s, nil
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
// in-memory totals so limits need no query per write.
type sqliteStream struct {
	db        *sql.DB
	conn      *sql.Conn
	scope     string
	name      string
	ephemeral bool

	cfg     Config
	count   int64  // messages
	bytes   int64  // sum of sizes
	lastSeq uint64 // highest seq ever assigned
	// lastTime is the time of the newest row. Writes never go below it, so
	// times never decrease along seq and age and rate queries can walk seq.
	lastTime int64
	ttlRows  int64 // rows with a TTL (an upper bound: expired rows are subtracted when seen)
	// dataVersion is PRAGMA data_version when the totals above were last
	// known right; another connection's commit changes it (store_sqlite_shared.go).
	dataVersion int64

	msgids    map[string]dedupEntry
	dedupFIFO []dedupItem // msgids in time order; pruned from the front

	arch *streamArchive // nil = not archived

	insert, keySeq, delSeq, delKey, getSeq, getKey, putMsgID *sql.Stmt
	beginStmt, commitStmt, dataVer                           *sql.Stmt
	// insertMany[keyed][i] is the multi-row INSERT of insertRuns[i] plain
	// rows, unkeyed or keyed, prepared on first use: one statement per run
	// of plain rows instead of one per row.
	insertMany [2][len(insertRuns)]*sql.Stmt
	// A run of plain rows waiting for insertMany: consecutive seqs from
	// runSeq, all at runTime, all keyed or all unkeyed, with these bound
	// values (runCols per row).
	runSeq   uint64
	runTime  int64
	runKeyed bool
	runVals  []any
	runKeys  map[string]struct{} // the keys in the run
	execArgs []any               // reused argument buffer of insertMany
}

// runCols is the number of bound values per row of a run.
func runCols(keyed bool) int {
	if keyed {
		return 3 // key, value, size
	}
	return 1 // value (size is its length)
}

// insertRuns are the row counts of the multi-row INSERT statements, largest
// first; a run of plain appends is cut greedily into them.
var insertRuns = [...]int{64, 16, 4}

func (s *sqliteStream) init(now time.Time) error {
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	s.conn = conn
	if _, err := conn.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("open stream: schema: %w", err)
	}
	// The stored name guards against two names sharing a file.
	var stored string
	err = conn.QueryRowContext(ctx, `SELECT v FROM meta WHERE k='name'`).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := conn.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES('name', ?), ('scope', ?)`, s.name, s.scope); err != nil {
			return fmt.Errorf("open stream: %w", err)
		}
	case err != nil:
		return fmt.Errorf("open stream: %w", err)
	case stored != s.name:
		return Errorf(CodeInternal, "stream file of %q is claimed by another name", s.name)
	}
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE((SELECT time FROM messages ORDER BY seq DESC LIMIT 1), 0)`).Scan(&s.lastTime); err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	s.cfg = DefaultConfig()
	var cfgJSON []byte
	err = conn.QueryRowContext(ctx, `SELECT v FROM meta WHERE k='config'`).Scan(&cfgJSON)
	if err == nil {
		if s.cfg, err = mergeConfig(DefaultConfig(), cfgJSON); err != nil {
			return fmt.Errorf("open stream: stored config: %w", err)
		}
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("open stream: %w", err)
	}
	if s.ephemeral {
		s.cfg = clampEphemeral(s.cfg)
	}
	if err := s.applySync(); err != nil {
		return err
	}
	// Read before the totals: a commit by another connection after this
	// makes the next write transaction reload them (reloadIfShared).
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&s.dataVersion); err != nil {
		return fmt.Errorf("open stream: data version: %w", err)
	}
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(MAX(seq), 0) FROM messages`).Scan(&s.count, &s.bytes, &s.lastSeq); err != nil {
		return fmt.Errorf("open stream: totals: %w", err)
	}
	// AUTOINCREMENT remembers the highest seq even after its row is gone.
	var seqMax uint64
	err = conn.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name='messages'`).Scan(&seqMax)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("open stream: sequence: %w", err)
	}
	s.lastSeq = max(s.lastSeq, seqMax)
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE expires IS NOT NULL`).Scan(&s.ttlRows); err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	rows, err := conn.QueryContext(ctx, `SELECT id, seq, time FROM msgids WHERE time > ? ORDER BY time`, now.Add(-DedupWindow).UnixMilli())
	if err != nil {
		return fmt.Errorf("open stream: msgids: %w", err)
	}
	for rows.Next() {
		var it dedupItem
		var e dedupEntry
		if err := rows.Scan(&it.id, &e.seq, &e.time); err != nil {
			rows.Close()
			return fmt.Errorf("open stream: msgids: %w", err)
		}
		it.time = e.time
		s.msgids[it.id] = e
		s.dedupFIFO = append(s.dedupFIFO, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open stream: msgids: %w", err)
	}
	for _, p := range []struct {
		st  **sql.Stmt
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
	} {
		if *p.st, err = conn.PrepareContext(ctx, p.sql); err != nil {
			return fmt.Errorf("open stream: prepare: %w", err)
		}
	}
	// Expire what aged out while the stream was closed.
	_, err = s.Expire(now)
	return err
}

func (s *sqliteStream) applySync() error {
	if s.ephemeral {
		return nil
	}
	mode := "NORMAL"
	if s.cfg.Sync {
		mode = "FULL"
	}
	if _, err := s.conn.ExecContext(context.Background(), "PRAGMA synchronous="+mode); err != nil {
		return fmt.Errorf("stream sync mode: %w", err)
	}
	return nil
}

// Close implements StreamStore.
func (s *sqliteStream) Close() error {
	var first error
	if s.arch != nil {
		first = s.arch.backup(s)
	}
	for _, st := range append([]*sql.Stmt{s.insert, s.keySeq, s.delSeq, s.delKey, s.getSeq, s.getKey, s.putMsgID, s.beginStmt, s.commitStmt, s.dataVer}, append(s.insertMany[0][:], s.insertMany[1][:]...)...) {
		if st != nil {
			if err := st.Close(); err != nil && first == nil {
				first = err
			}
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

// txState is what a rollback must restore of the in-memory state.
type txState struct {
	count, bytes, ttlRows int64
	lastSeq               uint64
	lastTime              int64
	fifoLen               int
}

func (s *sqliteStream) begin() (txState, error) {
	if _, err := s.beginStmt.Exec(); err != nil {
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	if err := s.reloadIfShared(); err != nil {
		_, _ = s.conn.ExecContext(context.Background(), "ROLLBACK")
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	return txState{count: s.count, bytes: s.bytes, ttlRows: s.ttlRows, lastSeq: s.lastSeq, lastTime: s.lastTime, fifoLen: len(s.dedupFIFO)}, nil
}

func (s *sqliteStream) commit() error {
	if _, err := s.commitStmt.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// rollback undoes the transaction and the in-memory changes made since st.
func (s *sqliteStream) rollback(st txState) {
	_, _ = s.conn.ExecContext(context.Background(), "ROLLBACK")
	s.count, s.bytes, s.ttlRows, s.lastSeq, s.lastTime = st.count, st.bytes, st.ttlRows, st.lastSeq, st.lastTime
	for _, it := range s.dedupFIFO[st.fifoLen:] {
		delete(s.msgids, it.id)
	}
	s.dedupFIFO = s.dedupFIFO[:st.fifoLen]
}

// NeedsExpiry implements StreamStore.
func (s *sqliteStream) NeedsExpiry() bool {
	return s.cfg.MaxAge > 0 || s.ttlRows > 0 || len(s.dedupFIFO) > 0
}

// Write implements StreamStore.
func (s *sqliteStream) Write(ops []WriteOp, now time.Time) ([]WriteResult, []Change, error) {
	// A clock stepped back must not make times decrease along seq.
	nowMs := max(now.UnixMilli(), s.lastTime)
	st, err := s.begin()
	if err != nil {
		return nil, nil, err
	}
	res, changes, err := s.write(ops, nowMs)
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		return nil, nil, fmt.Errorf("write: %w", err)
	}
	return res, changes, nil
}

func (s *sqliteStream) write(ops []WriteOp, nowMs int64) ([]WriteResult, []Change, error) {
	changes, err := s.expire(nowMs)
	if err != nil {
		return nil, nil, err
	}
	var rateMsgs, rateBytes int64
	if s.cfg.MaxMsgsPerSecond >= 0 || s.cfg.MaxBytesPerSecond >= 0 {
		// Times never decrease along seq (see lastTime), so the rows of the
		// last second are a suffix of the table: scan back to its start
		// instead of keeping a time index every write would pay for.
		if err := s.conn.QueryRowContext(context.Background(), `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages WHERE seq > COALESCE((SELECT seq FROM messages WHERE time <= ? ORDER BY seq DESC LIMIT 1), 0)`, nowMs-1000).Scan(&rateMsgs, &rateBytes); err != nil {
			return nil, nil, fmt.Errorf("rate: %w", err)
		}
	}
	results := make([]WriteResult, len(ops))
	// One allocation for every stored message the changes point at.
	msgs := make([]Message, 0, len(ops))
	changes = slices.Grow(changes, len(ops)+1)
	// A write that failed midway may have left rows buffered.
	s.resetRun()
	for i := range ops {
		op := &ops[i]
		r := &results[i]
		if op.MsgID != "" {
			if e, ok := s.msgids[op.MsgID]; ok && nowMs-e.time < DedupWindow.Milliseconds() {
				*r = WriteResult{Seq: e.seq, Time: e.time, Dup: true}
				continue
			}
		}
		if op.TTL != 0 && !s.cfg.AllowMsgTTL {
			r.Err = Errorf(CodeBadRequest, "this stream does not allow per-message TTL (config allow_msg_ttl)")
			continue
		}
		hj, err := encodeHeaders(op.Headers)
		if err != nil {
			r.Err = Errorf(CodeBadRequest, "%v", err)
			continue
		}
		size := messageSize(hj, op.Value, op.Key)
		if over(size, s.cfg.MaxMsgSize) {
			r.Err = Errorf(CodeTooLarge, "message is %d bytes, over max_msg_size %d", size, s.cfg.MaxMsgSize)
			continue
		}
		if over(size, s.cfg.MaxBytes) {
			r.Err = Errorf(CodeReject, "message is %d bytes, over the stream's max_bytes %d", size, s.cfg.MaxBytes)
			continue
		}
		var oldSeq uint64
		var oldSize int64
		found := false
		// The lookup is needed only to decide (compare-and-set, discard new);
		// a plain keyed replace finds and removes the old row in one DELETE,
		// below, once every check has passed.
		if _, ok := s.runKeys[op.Key]; ok && op.Key != "" {
			// The key's latest row is still in the run: insert it before
			// looking the key up or replacing it.
			if err := s.flushInserts(); err != nil {
				return nil, nil, err
			}
		}
		lookup := op.Key != "" && (op.PrevSeq != nil || s.cfg.DiscardPolicy == DiscardNew)
		if lookup {
			err := s.keySeq.QueryRow(op.Key).Scan(&oldSeq, &oldSize)
			switch {
			case err == nil:
				found = true
			case !errors.Is(err, sql.ErrNoRows):
				return nil, nil, fmt.Errorf("key lookup: %w", err)
			}
		}
		if op.PrevSeq != nil {
			if *op.PrevSeq == 0 && found {
				r.Err = Errorf(CodeWrongLastSequence, "key %q exists at seq %d", op.Key, oldSeq)
				continue
			}
			if *op.PrevSeq != 0 && (!found || oldSeq != *op.PrevSeq) {
				r.Err = Errorf(CodeWrongLastSequence, "key %q is at seq %d, not %d", op.Key, oldSeq, *op.PrevSeq)
				continue
			}
		}
		if s.cfg.MaxMsgsPerSecond >= 0 && rateMsgs+1 > s.cfg.MaxMsgsPerSecond {
			r.Err = Errorf(CodeReject, "over max_msgs_per_second %d", s.cfg.MaxMsgsPerSecond)
			continue
		}
		if s.cfg.MaxBytesPerSecond >= 0 && rateBytes+size > s.cfg.MaxBytesPerSecond {
			r.Err = Errorf(CodeReject, "over max_bytes_per_second %d", s.cfg.MaxBytesPerSecond)
			continue
		}
		if s.cfg.DiscardPolicy == DiscardNew {
			n, b := s.count+1, s.bytes+size
			if found {
				n, b = n-1, b-oldSize
			}
			if over(n, s.cfg.MaxMsgs) || over(b, s.cfg.MaxBytes) {
				r.Err = Errorf(CodeReject, "stream is full (max_msgs %d, max_bytes %d, discard_policy new)", s.cfg.MaxMsgs, s.cfg.MaxBytes)
				continue
			}
		}
		if op.Key != "" {
			// The run holds other keys only (see above), so this finds the
			// key's row if it has one.
			var sz int64
			var hadTTL bool
			err := s.delKey.QueryRow(op.Key).Scan(&oldSeq, &sz, &hadTTL)
			switch {
			case err == nil:
				s.removed(sz, hadTTL)
				changes = append(changes, Change{Op: ChangeDelete, Seqs: []uint64{oldSeq}})
			case !errors.Is(err, sql.ErrNoRows):
				return nil, nil, fmt.Errorf("replace key: %w", err)
			}
		}
		seq := s.lastSeq + 1
		enc, raw := encRaw, op.Value
		if len(raw) > compressMin {
			ze, _, err := codecs()
			if err != nil {
				return nil, nil, err
			}
			if c := ze.EncodeAll(raw, make([]byte, 0, len(raw)/2)); len(c) < len(raw) {
				enc, raw = encZstd, c
			}
		}
		var key, ttl, expires any
		if op.Key != "" {
			key = op.Key
		}
		if op.TTL > 0 {
			ttl, expires = op.TTL, nowMs+op.TTL
		}
		if raw == nil {
			raw = []byte{}
		}
		if hj == nil && op.TTL == 0 && enc == encRaw {
			// A plain row (no headers, no TTL, stored raw) joins the run,
			// inserted many rows per statement; a run is all keyed or all
			// unkeyed.
			keyed := op.Key != ""
			if len(s.runVals) > 0 && s.runKeyed != keyed {
				if err := s.flushInserts(); err != nil {
					return nil, nil, err
				}
			}
			if len(s.runVals) == 0 {
				s.runSeq, s.runTime, s.runKeyed = seq, nowMs, keyed
			}
			if keyed {
				if s.runKeys == nil {
					s.runKeys = map[string]struct{}{}
				}
				s.runKeys[op.Key] = struct{}{}
				s.runVals = append(s.runVals, op.Key, raw, size)
			} else {
				s.runVals = append(s.runVals, raw)
			}
			if len(s.runVals) == insertRuns[0]*runCols(keyed) {
				if err := s.flushInserts(); err != nil {
					return nil, nil, err
				}
			}
		} else {
			// Anything else ends the run first: the run's seqs stay consecutive.
			if err := s.flushInserts(); err != nil {
				return nil, nil, err
			}
			if _, err := s.insert.Exec(seq, key, nowMs, hj, enc, raw, size, ttl, expires); err != nil {
				return nil, nil, fmt.Errorf("insert: %w", err)
			}
		}
		s.lastSeq, s.lastTime = seq, nowMs
		s.count++
		s.bytes += size
		if op.TTL > 0 {
			s.ttlRows++
		}
		if op.MsgID != "" {
			if _, err := s.putMsgID.Exec(op.MsgID, seq, nowMs); err != nil {
				return nil, nil, fmt.Errorf("msgid: %w", err)
			}
			s.msgids[op.MsgID] = dedupEntry{seq: seq, time: nowMs}
			s.dedupFIFO = append(s.dedupFIFO, dedupItem{id: op.MsgID, time: nowMs})
		}
		rateMsgs++
		rateBytes += size
		*r = WriteResult{Seq: seq, Time: nowMs}
		msgs = append(msgs, Message{Seq: seq, Time: nowMs, Key: op.Key, Headers: op.Headers, TTL: op.TTL, Value: op.Value})
		changes = append(changes, Change{Op: ChangeSet, Msg: &msgs[len(msgs)-1]})
	}
	if err := s.flushInserts(); err != nil {
		return nil, nil, err
	}
	more, err := s.enforce()
	if err != nil {
		return nil, nil, err
	}
	return results, append(changes, more...), nil
}

// resetRun forgets the buffered plain rows.
func (s *sqliteStream) resetRun() {
	clear(s.runVals) // drop references to values
	s.runVals = s.runVals[:0]
	clear(s.runKeys)
	clear(s.execArgs)
	s.execArgs = s.execArgs[:0]
}

// flushInserts inserts the run of plain rows, cutting it greedily into the
// multi-row statements of insertRuns; fewer than the smallest run go one by
// one.
func (s *sqliteStream) flushInserts() error {
	defer s.resetRun()
	cols := runCols(s.runKeyed)
	vals, seq := s.runVals, s.runSeq
	for len(vals) > 0 {
		rows := len(vals) / cols
		i := 0
		for i < len(insertRuns) && insertRuns[i] > rows {
			i++
		}
		if i == len(insertRuns) {
			var key, raw, size any = nil, vals[0], nil
			if s.runKeyed {
				key, raw, size = vals[0], vals[1], vals[2]
			} else {
				size = len(raw.([]byte))
			}
			if _, err := s.insert.Exec(seq, key, s.runTime, nil, encRaw, raw, size, nil, nil); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
			vals, seq = vals[cols:], seq+1
			continue
		}
		st, err := s.insertStmt(s.runKeyed, i)
		if err != nil {
			return err
		}
		k := insertRuns[i]
		s.execArgs = append(append(s.execArgs[:0], seq, s.runTime), vals[:k*cols]...)
		if _, err := st.Exec(s.execArgs...); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		vals, seq = vals[k*cols:], seq+uint64(k)
	}
	return nil
}

// insertStmt returns the multi-row INSERT of insertRuns[i] plain rows. It
// binds the first seq (?1), the time (?2) and runCols values per row: the
// other columns of a plain row are constants or derived, which keeps the
// per-row binding cost low.
func (s *sqliteStream) insertStmt(keyed bool, i int) (*sql.Stmt, error) {
	ki := 0
	if keyed {
		ki = 1
	}
	if st := s.insertMany[ki][i]; st != nil {
		return st, nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO messages(seq, key, time, headers, enc, raw, size, ttl, expires) VALUES`)
	for r := range insertRuns[i] {
		if r > 0 {
			q.WriteByte(',')
		}
		if keyed {
			p := 3 + 3*r
			fmt.Fprintf(&q, `(?1+%d, ?%d, ?2, NULL, %d, ?%d, ?%d, NULL, NULL)`, r, p, encRaw, p+1, p+2)
		} else {
			p := 3 + r
			fmt.Fprintf(&q, `(?1+%d, NULL, ?2, NULL, %d, ?%d, length(?%d), NULL, NULL)`, r, encRaw, p, p)
		}
	}
	st, err := s.conn.PrepareContext(context.Background(), q.String())
	if err != nil {
		return nil, fmt.Errorf("prepare insert: %w", err)
	}
	s.insertMany[ki][i] = st
	return st, nil
}

// removed updates the totals for one deleted row.
func (s *sqliteStream) removed(size int64, hadTTL bool) {
	s.count--
	s.bytes -= size
	if hadTTL {
		s.ttlRows--
	}
}

// deleteWhere runs a DELETE ... RETURNING seq, size, expires IS NOT NULL and
// returns the removed seqs, ascending, updating the totals.
func (s *sqliteStream) deleteWhere(query string, args ...any) ([]uint64, error) {
	rows, err := s.conn.QueryContext(context.Background(), query+` RETURNING seq, size, expires IS NOT NULL`, args...)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for rows.Next() {
		var seq uint64
		var size int64
		var hadTTL bool
		if err := rows.Scan(&seq, &size, &hadTTL); err != nil {
			rows.Close()
			return nil, err
		}
		s.removed(size, hadTTL)
		seqs = append(seqs, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(seqs)
	return seqs, nil
}

// expire removes rows past max_age or their TTL (inside a transaction).
func (s *sqliteStream) expire(nowMs int64) ([]Change, error) {
	var changes []Change
	if s.cfg.MaxAge > 0 && s.count > 0 {
		// Expired rows are a prefix in seq order (times never decrease along seq).
		seqs, err := s.deleteWhere(`DELETE FROM messages WHERE seq < COALESCE((SELECT seq FROM messages WHERE time > ? ORDER BY seq LIMIT 1), 9223372036854775807)`, nowMs-s.cfg.MaxAge)
		if err != nil {
			return nil, fmt.Errorf("expire max_age: %w", err)
		}
		if len(seqs) > 0 {
			changes = append(changes, Change{Op: ChangeDelete, Seqs: seqs})
		}
	}
	if s.ttlRows > 0 {
		seqs, err := s.deleteWhere(`DELETE FROM messages WHERE expires IS NOT NULL AND expires <= ?`, nowMs)
		if err != nil {
			return nil, fmt.Errorf("expire ttl: %w", err)
		}
		if len(seqs) > 0 {
			changes = append(changes, Change{Op: ChangeDelete, Seqs: seqs})
		}
		if s.ttlRows < 0 {
			s.ttlRows = 0
		}
	}
	return changes, nil
}

// enforce deletes the oldest messages while max_msgs or max_bytes is exceeded.
func (s *sqliteStream) enforce() ([]Change, error) {
	var changes []Change
	if over(s.count, s.cfg.MaxMsgs) {
		seqs, err := s.deleteWhere(`DELETE FROM messages WHERE seq IN (SELECT seq FROM messages ORDER BY seq LIMIT ?)`, s.count-s.cfg.MaxMsgs)
		if err != nil {
			return nil, fmt.Errorf("enforce max_msgs: %w", err)
		}
		if len(seqs) > 0 {
			changes = append(changes, Change{Op: ChangeDelete, Seqs: seqs})
		}
	}
	if over(s.bytes, s.cfg.MaxBytes) {
		// Find the newest seq that must go: walk from the oldest until enough
		// bytes are freed.
		excess := s.bytes - s.cfg.MaxBytes
		rows, err := s.conn.QueryContext(context.Background(), `SELECT seq, size FROM messages ORDER BY seq`)
		if err != nil {
			return nil, fmt.Errorf("enforce max_bytes: %w", err)
		}
		var upTo uint64
		for excess > 0 && rows.Next() {
			var size int64
			if err := rows.Scan(&upTo, &size); err != nil {
				rows.Close()
				return nil, fmt.Errorf("enforce max_bytes: %w", err)
			}
			excess -= size
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("enforce max_bytes: %w", err)
		}
		seqs, err := s.deleteWhere(`DELETE FROM messages WHERE seq <= ?`, upTo)
		if err != nil {
			return nil, fmt.Errorf("enforce max_bytes: %w", err)
		}
		if len(seqs) > 0 {
			changes = append(changes, Change{Op: ChangeDelete, Seqs: seqs})
		}
	}
	return changes, nil
}

// Expire implements StreamStore.
func (s *sqliteStream) Expire(now time.Time) ([]Change, error) {
	nowMs := now.UnixMilli()
	cut := nowMs - DedupWindow.Milliseconds()
	n := 0
	for n < len(s.dedupFIFO) && s.dedupFIFO[n].time <= cut {
		it := s.dedupFIFO[n]
		if e, ok := s.msgids[it.id]; ok && e.time == it.time {
			delete(s.msgids, it.id)
		}
		n++
	}
	if s.cfg.MaxAge <= 0 && s.ttlRows <= 0 && n == 0 {
		return nil, nil
	}
	st, err := s.begin()
	if err != nil {
		return nil, err
	}
	changes, err := s.expire(nowMs)
	if err == nil && n > 0 {
		_, err = s.conn.ExecContext(context.Background(), `DELETE FROM msgids WHERE time <= ?`, cut)
	}
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		return nil, fmt.Errorf("expire: %w", err)
	}
	s.dedupFIFO = append(s.dedupFIFO[:0], s.dedupFIFO[n:]...)
	return changes, nil
}

// Delete implements StreamStore.
func (s *sqliteStream) Delete(d DeleteSpec, now time.Time) ([]uint64, []Change, error) {
	st, err := s.begin()
	if err != nil {
		return nil, nil, err
	}
	var seqs []uint64
	switch {
	case d.All:
		seqs, err = s.deleteWhere(`DELETE FROM messages`)
	case d.UpTo > 0:
		seqs, err = s.deleteWhere(`DELETE FROM messages WHERE seq <= ?`, min(d.UpTo, maxSeq))
	default:
		for _, q := range d.Seqs {
			if q > maxSeq {
				continue // no such message
			}
			var size int64
			var hadTTL bool
			e := s.delSeq.QueryRow(q).Scan(&size, &hadTTL)
			if errors.Is(e, sql.ErrNoRows) {
				continue
			}
			if e != nil {
				err = e
				break
			}
			s.removed(size, hadTTL)
			seqs = append(seqs, q)
		}
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
	}
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		return nil, nil, fmt.Errorf("delete: %w", err)
	}
	if seqs == nil {
		seqs = []uint64{}
	}
	var changes []Change
	if len(seqs) > 0 {
		changes = []Change{{Op: ChangeDelete, Seqs: seqs}}
	}
	return seqs, changes, nil
}

// scanMessage reads one row of msgCols.
func scanMessage(sc interface{ Scan(...any) error }) (*Message, error) {
	var m Message
	var key sql.NullString
	var hdr, raw []byte
	var enc int
	var ttl sql.NullInt64
	if err := sc.Scan(&m.Seq, &key, &m.Time, &hdr, &enc, &raw, &ttl); err != nil {
		return nil, err
	}
	m.Key = key.String
	m.TTL = ttl.Int64
	var err error
	if m.Headers, err = decodeHeaders(hdr); err != nil {
		return nil, err
	}
	switch enc {
	case encRaw:
		m.Value = raw
	case encZstd:
		_, zd, err := codecs()
		if err != nil {
			return nil, err
		}
		if m.Value, err = zd.DecodeAll(raw, nil); err != nil {
			return nil, fmt.Errorf("decompress seq %d: %w", m.Seq, err)
		}
	default:
		return nil, fmt.Errorf("seq %d: unknown value encoding %d", m.Seq, enc)
	}
	return &m, nil
}

func (s *sqliteStream) getOne(st *sql.Stmt, what string, arg any) (*Message, error) {
	m, err := scanMessage(st.QueryRow(arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Errorf(CodeNotFound, "no message with %s", what)
	}
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return m, nil
}

// maxSeq is the largest seq SQLite can hold (a signed 64-bit rowid). Seqs
// arrive as unsigned decimals, and database/sql refuses a uint64 with the
// high bit set, so larger ones are mapped to "no such message" before they
// reach a query.
const maxSeq = math.MaxInt64

// Get implements StreamStore.
func (s *sqliteStream) Get(seq uint64) (*Message, error) {
	if seq > maxSeq {
		return nil, Errorf(CodeNotFound, "no message with seq %d", seq)
	}
	return s.getOne(s.getSeq, "seq "+strconv.FormatUint(seq, 10), seq)
}

// GetKey implements StreamStore.
func (s *sqliteStream) GetKey(key string) (*Message, error) {
	return s.getOne(s.getKey, "key "+strconv.Quote(key), key)
}

// GetAll implements StreamStore.
func (s *sqliteStream) GetAll(start, end uint64, limit int, fn func(*Message) error) (uint64, error) {
	if end == 0 || end > maxSeq {
		end = maxSeq
	}
	if start > end {
		return 0, nil
	}
	lim := int64(-1)
	if limit > 0 {
		lim = int64(limit) + 1 // one more tells whether a next page exists
	}
	rows, err := s.conn.QueryContext(context.Background(), `SELECT `+msgCols+` FROM messages WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?`, start, end, lim)
	if err != nil {
		return 0, fmt.Errorf("getAll: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return 0, fmt.Errorf("getAll: %w", err)
		}
		if limit > 0 && n == limit {
			return m.Seq, nil
		}
		n++
		if err := fn(m); err != nil {
			return 0, err
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("getAll: %w", err)
	}
	return 0, nil
}

// Keys implements StreamStore.
func (s *sqliteStream) Keys() ([]string, error) {
	rows, err := s.conn.QueryContext(context.Background(), `SELECT key FROM messages WHERE key IS NOT NULL ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return keys, nil
}

// Inventory implements StreamStore.
func (s *sqliteStream) Inventory() Inventory {
	c := s.cfg
	return Inventory{Count: s.count, Bytes: s.bytes, Seq: s.lastSeq, Limits: &c}
}

// Config implements StreamStore.
func (s *sqliteStream) Config() Config { return s.cfg }

// SetConfig implements StreamStore.
func (s *sqliteStream) SetConfig(c Config, now time.Time) (Config, []Change, error) {
	if s.ephemeral {
		c = clampEphemeral(c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return s.cfg, nil, err
	}
	st, err := s.begin()
	if err != nil {
		return s.cfg, nil, err
	}
	old := s.cfg
	s.cfg = c
	var changes, more []Change
	_, err = s.conn.ExecContext(context.Background(), `INSERT OR REPLACE INTO meta(k, v) VALUES('config', ?)`, b)
	if err == nil {
		changes, err = s.expire(now.UnixMilli())
	}
	if err == nil {
		more, err = s.enforce()
	}
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		s.cfg = old
		return s.cfg, nil, fmt.Errorf("config: %w", err)
	}
	if c.Sync != old.Sync {
		if err := s.applySync(); err != nil {
			return s.cfg, append(changes, more...), err
		}
	}
	return s.cfg, append(changes, more...), nil
}
