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
}

func (s *sqliteStream) begin() (txState, error) {
	if _, err := s.beginStmt.exec(s.conn); err != nil {
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	if err := s.reloadIfShared(); err != nil {
		_, _ = s.conn.ExecContext(context.Background(), "ROLLBACK")
		return txState{}, fmt.Errorf("begin: %w", err)
	}
	s.newestGone = false
	return txState{count: s.count, bytes: s.bytes, ttlRows: s.ttlRows, freed: s.freed, lastSeq: s.lastSeq, lastTime: s.lastTime, fifoLen: len(s.dedupFIFO), lazy: s.lazy}, nil
}

func (s *sqliteStream) commit() error {
	if s.newestGone && !s.seqTable {
		// Without AUTOINCREMENT nothing else remembers a seq whose row is
		// gone; a reopened stream must not hand it out again.
		if _, err := s.conn.ExecContext(context.Background(), `INSERT OR REPLACE INTO meta(k, v) VALUES('seq', ?)`, s.lastSeq); err != nil {
			return fmt.Errorf("record seq: %w", err)
		}
	}
	if _, err := s.commitStmt.exec(s.conn); err != nil {
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
	_, _ = s.conn.ExecContext(context.Background(), "ROLLBACK")
	_ = s.endTx() // best effort: it retries at the next end
	s.count, s.bytes, s.ttlRows, s.lastSeq, s.lastTime = st.count, st.bytes, st.ttlRows, st.lastSeq, st.lastTime
	s.freed = st.freed
	s.lazy = st.lazy
	for _, it := range s.dedupFIFO[st.fifoLen:] {
		delete(s.msgids, it.id)
	}
	s.dedupFIFO = s.dedupFIFO[:st.fifoLen]
}
