package work

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/persist"
)

// PlannerConfig configures a Planner.
type PlannerConfig struct {
	// Groups selects the groups to plan. Required.
	Groups Groups
	// RangeSize is how many article numbers one range covers. Zero means
	// RangeSizeDefault.
	RangeSize int64
	// HistoryDepth is how far back the history of a group seen for the
	// first time reaches. Zero means HistoryDepthDefault.
	HistoryDepth int64
	// MaxTailRanges bounds how many tail ranges one round cuts for one
	// group; a longer tail is planned on by the next rounds, from where
	// this one stopped (the group's planned_through shows how far it got).
	// The provider's high mark is outside input: a jump from 1,000 to
	// 10^12 would otherwise be cut into tens of millions of ranges in one
	// round, listed in one group record. Zero means MaxTailRangesDefault.
	MaxTailRanges int
}

// MaxTailRangesDefault is PlannerConfig.MaxTailRanges' default: 100
// ranges (2,000,000 articles at RangeSizeDefault) a round, a minute, per
// group, far above what a group gets in a minute.
const MaxTailRangesDefault = 100

// PlanStats says what one planning call did.
type PlanStats struct {
	// Groups is how many groups got new ranges.
	Groups int
	// Ranges is how many ranges this call cut (ranges it only completed
	// for a planner that died are not counted).
	Ranges int
}

// Planner cuts the selected groups' articles into ranges. Any number of
// planners, in any number of processes, may plan one source at once: each
// group record is claimed with a compare-and-set before its ranges are
// written, so no article is planned twice, and the claim lists the ranges
// so that none is lost if the planner dies before writing them.
type Planner struct {
	st   *Store
	pool *nntp.Pool
	cfg  PlannerConfig

	// hook, when set (by tests), is called before the claim of a group
	// record (step "claim") and before the ranges of a claim are written
	// (step "write"), with the record as the planner read it: a planner
	// frozen there is resumed with a stale record.
	hook func(step string, g Group)
}

// NewPlanner returns a planner that probes groups through pool.
func NewPlanner(st *Store, pool *nntp.Pool, cfg PlannerConfig) (*Planner, error) {
	if st == nil || pool == nil {
		return nil, errors.New("work: planner: nil store or pool")
	}
	if len(cfg.Groups.Patterns) == 0 {
		return nil, errors.New("work: planner: no groups selected")
	}
	if cfg.RangeSize == 0 {
		cfg.RangeSize = RangeSizeDefault
	}
	if cfg.HistoryDepth == 0 {
		cfg.HistoryDepth = HistoryDepthDefault
	}
	if cfg.MaxTailRanges == 0 {
		cfg.MaxTailRanges = MaxTailRangesDefault
	}
	if cfg.RangeSize < 0 || cfg.HistoryDepth < 0 || cfg.MaxTailRanges < 0 {
		return nil, fmt.Errorf("work: planner: negative range size %d, history depth %d or max tail ranges %d", cfg.RangeSize, cfg.HistoryDepth, cfg.MaxTailRanges)
	}
	return &Planner{st: st, pool: pool, cfg: cfg}, nil
}

// probe is one group's marks as the server gave them.
type probe struct {
	name      string
	low, high int64
	at        int64 // unix milliseconds
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// selected reports whether name matches one of the patterns (wildmat's
// *, ? and [...] are path.Match's; group names hold no '/').
func (p *Planner) selected(name string) bool {
	for _, pat := range p.cfg.Groups.Patterns {
		if pat == name {
			return true
		}
		if ok, _ := path.Match(pat, name); ok && isGlob(pat) {
			return true
		}
	}
	return false
}

// groupProbe asks the server for one group's marks; ok is false when the
// server has no such group.
func (p *Planner) groupProbe(ctx context.Context, name string) (probe, bool, error) {
	var g nntp.Group
	err := p.pool.Do(ctx, func(c *nntp.Conn) error {
		var err error
		g, err = c.Group(ctx, name)
		return err
	})
	if errors.Is(err, nntp.ErrNoSuchGroup) {
		return probe{}, false, nil
	}
	if err != nil {
		return probe{}, false, fmt.Errorf("work: plan: group %s: %w", name, err)
	}
	return probe{name: name, low: g.Low, high: g.High, at: time.Now().UnixMilli()}, true, nil
}

// resolve lists the selected groups with their marks: LIST ACTIVE for the
// globs, GROUP for each exact name LIST ACTIVE did not already answer. A
// name whose GROUP fails is left out and its error returned with the
// groups that answered, as PlanTail does: one failing probe (a pooled
// connection the provider closed while idle, a group the account may not
// read) must not hold up every other group's history until the next round.
func (p *Planner) resolve(ctx context.Context) ([]probe, error) {
	seen := map[string]bool{}
	var out []probe
	if p.cfg.Groups.Globs() {
		err := p.pool.Do(ctx, func(c *nntp.Conn) error {
			now := time.Now().UnixMilli()
			return c.ListActive(ctx, p.cfg.Groups.Wildmat(), func(g nntp.ActiveGroup) error {
				// Filtered again here: a server may read the wildmat more
				// loosely than we do.
				if !seen[g.Name] && p.selected(g.Name) {
					seen[g.Name] = true
					out = append(out, probe{name: g.Name, low: g.Low, high: g.High, at: now})
				}
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("work: plan: list active: %w", err)
		}
	}
	var errs []error
	for _, name := range p.cfg.Groups.Patterns {
		if isGlob(name) || seen[name] {
			continue
		}
		seen[name] = true
		pr, ok, err := p.groupProbe(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		if ok {
			out = append(out, pr)
		}
	}
	return out, errors.Join(errs...)
}

// PlanAll plans the history of every selected group that has no record
// yet: ranges from max(low, high-HistoryDepth+1) to high. Groups with a
// record get their marks updated. First, every group record's claim left
// by a dead planner is written out, selected and probed or not.
func (p *Planner) PlanAll(ctx context.Context) (PlanStats, error) {
	cerr := p.completeClaims(ctx)
	if ctx.Err() != nil {
		return PlanStats{}, cerr
	}
	probes, rerr := p.resolve(ctx)
	if ctx.Err() != nil {
		return PlanStats{}, errors.Join(cerr, rerr)
	}
	st, err := p.planEach(ctx, probes, KindHistory)
	return st, errors.Join(cerr, rerr, err)
}

// completeClaims writes out the ranges every group record still claims
// (a planner died after step (c)), whether or not the group is selected
// or answers a probe now: planGroup completes only the groups it probed,
// and a group dropped from the selection, or whose GROUP fails, would
// otherwise keep its claimed ranges unwritten, and their articles
// unindexed, for good.
func (p *Planner) completeClaims(ctx context.Context) error {
	recs, err := p.st.Groups(ctx)
	if err != nil {
		return fmt.Errorf("work: plan: claims: %w", err)
	}
	var errs []error
	for _, g := range recs {
		if len(g.Val.Pending) == 0 {
			continue
		}
		// A conflict means the record changed: whoever changed it wrote
		// the claim out or will (planGroup does before anything else).
		if err := p.writePending(ctx, g); err != nil && !errors.Is(err, ErrConflict) {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PlanTail plans, for every selected group that has a record, its new
// articles: PlannedThrough+1 to the high mark GROUP reports now, in at most
// MaxTailRanges ranges (the rest in the next rounds). Like PlanAll, it
// first writes out every group record's dead planner's claim.
func (p *Planner) PlanTail(ctx context.Context) (PlanStats, error) {
	cerr := p.completeClaims(ctx)
	if ctx.Err() != nil {
		return PlanStats{}, cerr
	}
	recs, err := p.st.Groups(ctx)
	if err != nil {
		return PlanStats{}, errors.Join(cerr, fmt.Errorf("work: plan tail: %w", err))
	}
	var probes []probe
	errs := []error{cerr}
	for _, g := range recs {
		if !p.selected(g.Val.Name) {
			continue
		}
		pr, ok, err := p.groupProbe(ctx, g.Val.Name)
		if err != nil {
			if ctx.Err() != nil {
				return PlanStats{}, err
			}
			errs = append(errs, err)
			continue
		}
		if ok {
			probes = append(probes, pr)
		}
	}
	st, err := p.planEach(ctx, probes, KindTail)
	return st, errors.Join(append(errs, err)...)
}

// planEach plans each probed group, going on past a group's error so one
// bad group does not hold up the others.
func (p *Planner) planEach(ctx context.Context, probes []probe, kind string) (PlanStats, error) {
	var st PlanStats
	var errs []error
	for _, pr := range probes {
		n, err := p.planGroup(ctx, pr, kind)
		if n > 0 {
			st.Groups++
			st.Ranges += n
		}
		if err != nil {
			if ctx.Err() != nil {
				return st, err
			}
			errs = append(errs, err)
		}
	}
	return st, errors.Join(errs...)
}

// cut splits first..last into ranges of at most RangeSize articles, the
// first most of them (the rest of first..last is left out).
func (p *Planner) cut(name, kind string, first, last int64, most int) []Range {
	var out []Range
	for lo, hi := range spans(first, last, p.cfg.RangeSize) {
		if len(out) >= most {
			break
		}
		out = append(out, Range{Group: name, First: lo, Last: hi, Kind: kind, State: StatePlanned})
	}
	return out
}

// spans cuts first..last into runs of at most size article numbers, in
// order. It never computes a number past last: the provider's high mark
// may be as high as 2^63-1 (what NNTP's parser takes), and a start
// stepped by size past it wraps around to a negative number, below last
// again, so the walk never ended (the planner and the prefetcher appended
// until they ran out of memory); an end of lo+size-1 with a size that
// large wrapped below its start. A size below 1 counts as 1.
func spans(first, last, size int64) iter.Seq2[int64, int64] {
	return func(yield func(lo, hi int64) bool) {
		size = max(size, 1)
		for lo := first; lo <= last; {
			hi := last
			// last-lo in uint64 is exact for lo <= last, however far
			// apart they are.
			if uint64(last)-uint64(lo) >= uint64(size) {
				hi = lo + size - 1
			}
			if !yield(lo, hi) || hi == last {
				return
			}
			lo = hi + 1
		}
	}
}

// planGroup runs the write-ahead protocol for one group (see
// Group.Pending) and returns how many ranges it cut: history for a group
// without a record when kind is KindHistory, the tail for one with a record
// when kind is KindTail, and in every case the marks of the probe.
func (p *Planner) planGroup(ctx context.Context, pr probe, kind string) (int, error) {
	for {
		cur, err := p.st.Group(ctx, pr.name)
		exists := err == nil
		if err != nil && !errors.Is(err, persist.ErrNotFound) {
			return 0, fmt.Errorf("work: plan %s: %w", pr.name, err)
		}
		// (a) A claim whose ranges may not be written yet: write them
		// first, so they are never lost.
		if exists && len(cur.Val.Pending) > 0 {
			if err := p.writePending(ctx, cur); err != nil && !errors.Is(err, ErrConflict) {
				return 0, err
			}
			continue // read the record again, whoever cleared the claim
		}
		g := cur.Val
		if !exists {
			g = Group{Name: pr.name}
		}
		// The marks of the newest probe win; a planner that probed before
		// another's claim must not move them back.
		if pr.at >= g.ProbedAt {
			g.Low, g.High, g.ProbedAt = pr.low, pr.high, pr.at
		}
		var ranges []Range
		switch {
		case !exists && kind == KindHistory:
			from := max(pr.low, pr.high-p.cfg.HistoryDepth+1, 1)
			g.HistoryFrom, g.Depth = from, p.cfg.HistoryDepth
			g.PlannedThrough = max(pr.high, from-1)
			// Bounded by the configuration (HistoryDepth/RangeSize), not
			// by the provider.
			ranges = p.cut(pr.name, KindHistory, from, pr.high, math.MaxInt)
		case exists && kind == KindTail && pr.high > g.PlannedThrough:
			// Articles the server expired before we got to them are gone:
			// start at its low mark.
			from := max(g.PlannedThrough+1, pr.low)
			g.PlannedThrough = pr.high
			ranges = p.cut(pr.name, KindTail, from, pr.high, p.cfg.MaxTailRanges)
			if len(ranges) > 0 {
				// The rest of a long tail is the next rounds'.
				g.PlannedThrough = ranges[len(ranges)-1].Last
			}
		case !exists:
			return 0, nil // the tail of a group nobody planned: PlanAll's job
		}
		if len(ranges) == 0 {
			if _, err := p.st.PutGroup(ctx, g, cur.Seq); errors.Is(err, ErrConflict) {
				continue
			} else if err != nil {
				return 0, fmt.Errorf("work: plan %s: %w", pr.name, err)
			}
			return 0, nil
		}
		// (b) ids first: if the claim below loses, they are simply unused.
		id, err := p.st.AllocIDs(ctx, len(ranges))
		if err != nil {
			return 0, fmt.Errorf("work: plan %s: %w", pr.name, err)
		}
		for i := range ranges {
			ranges[i].ID = id + uint64(i)
		}
		// (c) the claim: the record moves past the new ranges and lists them.
		g.Pending = ranges
		if p.hook != nil {
			p.hook("claim", cur.Val)
		}
		seq, err := p.st.PutGroup(ctx, g, cur.Seq)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("work: plan %s: %w", pr.name, err)
		}
		// (d) and (e): the ranges, then the claim away.
		if err := p.writePending(ctx, Versioned[Group]{Seq: seq, Val: g}); err != nil && !errors.Is(err, ErrConflict) {
			return len(ranges), err
		}
		return len(ranges), nil
	}
}

// writePending writes the ranges a group record claims (one that already
// exists was written by whoever got there first) and clears the claim with
// a compare-and-set; ErrConflict when the record changed meanwhile, or no
// longer claims the ranges.
//
// Each range is written only while the record, read just before, still
// claims it. A range's "must not exist" does not tell a range never written
// from one written out by another planner, done, and retired (its record
// deleted): a planner that read the claim and then stalled past
// RetainDone (a frozen process, a paused VM) wrote the retired range again,
// to be indexed and counted a second time. Once another planner has
// cleared the claim, none of its ranges is this one's to write; while the
// record claims a range, Retire leaves it alone. (A stall of that length
// between the read and the write itself still could: closing that needs a
// range write conditional on the group record, which persist, with its
// compare-and-set on one key, does not offer.)
func (p *Planner) writePending(ctx context.Context, g Versioned[Group]) error {
	if p.hook != nil {
		p.hook("write", g.Val)
	}
	for _, r := range g.Val.Pending {
		cur, err := p.st.Group(ctx, g.Val.Name)
		if err != nil {
			return fmt.Errorf("work: plan %s: range %d: %w", g.Val.Name, r.ID, err)
		}
		if !slices.ContainsFunc(cur.Val.Pending, func(c Range) bool { return c.ID == r.ID }) {
			return fmt.Errorf("work: plan %s: range %d no longer claimed: %w", g.Val.Name, r.ID, ErrConflict)
		}
		if _, err := p.st.PutRange(ctx, r, 0); err != nil && !errors.Is(err, ErrConflict) {
			return fmt.Errorf("work: plan %s: range %d: %w", g.Val.Name, r.ID, err)
		}
	}
	ng := g.Val
	ng.Pending = nil
	if _, err := p.st.PutGroup(ctx, ng, g.Seq); err != nil {
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("work: plan %s: %w", g.Val.Name, err)
	}
	return nil
}
