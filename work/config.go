package work

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults, as the seed has them.
const (
	// RangeSizeDefault is how many article numbers one range covers.
	RangeSizeDefault = 20_000
	// HistoryDepthDefault is how far back the planner reaches in a group
	// it sees for the first time.
	HistoryDepthDefault = 50_000
	// LeaseTTLDefault is how long a lease lives without a heartbeat.
	LeaseTTLDefault = 60 * time.Second
	// HeartbeatDefault is how often a worker renews its lease.
	HeartbeatDefault = 10 * time.Second
	// MaxAttemptsDefault is how many leases a range gets before it is
	// failed: every lease counts, whether it ended in Fail or expired;
	// Release gives its attempt back.
	MaxAttemptsDefault = 3
	// PrefetchAheadDefault is how many ranges a coordinator shard keeps
	// spooled ahead of the workers.
	PrefetchAheadDefault = 4
	// ChunkDefault is how many articles one OVER command asks for (and one
	// spool message holds).
	ChunkDefault = 1_000
	// TickDefault is the prefetcher's round.
	TickDefault = 2 * time.Second
	// TailEveryDefault is how often the main shard plans the tail.
	TailEveryDefault = 60 * time.Second
	// PlanEveryDefault is how often the main shard plans new groups'
	// history.
	PlanEveryDefault = time.Hour
	// AbandonedEveryDefault is how often the main shard finishes ranges
	// whose worker read everything and went quiet.
	AbandonedEveryDefault = 5 * time.Minute
	// RetainDoneDefault is how long a done range's record is kept after
	// it finished before the main shard retires it (see Leases.Retire):
	// far longer than anything reads it for (the last minute's
	// throughput, a finished lease's clean-up within three abandoned
	// rounds, 15 minutes), and a day of per-range detail for an operator
	// looking into what a worker did.
	RetainDoneDefault = 24 * time.Hour
	// ShareEveryDefault is how often a process renews its share and
	// recomputes its grant.
	ShareEveryDefault = 5 * time.Second
	// ProgressEveryDefault is how often the main shard logs its progress.
	ProgressEveryDefault = 30 * time.Second
	// StopWaitDefault bounds how long a stopping coordinator waits for the
	// chunks in flight.
	StopWaitDefault = 15 * time.Second
)

// Share priorities of the processes that talk to the provider: the higher
// gets more of what is left after every minimum.
const (
	PriorityCoordinator = 10
	PriorityProber      = 5
	// PriorityPostProcess is the post-processor's (usenet/postproc): it
	// reads a few bodies per release, and must never take the headers'
	// connections away (with the default limit of 4 it gets 1).
	PriorityPostProcess = 3
	PriorityWorker      = 1
)

// Shard is a coordinator's part of the prefetching: ranges with
// id % Count == Index-1. Shard 1 also plans and finishes abandoned leases.
type Shard struct{ Index, Count int }

// ParseShard reads "i/n" with 1 <= i <= n.
func ParseShard(s string) (Shard, error) {
	bad := fmt.Errorf(`--shard: want "i/n" with 1 <= i <= n, not %q`, s)
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, bad
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return Shard{}, bad
	}
	return Shard{Index: i, Count: n}, nil
}

// String is "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Main reports whether the shard plans (shard 1).
func (s Shard) Main() bool { return s.Index == 1 }

// Owns reports whether range id is this shard's to prefetch.
func (s Shard) Owns(id uint64) bool { return id%uint64(s.Count) == uint64(s.Index-1) }

// Groups selects the groups of a source to index: exact names, or
// wildmat-style globs ("alt.binaries.*") matched over LIST ACTIVE.
type Groups struct{ Patterns []string }

// ParseGroups reads a comma-separated list of names and globs.
func ParseGroups(s string) (Groups, error) {
	var g Groups
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.ContainsAny(p, " \t\r\n!") {
			return Groups{}, fmt.Errorf("--groups: %q is not a group name or glob", p)
		}
		g.Patterns = append(g.Patterns, p)
	}
	if len(g.Patterns) == 0 {
		return Groups{}, fmt.Errorf("--groups: no group given in %q", s)
	}
	return g, nil
}

// Globs reports whether any pattern needs LIST ACTIVE to resolve.
func (g Groups) Globs() bool {
	for _, p := range g.Patterns {
		if strings.ContainsAny(p, "*?[") {
			return true
		}
	}
	return false
}

// Wildmat is the patterns as one LIST ACTIVE argument.
func (g Groups) Wildmat() string { return strings.Join(g.Patterns, ",") }
