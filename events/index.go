package events

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// SubID names a subscription, unique within a region.
type SubID string

// Limits of one event's fan-out within one owner's subscriptions, as the
// seed's system has them: they bound the work one event can cost, since
// an owner's anchors can all sit on the event's path.
const (
	MaxMatchedPerOwner   = 50
	MaxFilterEvaluations = 200
)

// Sub is a subscription as the index holds it.
type Sub struct {
	ID     SubID
	Owner  string // the user it belongs to: the fan-out limits count per owner
	Anchor Anchor
	Filter Filter
}

// Match is one subscription an event reaches: it gets the event, or, when
// Gap is set, a gap marker in its place.
type Match struct {
	Sub *Sub
	Gap Reason // "" for the event itself
}

// ErrDuplicateSub is returned by Index.Add for an ID already present.
var ErrDuplicateSub = errors.New("events: subscription id already present")

// Index holds subscriptions by anchor token. It is safe for concurrent use.
type Index struct {
	mu      sync.RWMutex
	byToken map[string][]*Sub // each slice sorted by ID, so matching is deterministic
	byID    map[SubID]*Sub
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byToken: make(map[string][]*Sub), byID: make(map[SubID]*Sub)}
}

// Add indexes s under its anchor's token. The caller keeps no right to
// modify s afterwards.
func (x *Index) Add(s *Sub) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byID[s.ID]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateSub, s.ID)
	}
	x.byID[s.ID] = s
	tok := s.Anchor.Token()
	list := x.byToken[tok]
	i := sort.Search(len(list), func(i int) bool { return list[i].ID >= s.ID })
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = s
	x.byToken[tok] = list
	return nil
}

// Remove drops the subscription id and reports whether it was there.
func (x *Index) Remove(id SubID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.byID[id]
	if !ok {
		return false
	}
	delete(x.byID, id)
	tok := s.Anchor.Token()
	list := x.byToken[tok]
	for i, o := range list {
		if o.ID == id {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(x.byToken, tok)
	} else {
		x.byToken[tok] = list
	}
	return true
}

// Len is the number of subscriptions held.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// Tokens is the number of distinct anchor tokens held.
func (x *Index) Tokens() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byToken)
}

// Watched reports whether any subscription is anchored on tok: what a
// region announces to its peers (watch add/drop).
func (x *Index) Watched(tok string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byToken[tok]) > 0
}

// Match appends to dst the subscriptions an event of op on subject
// reaches. They are found by looking up the subject's own anchor token and
// each ancestor's (Subject.Anchors), never by scanning, nearest anchor
// first and by ID within one. Within one owner's subscriptions, at most
// MaxMatchedPerOwner get the event and at most MaxFilterEvaluations filters
// are evaluated (a costly one counting as several: Filter.cost); past
// either limit every further subscription of that owner on the path gets
// a gap marker with the limit's reason instead
// (its filter unevaluated: a marker says "you may have missed something",
// which is true whether or not the filter would have taken the event).
func (x *Index) Match(dst []Match, subject Subject, op Op) []Match {
	var tokBuf [8]string
	toks := subject.Anchors(tokBuf[:0])
	type budget struct{ matched, evals int }
	var owners map[string]*budget
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, tok := range toks {
		for _, s := range x.byToken[tok] {
			if owners == nil {
				owners = make(map[string]*budget, 4)
			}
			b := owners[s.Owner]
			if b == nil {
				b = &budget{}
				owners[s.Owner] = b
			}
			switch {
			case b.matched >= MaxMatchedPerOwner:
				dst = append(dst, Match{Sub: s, Gap: ReasonMatchedSubscriptionLimit})
				continue
			case b.evals >= MaxFilterEvaluations:
				dst = append(dst, Match{Sub: s, Gap: ReasonFilterEvaluationLimit})
				continue
			}
			rest, _ := s.Anchor.Rest(subject)
			if len(s.Filter.Ops) > 0 || s.Filter.Glob != "" {
				b.evals += s.Filter.cost(rest)
			}
			if s.Filter.Match(op, rest) {
				b.matched++
				dst = append(dst, Match{Sub: s})
			}
		}
	}
	return dst
}
