package store

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// Delete implements Stream.
func (s *sqliteStream) Delete(d persist.Delete, now time.Time) ([]uint64, []Change, error) {
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
			if q == s.lastSeq {
				s.newestGone = true
			}
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
