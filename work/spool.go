package work

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/s2"

	"github.com/switchyard-dev/switchyard/persist"
)

// Spool headers on each chunk message: the article numbers the chunk was
// asked for (articles the server no longer has are absent from its lines).
const (
	HdrChunkFirst = "Work-First"
	HdrChunkLast  = "Work-Last"
	// HdrChunkEnc names the value's encoding: "s2" (klauspost/compress/s2
	// block), or absent for the plain lines. It is persist's
	// Content-Encoding, so the server does not compress the value again.
	HdrChunkEnc = persist.HdrContentEncoding
)

// encS2 is HdrChunkEnc of an s2-compressed chunk. Overview lines shrink
// about 3x; the chunk then crosses the bus three times (request, change
// feed, read) and reaches the store at a third of the size, which is where
// the prefetcher spends its time.
const encS2 = "s2"

// maxChunkBytes bounds a decoded chunk, so a corrupt or hostile spool value
// cannot make a reader allocate without limit.
const maxChunkBytes = 64 << 20

// chunkKey names the chunk that starts at article first. Padded to 12
// digits, keys sort as strings like their articles up to 10^12; past that
// they do not (c1000000000001 < c999999999901), so readers order chunks
// by chunkFirst, not by key.
func chunkKey(first int64) string { return fmt.Sprintf("c%012d", first) }

// chunkFirst is the first article of the chunk named key (chunkKey), or
// -1 for a key that is not one.
func chunkFirst(key string) int64 {
	n, err := strconv.ParseInt(strings.TrimPrefix(key, "c"), 10, 64)
	if err != nil || !strings.HasPrefix(key, "c") {
		return -1
	}
	return n
}

// EncodeChunk joins overview lines (without line ends) into one spool
// message value: one line per article, '\n' between them.
func EncodeChunk(lines [][]byte) []byte {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	for i, l := range lines {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, l...)
	}
	return b
}

// DecodeChunk calls fn with each line of a spool message value and the
// article number it starts with. A line without a number is an error (the
// spool was written by something else); fn's error stops the walk.
func DecodeChunk(b []byte, fn func(article int64, line []byte) error) error {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		end := bytes.IndexByte(line, '\t')
		if end < 0 {
			end = len(line)
		}
		n, err := strconv.ParseInt(string(line[:end]), 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("work: spool line without an article number: %.40q", line)
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return nil
}

// WriteChunk stores one fetched chunk of range id (the articles first..last
// it asked for, lines as the server sent them). A chunk written again
// replaces the first copy, so a prefetch repeated after a crash spools no
// article twice.
func (s *Store) WriteChunk(ctx context.Context, id uint64, first, last int64, lines [][]byte) error {
	_, err := s.Spool(id).Set(ctx, s2.Encode(nil, EncodeChunk(lines)), persist.SetOptions{
		Key: chunkKey(first),
		Headers: map[string]string{
			HdrChunkFirst: strconv.FormatInt(first, 10),
			HdrChunkLast:  strconv.FormatInt(last, 10),
			HdrChunkEnc:   encS2,
		},
	})
	if err != nil {
		return fmt.Errorf("work: spool range %d chunk %d-%d: %w", id, first, last, err)
	}
	return nil
}

// ReadSpool hands fn every spooled line of range id in article order (the
// chunks are keyed by their first article, and each chunk's lines are in
// the server's order) and returns how many it handed.
func (s *Store) ReadSpool(ctx context.Context, id uint64, fn func(article int64, line []byte) error) (int64, error) {
	n, _, err := s.readSpool(ctx, id, fn)
	return n, err
}

// readSpool is ReadSpool that also returns how many chunk messages it read,
// for the worker to check against the range record.
func (s *Store) readSpool(ctx context.Context, id uint64, fn func(article int64, line []byte) error) (int64, int, error) {
	var chunks []persist.Message
	if _, err := s.Spool(id).Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key != "" {
			chunks = append(chunks, *m)
		}
		return nil
	}); err != nil {
		return 0, 0, fmt.Errorf("work: read spool of range %d: %w", id, err)
	}
	// Rows come in seq order; a chunk fetched again after a crash has a
	// newer seq than its neighbours, so order by key.
	sortByKey(chunks)
	var n int64
	var buf []byte
	for i := range chunks {
		v, err := chunkValue(chunks[i].Headers[HdrChunkEnc], chunks[i].Value, buf)
		if err != nil {
			return n, i, fmt.Errorf("work: spool of range %d, chunk %s: %w", id, chunks[i].Key, err)
		}
		buf = v[:0]
		if err := DecodeChunk(v, func(a int64, l []byte) error {
			n++
			return fn(a, l)
		}); err != nil {
			return n, i, fmt.Errorf("work: spool of range %d: %w", id, err)
		}
	}
	return n, len(chunks), nil
}

// DropSpool removes range id's spool stream, file included: every range
// has a stream of its own, and emptying it would leave one file per range
// ever worked in the data directory. A prefetch of the range after this
// creates the stream afresh.
func (s *Store) DropSpool(ctx context.Context, id uint64) error {
	if _, err := s.Spool(id).Drop(ctx); err != nil {
		return fmt.Errorf("work: drop spool of range %d: %w", id, err)
	}
	return nil
}

// chunkValue undoes a chunk's encoding, decoding into buf when it can.
func chunkValue(enc string, v, buf []byte) ([]byte, error) {
	switch enc {
	case "":
		return v, nil
	case encS2:
		n, err := s2.DecodedLen(v)
		if err != nil {
			return nil, fmt.Errorf("decode s2: %w", err)
		}
		if n > maxChunkBytes {
			return nil, fmt.Errorf("decoded chunk of %d bytes, over the limit of %d", n, maxChunkBytes)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		out, err := s2.Decode(buf[:n], v)
		if err != nil {
			return nil, fmt.Errorf("decode s2: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown chunk encoding %q", enc)
}

// sortByKey orders spool messages in chunk order: by the first article
// their keys name (then by key, for any that name none).
func sortByKey(ms []persist.Message) {
	slices.SortFunc(ms, func(a, b persist.Message) int {
		return cmp.Or(cmp.Compare(chunkFirst(a.Key), chunkFirst(b.Key)), strings.Compare(a.Key, b.Key))
	})
}
