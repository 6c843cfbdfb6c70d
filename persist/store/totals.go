package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// A stream keeps its totals (rows, bytes, rows with a TTL) in memory so that
// limits need no query per write, and computes them when it opens. Counting
// is a scan of every row: 0.15-0.4 s at 1,000,000 rows, 1.2-4.6 s at
// 10,000,000 (docs/benchmarks.md), paid by every open (a restart's first
// request, each reopen after an eviction). So a large stream's clean close keeps them in the file,
// in meta 'totals', and the next open takes them from there instead.
//
// Kept totals are trusted only while they describe the rows:
//
//   - they carry the stream's last seq, and an open that finds another one
//     counts: a write after the close (by anyone) assigned a new seq;
//   - triggers stored with them delete the row at the first delete or
//     update of a row, by anyone: this build, an older one, an operator's
//     sqlite3. A crash after such a write leaves no totals, and the next
//     open counts;
//   - a handle sharing its file with another connection (sqlite_shared.go)
//     forgets what it knew of the row when the other one committed.
//
// What they do not see is a row inserted below the last seq by another
// program, which persist never writes.

// TotalsMinRows is the count from which a stream's close keeps its totals
// in the file. Below it counting at the open costs less than the close's
// extra commit (about 0.15 µs a row against tens of µs).
const TotalsMinRows = 4096

// totalsKey is the meta row of the kept totals.
const totalsKey = "totals"

// totalsTriggers delete the kept totals at the first change to the rows
// that the last seq does not show. Created with the first totals kept.
const totalsTriggers = `
CREATE TRIGGER IF NOT EXISTS totals_stale_delete AFTER DELETE ON messages BEGIN DELETE FROM meta WHERE k = 'totals'; END;
CREATE TRIGGER IF NOT EXISTS totals_stale_update AFTER UPDATE ON messages BEGIN DELETE FROM meta WHERE k = 'totals'; END;`

// totals is what a stream keeps of its rows in memory and what meta
// 'totals' holds: a comparison of the two tells whether the file's are
// current.
type totals struct {
	count, bytes, ttlRows int64
	lastSeq               uint64
}

func (t totals) encode() string {
	return fmt.Sprintf("%d %d %d %d", t.count, t.bytes, t.ttlRows, t.lastSeq)
}

// parseTotals reads meta 'totals'; ok is false for anything but four
// non-negative numbers.
func parseTotals(v []byte) (t totals, ok bool) {
	f := strings.Fields(string(v))
	if len(f) != 4 {
		return t, false
	}
	var n [3]int64
	for i := range n {
		x, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || x < 0 {
			return t, false
		}
		n[i] = x
	}
	seq, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		return t, false
	}
	return totals{count: n[0], bytes: n[1], ttlRows: n[2], lastSeq: seq}, true
}

func (s *sqliteStream) current() totals {
	return totals{count: s.count, bytes: s.bytes, ttlRows: s.ttlRows, lastSeq: s.lastSeq}
}

// countTotals computes the totals from the rows: a scan of them (count and
// bytes in one pass) and the TTL rows from their index. It is what an open
// without kept totals does, and what a handle sharing its file does after
// another connection's commit (reloadIfShared).
func (s *sqliteStream) countTotals(ctx context.Context) error {
	if err := s.queryRowSQL(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages`).Scan(&s.count, &s.bytes); err != nil {
		return fmt.Errorf("totals: %w", err)
	}
	s.ttlRows = 0 // without the index no row has an expiry (see lazyDefs)
	if s.lazy&lazyExpires != 0 {
		if err := s.queryRowSQL(ctx, `SELECT COUNT(*) FROM messages WHERE expires IS NOT NULL`).Scan(&s.ttlRows); err != nil {
			return fmt.Errorf("totals: %w", err)
		}
	}
	return nil
}

// useKeptTotals takes the totals init read from meta 'totals' (kept: the
// row, nil when there is none, in which case init's statement counted the
// rows), or counts them when the row is not current (a crash after a write
// left it behind).
func (s *sqliteStream) useKeptTotals(ctx context.Context, kept []byte) error {
	if kept == nil {
		return nil
	}
	if t, ok := parseTotals(kept); ok && t.lastSeq == s.lastSeq {
		s.count, s.bytes, s.ttlRows = t.count, t.bytes, t.ttlRows
		s.kept = t
		return nil
	}
	if err := s.countTotals(ctx); err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	return nil
}

// keepTotals writes the totals into the file for the next open, at close.
// Nothing is written for a small stream, or when the file already holds
// these totals (an open that only read writes nothing). A failure leaves
// the file without them, as a crash would, and the next open counts.
func (s *sqliteStream) keepTotals() {
	if !s.opened || s.memory || s.count < TotalsMinRows || s.kept == s.current() {
		return
	}
	if s.pk != nil && s.pk.handles[s.sid] > 1 {
		// Another handle of the stream is open in this process (an
		// evicted one closing while its stream was opened again): this
		// one's figures may be behind it, so the last one keeps them.
		return
	}
	st, err := s.begin() // on a shared file, makes the totals current first
	if err != nil {
		return
	}
	ctx := context.Background()
	if s.pk == nil { // a pack drops them in begin instead (tx.go)
		_, err = s.execSQL(ctx, totalsTriggers)
	}
	if err == nil {
		_, err = s.execSQL(ctx, `INSERT OR REPLACE INTO meta(k, v) VALUES(?, ?)`, totalsKey, s.current().encode())
	}
	if err != nil {
		s.rollback(st)
		return
	}
	if err := s.commit(); err != nil {
		// Most failed commits end the transaction themselves; one that
		// did not (a busy file) must not stay open on the connection,
		// which a pack shares with its other streams.
		s.rollback(st)
		return
	}
	s.kept = s.current()
}
