package store

import (
	"strconv"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// missingStream answers reads of a stream that does not exist as a new,
// empty stream would, without any storage behind it: the server serves
// reads of a missing stream with it so that they create nothing. Writes
// must open the real stream; they fail here.
type missingStream struct {
	cfg persist.Config
}

var _ Stream = missingStream{}

// Missing returns the Stream a read of a stream that does not exist is
// served by: no messages, no keys, and cfg, the configuration a new stream
// of its storage starts with (persist.DefaultConfig, bounded by
// ClampEphemeral in Memory). Its write methods fail with an internal error.
func Missing(cfg persist.Config) Stream { return missingStream{cfg: cfg} }

func (m missingStream) readOnly() error {
	return persist.Errorf(persist.CodeInternal, "write to a stream that does not exist")
}

// Write implements Stream; it always fails.
func (m missingStream) Write([]WriteOp, time.Time) ([]WriteResult, []Change, error) {
	return nil, nil, m.readOnly()
}

// Get implements Stream.
func (missingStream) Get(seq uint64) (*persist.Frame, error) {
	return nil, persist.Errorf(persist.CodeNotFound, "no message with seq %d", seq)
}

// GetKey implements Stream.
func (missingStream) GetKey(key string) (*persist.Frame, error) {
	return nil, persist.Errorf(persist.CodeNotFound, "no message with key %s", strconv.Quote(key))
}

// GetAll implements Stream.
func (missingStream) GetAll(uint64, uint64, int, func(*persist.Frame) error) (uint64, error) {
	return 0, nil
}

// Delete implements Stream; it always fails.
func (m missingStream) Delete(persist.Delete, time.Time) (DeleteResult, []Change, error) {
	return DeleteResult{}, nil, m.readOnly()
}

// Keys implements Stream.
func (missingStream) Keys(int) ([]string, error) { return []string{}, nil }

// Inventory implements Stream.
func (m missingStream) Inventory() (persist.Inventory, error) {
	c := m.Config()
	return persist.Inventory{Limits: &c}, nil
}

// Bytes implements Stream.
func (missingStream) Bytes() int64 { return 0 }

// Revalidate implements Stream: nothing is kept.
func (missingStream) Revalidate() error { return nil }

// Config implements Stream.
func (m missingStream) Config() persist.Config { return m.cfg }

// SetConfig implements Stream; it always fails.
func (m missingStream) SetConfig(persist.Config, time.Time) (persist.Config, []Change, error) {
	return persist.Config{}, nil, m.readOnly()
}

// Expire implements Stream: nothing to expire.
func (missingStream) Expire(time.Time) ([]Change, error) { return nil, nil }

// NeedsExpiry implements Stream.
func (missingStream) NeedsExpiry() bool { return false }

func (missingStream) OpenedChanges() []Change { return nil }

// Close implements Stream.
func (missingStream) Close() error { return nil }
