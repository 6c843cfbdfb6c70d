package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// NeedsExpiry implements Stream. It answers from what the handle knows:
// the TTL rows or max_age of another connection sharing the file count
// once a request of this handle has reloaded them (every write and every
// read does: see readRows).
func (s *sqliteStream) NeedsExpiry() bool {
	return s.cfg.MaxAge > 0 || s.ttlRows > 0 || len(s.dedupFIFO) > 0 || s.msgidsOldest != 0 || s.delidsOldest != 0
}

// removed updates the totals for one deleted row.
func (s *sqliteStream) removed(size int64, hadTTL bool) {
	s.count--
	s.bytes -= size
	if hadTTL {
		s.ttlRows--
	}
	if s.memory {
		s.freed += size + memoryRowBytes
	}
}

// deleteWhere runs a DELETE ... RETURNING seq, size, expires IS NOT NULL and
// returns the removed seqs, ascending, updating the totals.
func (s *sqliteStream) deleteWhere(query string, args ...any) ([]uint64, error) {
	rows, err := s.querySQL(context.Background(), query+` RETURNING seq, size, expires IS NOT NULL`, args...)
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
	if n := len(seqs); n > 0 && seqs[n-1] == s.lastSeq {
		s.newestGone = true
	}
	return seqs, nil
}

// expire removes rows past max_age or their TTL (inside a transaction).
func (s *sqliteStream) expire(nowMs int64) ([]Change, error) {
	var changes []Change
	if s.cfg.MaxAge > 0 && s.count > 0 {
		// Expired rows are a prefix in seq order (times never decrease along seq).
		seqs, err := s.deleteWhere(`DELETE FROM messages WHERE seq < COALESCE((SELECT seq FROM messages WHERE time > ? ORDER BY seq LIMIT 1), 9223372036854775807)`, nowMs-s.cfg.MaxAge.Milliseconds())
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
		rows, err := s.querySQL(context.Background(), `SELECT seq, size FROM messages ORDER BY seq`)
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

// Expire implements Stream.
func (s *sqliteStream) Expire(now time.Time) ([]Change, error) {
	// What another connection stored (its TTL rows, a max_age it set)
	// decides whether there is work: known only once reloaded. One query
	// when nothing changed; nothing on a stream alone on its file.
	if err := s.Revalidate(); err != nil {
		return nil, s.fail(err)
	}
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
	// Another connection's msgIDs are not in the window: msgidsOldest
	// says when they are due.
	pruneMsgIDs := n > 0 || s.msgidsOldest != 0 && s.msgidsOldest <= cut
	pruneDelIDs := s.delidsOldest != 0 && s.delidsOldest <= cut
	if s.cfg.MaxAge <= 0 && s.ttlRows <= 0 && !pruneMsgIDs && !pruneDelIDs {
		return nil, nil
	}
	st, err := s.begin()
	if err != nil {
		return nil, s.fail(err)
	}
	changes, err := s.expire(nowMs)
	msgidsOldest := s.msgidsOldest
	if err == nil && pruneMsgIDs && s.lazy&lazyMsgIDs != 0 {
		if _, err = s.execSQL(context.Background(), `DELETE FROM msgids WHERE time <= ?`, cut); err == nil && msgidsOldest != 0 {
			err = s.queryRowSQL(context.Background(), `SELECT COALESCE(MIN(time), 0) FROM msgids`).Scan(&msgidsOldest)
		}
	}
	oldest := s.delidsOldest
	if err == nil && pruneDelIDs && s.lazy&lazyDelIDs != 0 {
		if _, err = s.execSQL(context.Background(), `DELETE FROM delids WHERE time <= ?`, cut); err == nil {
			err = s.queryRowSQL(context.Background(), `SELECT COALESCE(MIN(time), 0) FROM delids`).Scan(&oldest)
		}
	}
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		return nil, s.fail(fmt.Errorf("expire: %w", err))
	}
	s.dedupFIFO = append(s.dedupFIFO[:0], s.dedupFIFO[n:]...)
	s.msgidsOldest = msgidsOldest
	s.delidsOldest = oldest
	if len(changes) > 0 {
		s.giveBack()
	}
	return changes, nil
}
