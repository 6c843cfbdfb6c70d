package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/switchyard-dev/switchyard/internal/jsonstr"
	"github.com/switchyard-dev/switchyard/persist"
)

// scanMessage reads one row of msgCols.
func scanMessage(sc interface{ Scan(...any) error }) (*persist.Frame, error) {
	var m persist.Frame
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

func (s *sqliteStream) getOne(st *lazyStmt, what string, arg any) (*persist.Frame, error) {
	m, err := scanMessage(st.queryRow(s.conn, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, persist.Errorf(persist.CodeNotFound, "no message with %s", what)
	}
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return m, nil
}

// readRows runs before each read of rows. The rows come from the file and
// are current anyway, but what the handle keeps in memory decides whether
// the expiry timer visits the stream at all (NeedsExpiry): a handle that
// only reads, on a file another server writes (sqlite_shared.go), would
// otherwise never learn of the TTL rows or the max_age the other stored,
// and once that server went away it would answer their expired rows for
// good. Revalidated here, the stream expires them at the timer's next
// visit, as its own. Nothing on a stream alone on its database; on a
// shared one at most once every readRevalidateEvery: the PRAGMA takes a
// read lock of its own (the -shm file's), which made a get half as dear
// again when run before each, and the expiry timer it informs visits
// about as often.
func (s *sqliteStream) readRows() error {
	if s.alone {
		return nil
	}
	now := time.Now()
	if !s.readChecked.IsZero() && now.Sub(s.readChecked) < readRevalidateEvery {
		return nil
	}
	if err := s.Revalidate(); err != nil {
		return err
	}
	s.readChecked = now
	return nil
}

// readRevalidateEvery is how often, at most, a read of a shared stream
// checks whether another connection committed (readRows).
const readRevalidateEvery = time.Second

// maxSeq is the largest seq SQLite can hold (a signed 64-bit rowid). Seqs
// arrive as unsigned decimals, and database/sql refuses a uint64 with the
// high bit set, so larger ones are mapped to "no such message" before they
// reach a query.
const maxSeq = math.MaxInt64

// Get implements Stream. Like every read of rows it revalidates first
// (see readRows).
func (s *sqliteStream) Get(seq uint64) (_ *persist.Frame, err error) {
	defer func() { err = classifyDisk(err) }()
	if err := s.readRows(); err != nil {
		return nil, err
	}
	if seq > maxSeq {
		return nil, persist.Errorf(persist.CodeNotFound, "no message with seq %d", seq)
	}
	return s.getOne(&s.getSeq, "seq "+strconv.FormatUint(seq, 10), seq)
}

// GetKey implements Stream.
func (s *sqliteStream) GetKey(key string) (_ *persist.Frame, err error) {
	defer func() { err = classifyDisk(err) }()
	if err := s.readRows(); err != nil {
		return nil, err
	}
	return s.getOne(&s.getKey, "key "+strconv.Quote(key), key)
}

// GetAll implements Stream.
func (s *sqliteStream) GetAll(start, end uint64, limit int, fn func(*persist.Frame) error) (_ uint64, err error) {
	defer func() { err = classifyDisk(err) }()
	if err := s.readRows(); err != nil {
		return 0, err
	}
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
	rows, err := s.querySQL(context.Background(), `SELECT `+msgCols+` FROM messages WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?`, start, end, lim)
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

// Keys implements Stream.
func (s *sqliteStream) Keys(maxJSON int) (_ []string, err error) {
	defer func() { err = classifyDisk(err) }()
	if err := s.readRows(); err != nil {
		return nil, err
	}
	rows, err := s.querySQL(context.Background(), `SELECT key FROM messages WHERE key IS NOT NULL ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer rows.Close()
	keys := []string{}
	size := 1 // the array's brackets, less the comma the first key does not have
	var enc []byte
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		if maxJSON > 0 {
			// As json.Marshal writes it (HTML escaped), and a comma.
			enc = jsonstr.Append(enc[:0], k, true)
			if size += len(enc) + 1; size > maxJSON {
				return nil, persist.Errorf(persist.CodeTooLarge, "the stream's keys are more than %d bytes as JSON (%d keys read so far): over what one answer may carry", maxJSON, len(keys))
			}
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return keys, nil
}

// Inventory implements Stream.
func (s *sqliteStream) Inventory() (persist.Inventory, error) {
	if err := s.Revalidate(); err != nil {
		return persist.Inventory{}, err
	}
	c := s.cfg
	return persist.Inventory{Count: s.count, Bytes: s.bytes, Seq: s.lastSeq, Limits: &c}, nil
}

// Bytes implements Stream.
func (s *sqliteStream) Bytes() int64 { return s.bytes }
