package store

import (
	"time"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// Memory keeps ephemeral streams, each in a private in-memory SQLite
// database (the stream code is SQLite's): a stream lives while it is open
// and its data is gone once it is closed. Its max_bytes is never above
// EphemeralMaxBytes. Nothing is written to disk, so nothing is archived and
// no disk reserve applies.
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
	s, err := openStream(":memory:", scope, name, openHow{memory: true}, now)
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
