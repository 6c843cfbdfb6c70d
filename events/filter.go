package events

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Op is what happened to a subject.
type Op string

// The ops of an event.
const (
	OpSet    Op = "set"    // a message was stored (a key set, or a message appended)
	OpDelete Op = "delete" // a message was removed (deleted, or expired)
)

// Limits of a filter's glob, as the seed's system has them.
const (
	MaxGlobBytes    = 256
	MaxGlobSegments = 16
)

// ErrBadFilter is wrapped by every error of ParseFilter.
var ErrBadFilter = errors.New("bad filter")

// Filter narrows what an anchored subscription hears. The zero Filter
// takes everything.
type Filter struct {
	// Ops are the families taken, each once; empty means all.
	Ops []Op
	// Glob, when set, must match the part of the subject's path below the
	// anchor (Anchor.Rest), segment by segment: '*', '?' and [classes]
	// within one segment as path.Match has them, and a "**" segment for any
	// number of segments (none included). The anchor's own subject has the
	// empty rest, which only "" and "**" match.
	Glob string

	segs []string
}

// ParseFilter checks ops and glob and returns the filter they make. An op
// named twice is taken once: the filter's Ops hold each family at most
// once, in the order first named, however long the list a client sent.
func ParseFilter(ops []string, glob string) (Filter, error) {
	var f Filter
	for _, o := range ops {
		switch Op(o) {
		case OpSet, OpDelete:
			if !slices.Contains(f.Ops, Op(o)) {
				f.Ops = append(f.Ops, Op(o))
			}
		default:
			return Filter{}, fmt.Errorf("%w: op %q is not set or delete", ErrBadFilter, o)
		}
	}
	if glob == "" {
		return f, nil
	}
	if len(glob) > MaxGlobBytes {
		return Filter{}, fmt.Errorf("%w: glob is %d bytes, over %d", ErrBadFilter, len(glob), MaxGlobBytes)
	}
	segs := strings.Split(glob, "/")
	if len(segs) > MaxGlobSegments {
		return Filter{}, fmt.Errorf("%w: glob has %d segments, over %d", ErrBadFilter, len(segs), MaxGlobSegments)
	}
	for _, s := range segs {
		if s == "**" {
			continue
		}
		if strings.Contains(s, "**") {
			return Filter{}, fmt.Errorf("%w: glob segment %q: ** must be a whole segment", ErrBadFilter, s)
		}
		if _, err := path.Match(s, ""); err != nil {
			return Filter{}, fmt.Errorf("%w: glob segment %q: %v", ErrBadFilter, s, err)
		}
	}
	f.Glob, f.segs = glob, segs
	return f, nil
}

// Match reports whether an event of op whose path below the anchor is
// rest passes the filter.
func (f *Filter) Match(op Op, rest string) bool {
	if len(f.Ops) > 0 {
		found := false
		for _, o := range f.Ops {
			found = found || o == op
		}
		if !found {
			return false
		}
	}
	if f.Glob == "" {
		return true
	}
	var parts []string
	if rest != "" {
		parts = strings.Split(rest, "/")
	}
	return matchSegs(f.segs, parts)
}

// filterEvalUnit is the work one evaluation counts for against an
// owner's MaxFilterEvaluations, in glob bytes times path bytes (a glob of
// 64 bytes on a path of 64).
const filterEvalUnit = 64 * 64

// cost is what evaluating f on rest counts against MaxFilterEvaluations:
// one, or one per filterEvalUnit of its glob's length times rest's. Within
// a segment path.Match tries what follows a '*' at every position, so an
// evaluation's work grows with both: a 256-byte glob on a 4 KiB key took
// ~2 ms, 8,000 times an ordinary one, and 200 of one owner's held the
// router's loop for 400 ms per event. Counted so, an owner's filters cost
// an event at most the budget's work and one evaluation more.
func (f *Filter) cost(rest string) int {
	return max(1, (len(f.Glob)*len(rest)+filterEvalUnit-1)/filterEvalUnit)
}

// matchSegs matches glob segments against path segments, "**" standing
// for any number of them. It is the usual dynamic program over (glob
// segment, path segment) — a recursive "try every length" would take time
// exponential in the number of "**" segments — so the work is at most
// MaxGlobSegments × the path's segments calls of path.Match.
func matchSegs(glob, parts []string) bool {
	hasAny := false
	for _, g := range glob {
		hasAny = hasAny || g == "**"
	}
	if !hasAny {
		if len(glob) != len(parts) {
			return false
		}
		for i, g := range glob {
			if ok, _ := path.Match(g, parts[i]); !ok {
				return false
			}
		}
		return true
	}
	// dp[j]: the glob segments so far match parts[:j].
	dp := make([]bool, len(parts)+1)
	next := make([]bool, len(parts)+1)
	dp[0] = true
	for _, g := range glob {
		if g == "**" {
			seen := false
			for j := range dp {
				seen = seen || dp[j]
				next[j] = seen
			}
		} else {
			next[0] = false
			for j := 1; j <= len(parts); j++ {
				next[j] = false
				if dp[j-1] {
					next[j], _ = path.Match(g, parts[j-1])
				}
			}
		}
		dp, next = next, dp
	}
	return dp[len(parts)]
}
