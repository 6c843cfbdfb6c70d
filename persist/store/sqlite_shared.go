package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Two servers that both believe they own a scope (a placement disagreement,
// or an old owner that was paused while its scope moved) and share a data
// directory both write the stream's file. One server never does that to
// itself, but when it happens everything this handle keeps in memory (the
// totals, the config, which msgIDs and delete ids exist) may be out of date.
// SQLite's PRAGMA data_version, which changes when another connection
// commits to the file (it is per connection, and a stream has one), tells
// when: each write transaction checks it (reloadIfShared, in begin), and so
// does each read (Revalidate). Reads of rows query the file and are current
// anyway, but what they reload tells the expiry timer about the other's
// TTL rows and max_age (readRows).
//
// De-duplication across handles looks up the msgids table, inside the write
// transaction, for each msgID the in-memory window does not hold, for as
// long as another connection's msgIDs may be in the window (foreignUntil).
// The alternative, reloading the window from the table each time
// data_version changed, was measured (BenchmarkSharedMsgIDReload and
// BenchmarkSharedMsgIDLookup): the reload costs about 1 µs per row the
// window holds (11 ms at 10,000 msgIDs, a few seconds' traffic), paid on
// every write while two servers alternate, against about 4 µs per msgID
// for the lookup, whatever the window's size. A server alone on its file
// pays neither: it checks its window only. A stream opened with
// SQLiteConfig.Exclusive (or in memory) cannot share its database at all,
// and skips even the data_version check (sqliteStream.alone). (While two servers alternate,
// a commit's cost is the totals' reload, a scan of the rows, not this.)

// reloadIfShared re-reads what this handle keeps in memory when another
// connection committed to the stream's file since it was last right: without
// it a second writer would reuse seqs the first already assigned, miss the
// first's msgIDs and answer stale totals. It runs inside a transaction (a
// write's, or Revalidate's read), so the file cannot change under it; when
// nothing changed it costs one PRAGMA.
func (s *sqliteStream) reloadIfShared() error {
	if s.alone {
		return nil
	}
	ctx := context.Background()
	var v int64
	if err := s.dataVer.queryRow(s.conn).Scan(&v); err != nil { // prepared: it runs on every write
		return fmt.Errorf("data version: %w", err)
	}
	if v == s.dataVersion {
		return nil
	}
	s.kept = totals{} // the other connection may have kept (or dropped) totals
	// The other connection may have created lazy tables (a file that has
	// them all keeps them).
	if s.lazy != lazyAll {
		if err := s.queryRowSQL(ctx, `SELECT `+lazyMaskSQL).Scan(&s.lazy); err != nil {
			return fmt.Errorf("reload tables: %w", err)
		}
	}
	if err := s.countTotals(ctx); err != nil {
		return fmt.Errorf("reload %w", err)
	}
	var lastSeq uint64
	var lastTime int64
	if err := s.queryRowSQL(ctx, `SELECT COALESCE(MAX(seq), 0), COALESCE((SELECT time FROM messages ORDER BY seq DESC LIMIT 1), 0) FROM messages`).Scan(&lastSeq, &lastTime); err != nil {
		return fmt.Errorf("reload newest row: %w", err)
	}
	seqMax, err := s.storedSeqMax()
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	s.lastSeq = max(s.lastSeq, lastSeq, seqMax)
	s.lastTime = max(s.lastTime, lastTime)
	if err := s.reloadConfig(); err != nil {
		return err
	}
	// The bounds of the other connection's msgIDs and delete ids: two
	// index lookups each, not the rows.
	var oldest, newest int64
	if s.lazy&lazyMsgIDs != 0 {
		if err := s.queryRowSQL(ctx, `SELECT COALESCE((SELECT MIN(time) FROM msgids), 0), COALESCE((SELECT MAX(time) FROM msgids), 0)`).Scan(&oldest, &newest); err != nil {
			return fmt.Errorf("reload msgids: %w", err)
		}
	}
	s.msgidsOldest = oldest
	if newest != 0 {
		s.foreignUntil = max(s.foreignUntil, newest+DedupWindow.Milliseconds())
	}
	s.delidsOldest = 0
	if s.lazy&lazyDelIDs != 0 {
		if err := s.queryRowSQL(ctx, `SELECT COALESCE(MIN(time), 0) FROM delids`).Scan(&s.delidsOldest); err != nil {
			return fmt.Errorf("reload delete ids: %w", err)
		}
	}
	s.dataVersion = v
	return nil
}

// reloadConfig re-reads the stored config, which another connection may
// have replaced. A changed sync mode is applied once the transaction ended
// (SQLite refuses it inside one): see endTx.
func (s *sqliteStream) reloadConfig() error {
	var b []byte
	err := s.queryRowSQL(context.Background(), `SELECT v FROM meta WHERE k='config'`).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // never configured: still the defaults
	}
	if err != nil {
		return fmt.Errorf("reload config: %w", err)
	}
	c, err := storedConfig(b)
	if err != nil {
		return fmt.Errorf("reload config: %w", err)
	}
	if c.Sync != s.cfg.Sync {
		s.syncStale = true
	}
	s.cfg = c
	return nil
}

// endTx runs after a transaction ended (committed or rolled back): it
// applies a sync mode another connection's config set, which reloadConfig
// could not apply inside the transaction. A failure leaves it to the next
// transaction's end to retry; the commit stands either way.
func (s *sqliteStream) endTx() error {
	if !s.syncStale {
		return nil
	}
	if err := s.applySync(); err != nil {
		return err
	}
	s.syncStale = false
	return nil
}

// Revalidate implements Stream: outside a transaction, one PRAGMA tells
// whether another connection committed; only then a read transaction
// re-reads what changed (reloadIfShared), consistently.
func (s *sqliteStream) Revalidate() error {
	if s.alone {
		return nil // no other connection can have committed
	}
	var v int64
	if err := s.dataVer.queryRow(s.conn).Scan(&v); err != nil {
		return classifyDisk(fmt.Errorf("revalidate: data version: %w", err))
	}
	if v == s.dataVersion {
		return nil
	}
	ctx := context.Background()
	if _, err := s.execSQL(ctx, `BEGIN`); err != nil {
		return classifyDisk(fmt.Errorf("revalidate: %w", err))
	}
	err := s.reloadIfShared()
	if err == nil {
		_, err = s.execSQL(ctx, `COMMIT`)
	}
	if err != nil {
		_, _ = s.execSQL(ctx, `ROLLBACK`)
		return classifyDisk(fmt.Errorf("revalidate: %w", err))
	}
	if err := s.endTx(); err != nil {
		return classifyDisk(fmt.Errorf("revalidate: %w", err))
	}
	return nil
}

// storedMsgID looks id up in the msgids table: its first write's seq and
// time if it is there and within the window at nowMs.
func (s *sqliteStream) storedMsgID(id string, nowMs int64) (dedupEntry, bool, error) {
	var e dedupEntry
	if s.lazy&lazyMsgIDs == 0 {
		return e, false, nil // no msgID was ever stored
	}
	err := s.getMsgID.queryRow(s.conn, id).Scan(&e.seq, &e.time)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return e, false, nil
	case err != nil:
		return e, false, fmt.Errorf("msgid lookup: %w", err)
	}
	return e, nowMs-e.time < DedupWindow.Milliseconds(), nil
}
