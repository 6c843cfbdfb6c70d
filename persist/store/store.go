// Package store keeps persist streams: the Storage interface the server
// writes through, and its two implementations sharing one stream code:
// SQLite for persistent streams (one file per stream, WAL, zstd for large
// values, an optional archive copy) and Memory for ephemeral ones (a
// private in-memory database per stream). Only the server uses it.
package store

import (
	"errors"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// Storage opens streams. Implementations are safe for concurrent use; the
// Streams they return are not (see Stream). The server keeps persistent
// streams in one (SQLite) and ephemeral ones in another (Memory).
type Storage interface {
	// Open opens (creating if needed) the stream name of scope.
	Open(scope, name string, now time.Time) (Stream, error)
	// OpenExisting is Open for a stream that already has stored state: it
	// creates nothing (no file, no directory) and returns an error matching
	// ErrNoStream for a stream that does not exist, which is how reads of a
	// missing stream stay free of state. A stream in Memory that is not
	// open does not exist, so there it always returns ErrNoStream.
	OpenExisting(scope, name string, now time.Time) (Stream, error)
	// Remove deletes every trace of the stream name of scope, so that it no
	// longer exists: for SQLite its file with its -wal, -shm and -journal,
	// and its archive copy, so that no later open restores it. The stream
	// must be closed first (its owner does that). A stream in Memory is gone
	// once closed, so Remove has nothing to do there; neither for a stream
	// that does not exist.
	Remove(scope, name string) error
	// Close releases what the storage holds. Streams are closed by their owner.
	Close() error
}

// ErrNoStream is returned by Storage.OpenExisting for a stream that has no
// stored state.
var ErrNoStream = errors.New("stream does not exist")

// ErrInUse is returned by Lister.StreamName for a stream file another
// connection holds locked (an open stream of a storage with
// SQLiteConfig.Exclusive): it is in service, and its close decides
// whether it needs compacting.
var ErrInUse = errors.New("stream file in use")

// Stream is one open stream in storage. Its methods must not be called concurrently:
// the server gives each stream one worker at a time. Every method that
// removes or adds messages returns the Changes of its commit, in order.
type Stream interface {
	// Write applies ops in one transaction (the group commit) and returns a
	// result per op. A per-op refusal (CAS, limits, dedup) is in its
	// WriteResult and does not affect the others; a non-nil error means
	// nothing was committed.
	Write(ops []WriteOp, now time.Time) ([]WriteResult, []Change, error)
	// Get returns the message with seq, or a not-found *Error.
	Get(seq uint64) (*persist.Frame, error)
	// GetKey returns the message stored under key, or a not-found *Error.
	GetKey(key string) (*persist.Frame, error)
	// GetAll calls fn for each message with start <= seq <= end (end 0 = no
	// bound), in seq order, at most limit of them (0 = no limit). next is the
	// seq to resume from when limit cut the range, else 0.
	GetAll(start, end uint64, limit int, fn func(*persist.Frame) error) (next uint64, err error)
	// Delete removes what d selects and returns the removed seqs. A delete
	// whose d.MsgID was seen within DedupWindow removes nothing and returns
	// the first one's seqs with Dup set.
	Delete(d persist.Delete, now time.Time) (DeleteResult, []Change, error)
	// Keys lists every key, sorted. maxJSON > 0 bounds the list as JSON
	// (json.Marshal's encoding, an array of strings): past it Keys stops
	// reading and returns a too-large *Error, so an answer that could not
	// be sent is not built first. 0 means no bound.
	Keys(maxJSON int) ([]string, error)
	// Inventory summarises the stream: its count, bytes, seq and limits as
	// the stream's file holds them now, revalidated first (see Revalidate).
	Inventory() (persist.Inventory, error)
	// Bytes is the sum of the messages' sizes as this handle last knew it,
	// without I/O and not revalidated: for accounting, not for answers.
	Bytes() int64
	// Revalidate re-reads what the stream keeps in memory (totals, config,
	// de-duplication bounds) when another handle committed to its file
	// since (two servers sharing a data directory); when none did it costs
	// one query. Writes do it inside their transaction; Inventory does it
	// itself; a caller answering from Config calls it first.
	Revalidate() error
	// Config returns the stream's configuration as last known, without I/O
	// (see Revalidate).
	Config() persist.Config
	// SetConfig replaces the configuration (already merged and validated by
	// the caller) and enforces it at once, in one transaction: on an error
	// nothing is stored and Config is what the file holds.
	SetConfig(c persist.Config, now time.Time) (persist.Config, []Change, error)
	// Expire removes messages past their TTL or max_age and forgets msgIDs
	// and delete ids older than the de-duplication window.
	Expire(now time.Time) ([]Change, error)
	// OpenedChanges returns, once, the changes of the open itself: the
	// deletes of what aged out while the stream was closed, which the open
	// removed. nil after the first call.
	OpenedChanges() []Change
	// NeedsExpiry reports whether Expire could have anything to do now or
	// later (an age limit, TTL rows, remembered msgIDs or delete ids).
	NeedsExpiry() bool
	// Close closes the stream; a stream in Memory is gone afterwards.
	Close() error
}

// WriteOp is one message to store.
type WriteOp struct {
	Key     string
	Headers map[string]string
	Value   []byte
	TTL     int64   // milliseconds; 0 = none
	MsgID   string  // "" = no de-duplication
	PrevSeq *uint64 // compare-and-set on Key's current seq; 0 = key must not exist
}

// WriteResult is the outcome of one WriteOp.
type WriteResult struct {
	Seq  uint64
	Time int64 // unix milliseconds
	Dup  bool  // answered from the msgID window; nothing was written
	Err  *persist.Error
}

// DeleteResult is the outcome of a Delete.
type DeleteResult struct {
	Seqs []uint64 // the removed seqs, ascending; never nil
	Dup  bool     // answered from the delete id window; nothing was removed now
}

// ChangeOp says what a Change did.
type ChangeOp int

// Change operations.
const (
	ChangeSet    ChangeOp = iota + 1 // a message was stored
	ChangeDelete                     // messages were removed (explicitly or by a limit, TTL or age)
)

// Change is one effect of a commit. A commit's changes come in the order
// they happened; a ChangeSet's Msg.Seq increases across them.
type Change struct {
	Op   ChangeOp
	Msg  *persist.Frame // ChangeSet: the stored message, value included
	Seqs []uint64       // ChangeDelete: the removed seqs, ascending
}

// DedupWindow is how long a msgID (set) or delete id is remembered for
// de-duplication.
const DedupWindow = 2 * time.Minute

// EphemeralMaxBytes is the byte cap of an ephemeral (in-memory) stream: its
// max_bytes is never larger than this.
const EphemeralMaxBytes = 64 << 20
