package store

import (
	"context"
	"fmt"
)

// txState is what a rollback must restore of the in-memory state.
type txState struct {
	count, bytes, ttlRows int64
	freed                 int64
	lastSeq               uint64
	lastTime              int64
	fifoLen               int
	lazy                  lazyTables // a rollback undoes their creation
	kept                  totals     // a rollback puts back a pack's kept totals row (begin)
}

func (s *sqliteStream) begin() (txState, error) {
	if err := s.packSyncBegin(); err != nil {
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	if _, err := s.beginStmt.exec(s.conn); err != nil {
		s.packSyncEnd()
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	if err := s.reloadIfShared(); err != nil {
		_, _ = s.execSQL(context.Background(), "ROLLBACK")
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	kept := s.kept
	if s.pk != nil && s.kept != (totals{}) {
		// In a pack the kept totals go with the first write transaction
		// after the open that took them, in it: only this process writes
		// the pack (it is exclusive), through here, so they are never
		// trusted past a change; a crash after it leaves none, and the
		// next open counts. (A file has triggers for it, which also see
		// other programs' writes; in a pack they cost every keyed set.)
		if _, err := s.execSQL(context.Background(), `DELETE FROM meta WHERE k = ?`, totalsKey); err != nil {
			_, _ = s.execSQL(context.Background(), "ROLLBACK")
			s.packSyncEnd()
			return txState{}, fmt.Errorf("begin: kept totals: %w", err)
		}
		s.kept = totals{}
	}
	s.newestGone = false
	return txState{count: s.count, bytes: s.bytes, ttlRows: s.ttlRows, freed: s.freed, lastSeq: s.lastSeq, lastTime: s.lastTime, fifoLen: len(s.dedupFIFO), lazy: s.lazy, kept: kept}, nil
}

func (s *sqliteStream) commit() error {
	if s.newestGone && !s.seqTable {
		// Without AUTOINCREMENT nothing else remembers a seq whose row is
		// gone; a reopened stream must not hand it out again.
		if _, err := s.execSQL(context.Background(), `INSERT OR REPLACE INTO meta(k, v) VALUES('seq', ?)`, s.lastSeq); err != nil {
			return fmt.Errorf("record seq: %w", err)
		}
	}
	_, err := s.commitStmt.exec(s.conn)
	s.packSyncEnd()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.notePages()
	_ = s.endTx() // committed whatever it says; it retries at the next end
	// Only an ephemeral stream counts what its deletes freed: most commits
	// pass here without a statement (see memoryShrinkMinBytes).
	if s.freed >= memoryShrinkMinBytes {
		s.shrinkMemory()
	}
	return nil
}

// rollback undoes the transaction and the in-memory changes made since st.
func (s *sqliteStream) rollback(st txState) {
	_, _ = s.execSQL(context.Background(), "ROLLBACK")
	s.packSyncEnd()
	_ = s.endTx() // best effort: it retries at the next end
	s.count, s.bytes, s.ttlRows, s.lastSeq, s.lastTime = st.count, st.bytes, st.ttlRows, st.lastSeq, st.lastTime
	s.freed = st.freed
	s.lazy = st.lazy
	if s.pk != nil {
		// The rollback put back the kept totals row begin dropped: the
		// next transaction must drop it again.
		s.kept = st.kept
	}
	for _, it := range s.dedupFIFO[st.fifoLen:] {
		delete(s.msgids, it.id)
	}
	s.dedupFIFO = s.dedupFIFO[:st.fifoLen]
}

// packSyncBegin makes the pack's connection FULL for the transaction of a
// stream that asks for it (its "sync" config): the pack's other streams
// commit NORMAL, and SQLite takes the mode only outside a transaction.
func (s *sqliteStream) packSyncBegin() error {
	if s.pk == nil || !(s.cfg.Sync || s.syncAll) || s.pk.baseFull {
		return nil
	}
	if _, err := s.execSQL(context.Background(), `PRAGMA synchronous=FULL`); err != nil {
		return fmt.Errorf("sync mode: %w", err)
	}
	s.pk.full = true
	return nil
}

// packSyncEnd puts the pack's connection back to NORMAL after a
// transaction packSyncBegin made FULL.
func (s *sqliteStream) packSyncEnd() {
	if s.pk == nil || !s.pk.full {
		return
	}
	if _, err := s.execSQL(context.Background(), `PRAGMA synchronous=NORMAL`); err == nil {
		s.pk.full = false
	}
}
