package bench

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// setClock is a persist server's Observer that adds up what the server says
// of its sets: the time from each set's decoded arrival to its answer
// (Served) and the time of each group commit (Committed). Beside a client's
// own rate it splits a set's time between the server and the bus.
type setClock struct {
	served, sets    atomic.Int64 // nanoseconds, sets answered
	commit, commits atomic.Int64 // nanoseconds, group commits
}

var _ server.Observer = (*setClock)(nil)

func (*setClock) Answered(string, persist.Code) {}

func (c *setClock) Served(cmd string, d time.Duration) {
	if cmd == persist.CmdSet {
		c.served.Add(int64(d))
		c.sets.Add(1)
	}
}

func (c *setClock) Committed(_ int, d time.Duration) {
	c.commit.Add(int64(d))
	c.commits.Add(1)
}

// setTimes is a snapshot of a setClock's totals.
type setTimes struct {
	served, commit time.Duration
	sets, commits  int64
}

func (c *setClock) snapshot() setTimes {
	return setTimes{served: time.Duration(c.served.Load()), commit: time.Duration(c.commit.Load()), sets: c.sets.Load(), commits: c.commits.Load()}
}

// loneSet is where the time of a lone set goes (one client, one set in
// flight, so one commit per set): what the client waited per set, and of
// that, the server's part and its commit's.
type loneSet struct {
	perSet, server, commit time.Duration
}

// loneSetBetween is the lone set of a one-client run at rate sets a second
// whose server reported a before the run and b after it; ok is false when
// the server reported no set (an environment without the clock).
func loneSetBetween(a, b setTimes, rate float64) (l loneSet, ok bool) {
	sets, commits := b.sets-a.sets, b.commits-a.commits
	if sets <= 0 || commits <= 0 || rate <= 0 {
		return loneSet{}, false
	}
	return loneSet{
		perSet: time.Duration(float64(time.Second) / rate),
		server: (b.served - a.served) / time.Duration(sets),
		commit: (b.commit - a.commit) / time.Duration(commits),
	}, true
}

// print writes l beside the floor (a bare request/reply's rate, 1 client).
func (l loneSet) print(w io.Writer, floor float64) {
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
	bus := max(l.perSet-l.server, 0)
	fmt.Fprintf(w, "a lone set (1 client): %s = %s in the persist server, from its decoded arrival to its answer (%s of it the commit), + %s on the bus and in the clients (the floor's bare round trip: %s)\n",
		us(l.perSet), us(l.server), us(l.commit), us(bus), us(time.Duration(float64(time.Second)/floor)))
}
