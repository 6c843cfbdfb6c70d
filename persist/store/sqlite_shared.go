package store

import (
	"context"
	"fmt"
)

// reloadIfShared re-reads the in-memory totals when another connection
// committed to the stream's file since they were last right. One server
// never does that to itself, but two servers that both believe they own a
// scope (a placement disagreement) and share a data directory do: without
// this the second one would reuse seqs the first already assigned. It runs
// inside the write transaction, so the file cannot change under it; when
// nothing changed it costs one PRAGMA.
func (s *sqliteStream) reloadIfShared() error {
	ctx := context.Background()
	var v int64
	if err := s.dataVer.QueryRow().Scan(&v); err != nil { // prepared: it runs on every write
		return fmt.Errorf("data version: %w", err)
	}
	if v == s.dataVersion {
		return nil
	}
	var lastSeq uint64
	if err := s.conn.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(MAX(seq), 0) FROM messages`).Scan(&s.count, &s.bytes, &lastSeq); err != nil {
		return fmt.Errorf("reload totals: %w", err)
	}
	seqMax, err := s.storedSeqMax()
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	s.lastSeq = max(s.lastSeq, lastSeq, seqMax)
	var lastTime int64
	if err := s.conn.QueryRowContext(ctx, `SELECT COALESCE((SELECT time FROM messages ORDER BY seq DESC LIMIT 1), 0)`).Scan(&lastTime); err != nil {
		return fmt.Errorf("reload totals: %w", err)
	}
	s.lastTime = max(s.lastTime, lastTime)
	if err := s.conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE expires IS NOT NULL`).Scan(&s.ttlRows); err != nil {
		return fmt.Errorf("reload totals: %w", err)
	}
	s.dataVersion = v
	return nil
}
