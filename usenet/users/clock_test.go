package users_test

import (
	"sync"
	"time"
)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex // protects t
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
