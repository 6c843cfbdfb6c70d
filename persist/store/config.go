package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// Config implements Stream.
func (s *sqliteStream) Config() persist.Config { return s.cfg }

// SetConfig implements Stream. It is all or nothing: either the config is
// committed, in force on the connection and answered without an error, or
// nothing is stored and the handle keeps the config the file holds.
func (s *sqliteStream) SetConfig(c persist.Config, now time.Time) (persist.Config, []Change, error) {
	if s.memory {
		c = ClampEphemeral(c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return s.cfg, nil, err
	}
	// A config change writes to the file: on a full disk it waits for space
	// like a write (see reserve.go).
	if err := s.space.admit(); err != nil {
		return s.cfg, nil, fmt.Errorf("config: %w", err)
	}
	// SQLite refuses to change the sync mode inside a transaction, and
	// after the commit a failure to change it would answer an error for a
	// config that is stored. So a new mode is set first (the commit storing
	// it is then made in it), and put back when nothing is committed.
	if prev := s.cfg; c.Sync != prev.Sync {
		s.cfg = c
		err := s.applySync()
		s.cfg = prev
		if err != nil {
			s.restoreSync()
			return s.cfg, nil, s.fail(fmt.Errorf("config: %w", err))
		}
	}
	st, err := s.begin()
	if err != nil {
		s.restoreSync()
		return s.cfg, nil, s.fail(err)
	}
	old := s.cfg // as the file holds it: begin re-read it if another connection changed it
	s.cfg = c
	var changes, more []Change
	_, err = s.execSQL(context.Background(), `INSERT OR REPLACE INTO meta(k, v) VALUES('config', ?)`, b)
	if err == nil {
		changes, err = s.expire(now.UnixMilli())
	}
	if err == nil {
		more, err = s.enforce()
	}
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		// The config goes back before the rollback, whose end puts the
		// connection's sync mode back to the old config's (the new one's
		// may be set: above, or by begin's reload of a config another
		// connection stored).
		s.cfg = old
		s.syncStale = true
		s.rollback(st)
		return s.cfg, nil, s.fail(fmt.Errorf("config: %w", err))
	}
	return s.cfg, append(changes, more...), nil
}

// restoreSync sets the connection's sync mode back to the config's after a
// config change failed outside a transaction; what fails now is retried
// at the next transaction's end (endTx).
func (s *sqliteStream) restoreSync() {
	s.syncStale = true
	_ = s.endTx()
}

// MergeConfig applies the config request body patch to cur: only the fields
// present change. Unknown fields and invalid results are bad-request; a desc
// over persist.MaxDescBytes is too-large. It runs before anything is stored,
// so a refused patch leaves the stream's config as it was.
func MergeConfig(cur persist.Config, patch []byte) (persist.Config, error) {
	u, err := persist.ParseConfigUpdate(patch)
	if err != nil {
		return cur, err
	}
	if u.Desc != nil && len(*u.Desc) > persist.MaxDescBytes {
		return cur, persist.Errorf(persist.CodeTooLarge, "config: desc is %d bytes, over the limit of %d", len(*u.Desc), persist.MaxDescBytes)
	}
	return applyConfig(cur, u)
}

// storedConfig reads the config a stream file holds, as MergeConfig does
// but without the request bounds: a stream stored by an older version with
// a longer desc still opens (and its desc can be reset).
func storedConfig(b []byte) (persist.Config, error) {
	u, err := persist.ParseConfigUpdate(b)
	if err != nil {
		return persist.DefaultConfig(), err
	}
	return applyConfig(persist.DefaultConfig(), u)
}

// applyConfig returns cur with u applied, if the result is valid.
func applyConfig(cur persist.Config, u persist.ConfigUpdate) (persist.Config, error) {
	next := u.Apply(cur)
	if err := next.Validate(); err != nil {
		return cur, err
	}
	return next, nil
}

// ClampEphemeral bounds an ephemeral stream's max_bytes by EphemeralMaxBytes.
func ClampEphemeral(c persist.Config) persist.Config {
	if c.MaxBytes < 0 || c.MaxBytes > EphemeralMaxBytes {
		c.MaxBytes = EphemeralMaxBytes
	}
	return c
}

// over reports whether value v exceeds limit (-1 = unlimited).
func over(v, limit int64) bool { return limit >= 0 && v > limit }
