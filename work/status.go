package work

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// Status is a snapshot of a source's work, for `switchyard work status`
// and the dashboard.
type Status struct {
	Source string        `json:"source"`
	Groups []GroupStatus `json:"groups"`
	// Ranges counts ranges by state; every state is present. Done counts
	// the retired ones too (see Retired).
	Ranges map[RangeState]int `json:"ranges"`
	// Articles counts the article numbers of the ranges by state, the
	// retired ones among the done.
	Articles map[RangeState]int64 `json:"articles"`
	Leases   []LeaseStatus        `json:"leases"`
	// Shares are the live entries of the connection budget.
	Shares []ShareEntry `json:"shares"`
	// Throughput is the articles of the ranges finished in the last
	// ThroughputWindow, per second.
	Throughput float64 `json:"articles_per_second"`
	// Failed lists the failed ranges (attempts used up).
	Failed []Range `json:"failed,omitempty"`
	// Retired is how many of the done ranges were retired: their records
	// deleted RetainDone after they finished, their counts kept in their
	// group's record.
	Retired int64 `json:"retired"`
	// Broken lists the records of the groups, ranges and leases streams
	// that do not decode, which every reader skips (see BrokenRecord): a
	// range listed here is neither counted above nor leased.
	Broken []BrokenRecord `json:"broken,omitempty"`
}

// GroupStatus is one group's line of Status.
type GroupStatus struct {
	Name           string `json:"name"`
	Low            int64  `json:"low"`
	High           int64  `json:"high"`
	PlannedThrough int64  `json:"planned_through"`
	// Done counts the article numbers of its done ranges, retired or not.
	Done int64 `json:"done"`
	// Planned counts the article numbers of all its ranges, retired or not.
	Planned int64 `json:"planned"`
	// Unmatched adds up the "unmatched" counts its done ranges' indexer
	// results hold (the usenet indexer's articles without a file name or
	// part counter, which no release is made of).
	Unmatched int64 `json:"unmatched"`
}

// LeaseStatus is one live lease.
type LeaseStatus struct {
	Range    uint64 `json:"range"`
	Group    string `json:"group"`
	First    int64  `json:"first"`
	Last     int64  `json:"last"`
	Holder   string `json:"holder"`
	Progress int64  `json:"progress"`
	ReadAll  bool   `json:"read_all,omitempty"`
	Expires  int64  `json:"expires"` // unix milliseconds
}

// ThroughputWindow is the span Status.Throughput averages over.
const ThroughputWindow = time.Minute

// Status reads a snapshot of the source's work.
func (s *Store) Status(ctx context.Context) (Status, error) {
	st := Status{Source: s.source, Ranges: map[RangeState]int{}, Articles: map[RangeState]int64{}}
	for _, state := range States {
		st.Ranges[state] = 0
		st.Articles[state] = 0
	}
	groups, broken, err := listJSON[Group](ctx, s, s.groups)
	if err != nil {
		return st, fmt.Errorf("work status: groups: %w", err)
	}
	st.Broken = append(st.Broken, broken...)
	ranges, broken, err := listJSON[Range](ctx, s, s.ranges)
	if err != nil {
		return st, fmt.Errorf("work status: ranges: %w", err)
	}
	st.Broken = append(st.Broken, broken...)
	leases, broken, err := listJSON[Lease](ctx, s, s.leases)
	if err != nil {
		return st, fmt.Errorf("work status: leases: %w", err)
	}
	st.Broken = append(st.Broken, broken...)
	table, err := s.ShareTable(ctx)
	if err != nil && !errors.Is(err, persist.ErrNotFound) {
		return st, fmt.Errorf("work status: shares: %w", err)
	}
	// A status reader keeps no history of the table, so an entry counts
	// as gone once its Seen is older than its TTL by this host's clock
	// (participants judge by their own clocks; see Share).
	now := time.Now()
	for _, e := range table.Val {
		if !staleByWallClock(e, now) {
			st.Shares = append(st.Shares, e)
		}
	}
	byGroup := map[string]*GroupStatus{}
	// Ranges a group record counts as retired whose records may still be
	// there: counted once, as retired.
	counted := map[uint64]bool{}
	for _, g := range groups {
		ret := g.Val.Retired
		gs := GroupStatus{Name: g.Val.Name, Low: g.Val.Low, High: g.Val.High, PlannedThrough: g.Val.PlannedThrough,
			Done: ret.Articles, Planned: ret.Articles, Unmatched: ret.Unmatched}
		st.Groups = append(st.Groups, gs)
		st.Retired += ret.Ranges
		st.Ranges[StateDone] += int(ret.Ranges)
		st.Articles[StateDone] += ret.Articles
		for _, id := range g.Val.Retiring {
			counted[id] = true
		}
	}
	for i := range st.Groups {
		byGroup[st.Groups[i].Name] = &st.Groups[i]
	}
	byID := map[uint64]Range{}
	since := time.Now().Add(-ThroughputWindow).UnixMilli()
	var recent int64
	for _, v := range ranges {
		r := v.Val
		byID[r.ID] = r
		if counted[r.ID] {
			continue
		}
		st.Ranges[r.State]++
		st.Articles[r.State] += r.Size()
		if g := byGroup[r.Group]; g != nil {
			g.Planned += r.Size()
			if r.State == StateDone {
				g.Done += r.Size()
				g.Unmatched += resultUnmatched(r.Result)
			}
		}
		if r.State == StateDone && r.Updated >= since {
			// The articles the range held, not its span of numbers: a
			// group's gaps (expired, cancelled) are no work done.
			recent += r.Articles
		}
		if r.State == StateFailed {
			st.Failed = append(st.Failed, r)
		}
	}
	st.Throughput = float64(recent) / ThroughputWindow.Seconds()
	for _, v := range leases {
		l := v.Val
		r := byID[l.Range]
		st.Leases = append(st.Leases, LeaseStatus{Range: l.Range, Group: r.Group, First: r.First, Last: r.Last, Holder: l.Holder, Progress: l.Progress, ReadAll: l.ReadAll, Expires: l.Expires})
	}
	slices.SortFunc(st.Leases, func(a, b LeaseStatus) int { return cmp.Compare(a.Range, b.Range) })
	return st, nil
}

// resultUnmatched is the "unmatched" count of an indexer's range result,
// 0 when it has none (another indexer, or no result).
func resultUnmatched(raw json.RawMessage) int64 {
	var res struct {
		Unmatched int64 `json:"unmatched"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &res) != nil {
		return 0
	}
	return res.Unmatched
}
