package work_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/switchyard-dev/switchyard/work"
)

func shareEntry(name string, prio, min, max int) work.ShareEntry {
	return work.ShareEntry{Name: name, Priority: prio, Min: min, Max: max}
}

func TestGrants(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int
		entries []work.ShareEntry
		want    map[string]int
	}{
		{"empty", 10, nil, map[string]int{}},
		{"alone takes the limit", 10, []work.ShareEntry{shareEntry("a", 1, 0, 0)}, map[string]int{"a": 10}},
		{"alone capped at max", 10, []work.ShareEntry{shareEntry("a", 1, 1, 4)}, map[string]int{"a": 4}},
		{"max above limit is the limit", 3, []work.ShareEntry{shareEntry("a", 1, 0, 50)}, map[string]int{"a": 3}},
		{"zero limit", 0, []work.ShareEntry{shareEntry("a", 1, 2, 0)}, map[string]int{"a": 0}},
		{"equal priorities split evenly", 10,
			[]work.ShareEntry{shareEntry("a", 1, 0, 0), shareEntry("b", 1, 0, 0)},
			map[string]int{"a": 5, "b": 5}},
		{"mins first, the rest by priority", 20,
			// mins take 2+1+4 = 7; 13 left split 10:5:1 → 8.1, 4.1, 0.8:
			// the floors, and the 1 rounding left to the largest remainder.
			[]work.ShareEntry{shareEntry("coord", 10, 2, 0), shareEntry("prober", 5, 1, 0), shareEntry("worker", 1, 4, 0)},
			map[string]int{"coord": 2 + 8, "prober": 1 + 4, "worker": 4 + 1}},
		{"capping redistributes", 20,
			// coord is capped at 5; the 15 others go 5:1 to prober and worker.
			[]work.ShareEntry{shareEntry("coord", 10, 1, 5), shareEntry("prober", 5, 1, 0), shareEntry("worker", 1, 1, 0)},
			map[string]int{"coord": 5, "prober": 1 + 11, "worker": 1 + 2}},
		{"mins exceed the limit: higher priority first", 5,
			[]work.ShareEntry{shareEntry("a", 1, 3, 0), shareEntry("b", 10, 3, 0), shareEntry("c", 5, 3, 0)},
			map[string]int{"b": 3, "c": 2, "a": 0}},
		{"mins exceed the limit: ties by name", 4,
			[]work.ShareEntry{shareEntry("b", 1, 3, 0), shareEntry("a", 1, 3, 0)},
			map[string]int{"a": 3, "b": 1}},
		{"zero priority only gets leftovers", 10,
			[]work.ShareEntry{shareEntry("a", 0, 1, 0), shareEntry("b", 3, 0, 6)},
			map[string]int{"a": 4, "b": 6}},
		{"all zero priority split evenly", 9,
			[]work.ShareEntry{shareEntry("a", 0, 0, 0), shareEntry("b", 0, 0, 0), shareEntry("c", 0, 0, 0)},
			map[string]int{"a": 3, "b": 3, "c": 3}},
		{"everyone capped leaves connections unused", 10,
			[]work.ShareEntry{shareEntry("a", 1, 0, 2), shareEntry("b", 9, 0, 3)},
			map[string]int{"a": 2, "b": 3}},
		{"max under min counts as min", 10,
			[]work.ShareEntry{shareEntry("a", 1, 4, 2), shareEntry("b", 1, 0, 1)},
			map[string]int{"a": 4, "b": 1}},
		{"rounding: one each by priority", 2,
			[]work.ShareEntry{shareEntry("a", 1, 0, 0), shareEntry("b", 2, 0, 0), shareEntry("c", 3, 0, 0)},
			map[string]int{"c": 1, "b": 1, "a": 0}},
		{"a repeated name counts once, the most recently seen", 10,
			[]work.ShareEntry{{Name: "a", Priority: 1, Max: 2, Seen: 1}, {Name: "a", Priority: 1, Max: 7, Seen: 2}},
			map[string]int{"a": 7}},
		{"one name, two ids: two participants keyed by id", 10,
			[]work.ShareEntry{{Name: "a", ID: "1", Priority: 1}, {Name: "a", ID: "2", Priority: 1}},
			map[string]int{"1": 5, "2": 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := work.Grants(tc.entries, tc.limit)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("Grants(%v, %d) = %v, want %v", tc.entries, tc.limit, got, tc.want)
			}
		})
	}
}

// TestGrantsProperties checks, over random tables, what every participant
// relies on: the sum never exceeds the limit and reaches it unless every
// entry is full, each entry gets its Min when the minimums fit and never
// more than its Max, the result does not depend on the entries' order, a
// higher priority never gets less than a lower one with the same Min and
// Max, and an entry leaving never lowers another's grant.
func TestGrantsProperties(t *testing.T) {
	grantsProperties(t, func(rng *rand.Rand) int { return rng.IntN(12) })
}

// grantsProperties checks TestGrantsProperties' properties over random
// tables whose priorities prio draws; a higher priority is one higher once
// both are clamped to ±PriorityMax, as Grants counts them.
func grantsProperties(t *testing.T, prio func(*rand.Rand) int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		limit := rng.IntN(40)
		n := rng.IntN(7)
		es := make([]work.ShareEntry, n)
		for j := range es {
			mn := rng.IntN(6)
			mx := 0
			if rng.IntN(2) == 0 {
				mx = mn + rng.IntN(10)
			}
			es[j] = shareEntry(fmt.Sprintf("p%d", j), prio(rng), mn, mx)
		}
		desc := fmt.Sprintf("case %d: limit %d, %+v", i, limit, es)
		g := work.Grants(es, limit)
		sum, mins, maxes := 0, 0, 0
		for _, e := range es {
			eff := e.Max
			if eff == 0 || eff > limit {
				eff = limit
			}
			eff = max(eff, min(e.Min, limit))
			sum += g[e.Name]
			mins += e.Min
			maxes += eff
			if g[e.Name] > eff {
				t.Fatalf("%s: %s gets %d above its max %d", desc, e.Name, g[e.Name], eff)
			}
		}
		if len(g) != n {
			t.Fatalf("%s: %d grants for %d entries", desc, len(g), n)
		}
		if sum > limit {
			t.Fatalf("%s: sum %d above limit (%v)", desc, sum, g)
		}
		if want := min(limit, maxes); sum != want {
			t.Fatalf("%s: sum %d, want %d (%v)", desc, sum, want, g)
		}
		if mins <= limit {
			for _, e := range es {
				if g[e.Name] < e.Min {
					t.Fatalf("%s: %s gets %d below its min %d (%v)", desc, e.Name, g[e.Name], e.Min, g)
				}
			}
		}
		for _, a := range es {
			for _, b := range es {
				if clampPriority(a.Priority) > clampPriority(b.Priority) && a.Min == b.Min && a.Max == b.Max && g[a.Name] < g[b.Name] {
					t.Fatalf("%s: %s (priority %d) gets %d, less than %s (priority %d) with %d",
						desc, a.Name, a.Priority, g[a.Name], b.Name, b.Priority, g[b.Name])
				}
			}
		}
		shuffled := append([]work.ShareEntry(nil), es...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if g2 := work.Grants(shuffled, limit); !maps.Equal(g, g2) {
			t.Fatalf("%s: order changes the grants: %v vs %v", desc, g, g2)
		}
		if n > 0 {
			k := rng.IntN(n)
			rest := append(append([]work.ShareEntry(nil), es[:k]...), es[k+1:]...)
			g3 := work.Grants(rest, limit)
			for _, e := range rest {
				if g3[e.Name] < g[e.Name] {
					t.Fatalf("%s: %s leaving lowers %s from %d to %d", desc, es[k].Name, e.Name, g[e.Name], g3[e.Name])
				}
			}
		}
	}
}

func clampPriority(p int) int { return min(max(p, -work.PriorityMax), work.PriorityMax) }

// Priorities at the ends of int, and beyond ±PriorityMax, are counted as
// the bound: the grants stay within the limit, every entry gets its Min
// when the minimums fit, equal priorities split evenly, and the random
// tables of TestGrantsProperties keep their properties.
// (Was: Grants multiplied priorities as written: the weighting overflowed, so of two entries of priority math.MaxInt one took every connection past the minimums, and a priority of math.MaxInt/3+1 got less than one of math.MaxInt/3.)
func TestGrantsExtremePriorities(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int
		entries []work.ShareEntry
		want    map[string]int
	}{
		{"two of math.MaxInt split evenly", 10,
			[]work.ShareEntry{shareEntry("a", math.MaxInt, 0, 0), shareEntry("b", math.MaxInt, 0, 0)},
			map[string]int{"a": 5, "b": 5}},
		{"both beyond the bound count as equal", 10,
			[]work.ShareEntry{shareEntry("a", math.MaxInt/3+1, 0, 0), shareEntry("b", math.MaxInt/3, 0, 0)},
			map[string]int{"a": 5, "b": 5}},
		{"math.MaxInt against a coordinator: PriorityMax to 10", 12,
			[]work.ShareEntry{shareEntry("a", math.MaxInt, 1, 0), shareEntry("coord", work.PriorityCoordinator, 1, 0)},
			map[string]int{"a": 11, "coord": 1}},
		{"math.MinInt gets its min and the leftovers", 10,
			[]work.ShareEntry{shareEntry("a", math.MinInt, 2, 0), shareEntry("b", math.MaxInt, 1, 5)},
			map[string]int{"a": 5, "b": 5}},
		{"mins that do not fit go by the clamped priority", 3,
			[]work.ShareEntry{shareEntry("a", math.MinInt, 2, 0), shareEntry("b", -1, 2, 0), shareEntry("c", math.MaxInt, 2, 0)},
			map[string]int{"c": 2, "b": 1, "a": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := work.Grants(tc.entries, tc.limit)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("Grants(%v, %d) = %v, want %v", tc.entries, tc.limit, got, tc.want)
			}
		})
	}
	extremes := []int{math.MaxInt, math.MaxInt - 1, math.MaxInt / 2, math.MaxInt/3 + 1, 1 << 40, work.PriorityMax + 1,
		work.PriorityMax, work.PriorityCoordinator, 1, 0, -1, -work.PriorityMax - 1, math.MinInt / 2, math.MinInt}
	grantsProperties(t, func(rng *rand.Rand) int { return extremes[rng.IntN(len(extremes))] })
}
