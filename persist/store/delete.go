package store

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// deleteTx runs one delete transaction; a failure is rolled back and
// classified (fail).
func (s *sqliteStream) deleteTx(d persist.Delete, nowMs int64) (DeleteResult, error) {
	st, err := s.begin()
	if err != nil {
		return DeleteResult{}, s.fail(err)
	}
	res, err := s.delete(d, nowMs)
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		return DeleteResult{}, s.fail(fmt.Errorf("delete: %w", err))
	}
	return res, nil
}

// Delete implements Stream.
func (s *sqliteStream) Delete(d persist.Delete, now time.Time) (DeleteResult, []Change, error) {
	nowMs := now.UnixMilli()
	res, err := s.deleteTx(d, nowMs)
	if err != nil && isFull(err) {
		// The first disk-full error gives up the space reserve (fail), and
		// a delete is what frees space: it gets one more try in the room
		// the reserve left, whoever met the full disk first.
		res, err = s.deleteTx(d, nowMs)
	}
	if err != nil {
		return DeleteResult{}, nil, err
	}
	if len(res.Seqs) > 0 && !res.Dup {
		s.giveBack()
	}
	if d.MsgID != "" && !res.Dup && s.delidsOldest == 0 {
		s.delidsOldest = nowMs
	}
	var changes []Change
	if len(res.Seqs) > 0 && !res.Dup {
		changes = []Change{{Op: ChangeDelete, Seqs: res.Seqs}}
	}
	return res, changes, nil
}

// delete runs inside the delete's transaction: the id is looked up and
// stored in the same transaction as the removal, so a crash keeps both or
// neither.
func (s *sqliteStream) delete(d persist.Delete, nowMs int64) (DeleteResult, error) {
	if d.MsgID != "" && s.lazy&lazyDelIDs != 0 {
		var blob []byte
		var at int64
		err := s.getDelID.queryRow(s.conn, d.MsgID).Scan(&blob, &at)
		switch {
		case err == nil && nowMs-at < DedupWindow.Milliseconds():
			seqs, err := decodeSeqRuns(blob)
			if err != nil {
				return DeleteResult{}, fmt.Errorf("delete id %q: %w", d.MsgID, err)
			}
			return DeleteResult{Seqs: seqs, Dup: true}, nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return DeleteResult{}, fmt.Errorf("delete id lookup: %w", err)
		}
	}
	var seqs []uint64
	var err error
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
			e := s.delSeq.queryRow(s.conn, q).Scan(&size, &hadTTL)
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
	if err != nil {
		return DeleteResult{}, err
	}
	if seqs == nil {
		seqs = []uint64{}
	}
	if d.MsgID != "" {
		if err := s.ensureLazy(lazyDelIDs); err != nil {
			return DeleteResult{}, fmt.Errorf("delete id: %w", err)
		}
		if _, err := s.putDelID.exec(s.conn, d.MsgID, encodeSeqRuns(seqs), nowMs); err != nil {
			return DeleteResult{}, fmt.Errorf("delete id: %w", err)
		}
	}
	return DeleteResult{Seqs: seqs}, nil
}

// encodeSeqRuns encodes ascending seqs as runs of consecutive seqs, each
// uvarint(gap from the previous run's end) uvarint(length-1): a delete of
// everything or of a range stays a few bytes however many seqs it removed.
func encodeSeqRuns(seqs []uint64) []byte {
	b := []byte{}
	var end uint64 // one past the previous run
	for i := 0; i < len(seqs); {
		j := i + 1
		for j < len(seqs) && seqs[j] == seqs[j-1]+1 {
			j++
		}
		b = binary.AppendUvarint(b, seqs[i]-end)
		b = binary.AppendUvarint(b, uint64(j-i-1))
		end = seqs[j-1] + 1
		i = j
	}
	return b
}

// decodeSeqRuns is the inverse of encodeSeqRuns.
func decodeSeqRuns(b []byte) ([]uint64, error) {
	seqs := []uint64{}
	var end uint64
	for len(b) > 0 {
		gap, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("corrupt seq runs")
		}
		b = b[n:]
		more, n := binary.Uvarint(b)
		if n <= 0 || more > maxSeq {
			return nil, errors.New("corrupt seq runs")
		}
		b = b[n:]
		first := end + gap
		if first < end || first > maxSeq-more {
			return nil, errors.New("corrupt seq runs")
		}
		for q := first; q <= first+more; q++ {
			seqs = append(seqs, q)
		}
		end = first + more + 1
	}
	return seqs, nil
}
