package store

import (
	"context"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// Memory keeps ephemeral streams, each in a private in-memory SQLite
// database (the stream code is SQLite's): a stream lives while it is open
// and its data is gone once it is closed. Its max_bytes is never above
// EphemeralMaxBytes, and its database gives free pages back once they are
// many (shrinkMemory), so the memory it holds follows what it keeps.
// Nothing is written to disk, so nothing is archived and no disk reserve
// applies.
type Memory struct{}

var _ Storage = (*Memory)(nil)

// NewMemory returns the in-memory storage.
func NewMemory() *Memory { return &Memory{} }

// Open implements Storage: every open is a new, empty stream.
func (*Memory) Open(scope, name string, now time.Time) (Stream, error) {
	if err := validName(scope, name); err != nil {
		return nil, err
	}
	// A private in-memory database lives as long as its one connection.
	// auto_vacuum must be set before the first table is created, as the
	// DSN's pragmas are: without it SQLite keeps every page a commit ever
	// allocated until the database is closed (see shrinkMemory).
	s, err := openStream(":memory:?_pragma=auto_vacuum(INCREMENTAL)", scope, name, openHow{memory: true}, now)
	if err != nil {
		return nil, classifyDisk(err)
	}
	return s, nil
}

// OpenExisting implements Storage: a stream in memory that is not open does
// not exist, so it returns ErrNoStream for every valid name.
func (*Memory) OpenExisting(scope, name string, _ time.Time) (Stream, error) {
	if err := validName(scope, name); err != nil {
		return nil, err
	}
	return nil, ErrNoStream
}

// Remove implements Storage: a stream in memory is gone once closed, so
// there is nothing to remove.
func (*Memory) Remove(string, string) error { return nil }

// Close implements Storage; open streams are closed by their owner.
func (*Memory) Close() error { return nil }

// validName checks scope and name as StreamPath does for a file.
func validName(scope, name string) error {
	if !bus.ValidScope(scope) {
		return persist.Errorf(persist.CodeBadRequest, "invalid scope %q", scope)
	}
	return persist.ValidStreamName(name)
}

// An ephemeral stream's database grows to hold its largest commit: the
// rows a group commit inserts are all in the database before max_bytes
// removes the oldest, at the commit's end. The pages freed stay the
// database's, in memory, until it gives them back with an incremental
// vacuum; shrinkMemory does so after a commit that leaves them many: more
// than memoryShrinkMinBytes, and more than a quarter of the database. Then
// what a stream holds after any commit is what its rows take plus at most
// a third of that (free pages up to a quarter of the whole) or
// memoryShrinkMinBytes, whichever is more, and what the deletes since the
// last look freed (about memoryShrinkMinBytes at most): about 86 MiB for
// a full stream of EphemeralMaxBytes. The quarter keeps a stream whose
// every commit pushes out a share of it from shrinking after each commit
// only to grow again at the next: free pages are reused by the next
// commit's rows, and a vacuum moves pages, so it runs only when the free
// pages are more than a quarter of the stream, where it costs at most
// what the commits that freed them did.

// memoryShrinkMinBytes is the free space in pages below which an
// ephemeral stream's database is left as it is, and how much the rows
// removed since the last look at its free pages must add up to before the
// next (counting each at its size plus memoryRowBytes): most commits
// remove less, or nothing, and run no statement for it.
const memoryShrinkMinBytes = 1 << 20

// memoryRowBytes is what a removed row counts for in the estimate beside
// its size, so that removing many small rows leads to a look too: about
// what its cell takes beyond its size (an empty unkeyed row takes 22
// bytes) with room for its key index entry.
const memoryRowBytes = 64

// shrinkMemory runs after a commit of an ephemeral stream that removed rows
// adding up to memoryShrinkMinBytes (s.freed) since it last ran. It reads
// the database's free pages and, when they are many (see above), gives
// them all back. It is best effort: the commit stands whatever happens
// here, and in memory a vacuum fails only for lack of memory.
func (s *sqliteStream) shrinkMemory() {
	s.freed = 0
	ctx := context.Background()
	var pages, free, pageSize int64
	err := s.queryRowSQL(ctx, `SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())`).Scan(&pages, &free, &pageSize)
	if err != nil || free*pageSize <= memoryShrinkMinBytes || free*4 <= pages {
		return
	}
	_, _ = s.execSQL(ctx, `PRAGMA incremental_vacuum`)
}
