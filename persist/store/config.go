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

// SetConfig implements Stream.
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
	st, err := s.begin()
	if err != nil {
		return s.cfg, nil, s.fail(err)
	}
	old := s.cfg
	s.cfg = c
	var changes, more []Change
	_, err = s.conn.ExecContext(context.Background(), `INSERT OR REPLACE INTO meta(k, v) VALUES('config', ?)`, b)
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
		s.rollback(st)
		s.cfg = old
		return s.cfg, nil, s.fail(fmt.Errorf("config: %w", err))
	}
	if c.Sync != old.Sync {
		if err := s.applySync(); err != nil {
			return s.cfg, append(changes, more...), err
		}
	}
	return s.cfg, append(changes, more...), nil
}

// MergeConfig applies the config request body patch to cur: only the fields
// present change. Unknown fields and invalid results are bad-request.
func MergeConfig(cur persist.Config, patch []byte) (persist.Config, error) {
	u, err := persist.ParseConfigUpdate(patch)
	if err != nil {
		return cur, err
	}
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
