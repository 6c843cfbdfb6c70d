package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/events"
)

// TestEventsConfigUsers: a shared anchor past the events layer's fan-out
// per user gets a bus user per subscriber unless told otherwise, and too
// few users for the subscribers is refused rather than measured as gaps.
func TestEventsConfigUsers(t *testing.T) {
	base := EventsConfig{Rate: 10, Duration: time.Second}
	for _, tc := range []struct {
		name      string
		cfg       func(EventsConfig) EventsConfig
		wantUsers int
		wantErr   string
	}{
		{"own channels stay anonymous", func(c EventsConfig) EventsConfig { c.Subscribers = 1000; return c }, 0, ""},
		{"shared within the cap", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared = events.MaxMatchedPerOwner, true
			return c
		}, 0, ""},
		{"shared past the cap", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared = 1000, true
			return c
		}, 1000, ""},
		{"shared, enough users", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared, c.Users = 1000, true, 20
			return c
		}, 20, ""},
		{"shared, too few users", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared, c.Users = 1000, true, 19
			return c
		}, 19, "give more --users"},
		{"negative", func(c EventsConfig) EventsConfig { c.Users = -1; return c }, -1, "must not be negative"},
	} {
		cfg := tc.cfg(base)
		err := cfg.Check()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Check() = %v, want %q", tc.name, err, tc.wantErr)
		}
		if got := cfg.withDefaults().Users; got != tc.wantUsers {
			t.Errorf("%s: users %d, want %d", tc.name, got, tc.wantUsers)
		}
	}
}
