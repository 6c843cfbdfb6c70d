package events

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func mustSub(t testing.TB, id, owner, anchor, glob string, ops ...string) *Sub {
	t.Helper()
	a, err := ParseAnchor(anchor)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFilter(ops, glob)
	if err != nil {
		t.Fatal(err)
	}
	return &Sub{ID: SubID(id), Owner: owner, Anchor: a, Filter: f}
}

func ids(ms []Match) (events, gaps []string) {
	for _, m := range ms {
		if m.Gap == "" {
			events = append(events, string(m.Sub.ID))
		} else {
			gaps = append(gaps, string(m.Sub.ID)+":"+string(m.Gap))
		}
	}
	return events, gaps
}

// TestIndexMatchesAncestors is the example: a subscription on
// project-1/files/a hears a/b/c.txt and not a2/x.
func TestIndexMatchesAncestors(t *testing.T) {
	x := NewIndex()
	for _, s := range []*Sub{
		mustSub(t, "folder", "u", "project-1/files/a", ""),
		mustSub(t, "stream", "u", "project-1/files", ""),
		mustSub(t, "file", "u", "project-1/files/a/b/c.txt", ""),
		mustSub(t, "other", "u", "project-1/files/a2", ""),
		mustSub(t, "notes", "u", "project-1/notes", ""),
		mustSub(t, "yet", "u", "project-1/files/a/b/new.txt", ""), // no such key yet: valid
	} {
		if err := x.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := ids(x.Match(nil, Subject{"project-1", "files", "a/b/c.txt"}, OpSet))
	want := []string{"file", "folder", "stream"} // nearest anchor first
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a/b/c.txt reached %v, want %v", got, want)
	}
	got, _ = ids(x.Match(nil, Subject{"project-1", "files", "a2/x"}, OpSet))
	if fmt.Sprint(got) != fmt.Sprint([]string{"other", "stream"}) {
		t.Errorf("a2/x reached %v", got)
	}
	got, _ = ids(x.Match(nil, Subject{"project-1", "files", "a/b/new.txt"}, OpSet))
	if fmt.Sprint(got) != fmt.Sprint([]string{"yet", "folder", "stream"}) {
		t.Errorf("the first write of a watched path reached %v", got)
	}
	if !x.Remove("folder") || x.Remove("folder") {
		t.Fatal("Remove should report the first removal only")
	}
	got, _ = ids(x.Match(nil, Subject{"project-1", "files", "a/b/c.txt"}, OpSet))
	if fmt.Sprint(got) != fmt.Sprint([]string{"file", "stream"}) {
		t.Errorf("after removal: %v", got)
	}
	if err := x.Add(mustSub(t, "file", "u", "project-1/x", "")); err == nil {
		t.Error("a duplicate id was added")
	}
	if x.Watched("project-1/files/a") || !x.Watched("project-1/files") {
		t.Error("Watched is wrong after removal")
	}
}

func TestIndexFilter(t *testing.T) {
	x := NewIndex()
	x.Add(mustSub(t, "txt", "u", "p/files", "**/*.txt"))
	x.Add(mustSub(t, "del", "u", "p/files", "", "delete"))
	got, _ := ids(x.Match(nil, Subject{"p", "files", "a/b.txt"}, OpSet))
	if fmt.Sprint(got) != "[txt]" {
		t.Errorf("set of a/b.txt reached %v", got)
	}
	got, _ = ids(x.Match(nil, Subject{"p", "files", "a/b.png"}, OpDelete))
	if fmt.Sprint(got) != "[del]" {
		t.Errorf("delete of a/b.png reached %v", got)
	}
}

// TestIndexMatchedLimit: past 50 matched subscriptions of one owner, the
// rest of that owner's get a gap marker; another owner's are unaffected.
func TestIndexMatchedLimit(t *testing.T) {
	x := NewIndex()
	for i := range MaxMatchedPerOwner + 5 {
		x.Add(mustSub(t, fmt.Sprintf("u-%03d", i), "u", "p/notes", ""))
	}
	for i := range 3 {
		x.Add(mustSub(t, fmt.Sprintf("v-%03d", i), "v", "p/notes", ""))
	}
	events, gaps := ids(x.Match(nil, Subject{"p", "notes", "k"}, OpSet))
	if len(events) != MaxMatchedPerOwner+3 {
		t.Errorf("%d got the event, want %d", len(events), MaxMatchedPerOwner+3)
	}
	if len(gaps) != 5 {
		t.Fatalf("gaps %v, want 5", gaps)
	}
	for _, g := range gaps {
		if g[:2] != "u-" || g[len(g)-len(ReasonMatchedSubscriptionLimit):] != string(ReasonMatchedSubscriptionLimit) {
			t.Errorf("gap %q", g)
		}
	}
}

// TestIndexFilterEvaluationLimit: 200 filters of one owner that do not
// match use up the owner's evaluations; the next get a gap.
func TestIndexFilterEvaluationLimit(t *testing.T) {
	x := NewIndex()
	for i := range MaxFilterEvaluations + 2 {
		x.Add(mustSub(t, fmt.Sprintf("s-%03d", i), "u", "p/files", "*.never"))
	}
	events, gaps := ids(x.Match(nil, Subject{"p", "files", "a.txt"}, OpSet))
	if len(events) != 0 || len(gaps) != 2 {
		t.Fatalf("events %v gaps %v", events, gaps)
	}
	if gaps[0] != "s-200:"+string(ReasonFilterEvaluationLimit) {
		t.Errorf("gap %q", gaps[0])
	}
}

// (Was: every filter evaluation counted one against the owner's 200, but a
// '*' followed by a long pattern tries it at every position of the path's
// segment: 200 such 256-byte globs on a 4,000-byte key took ~400 ms of the
// router's loop per event, 8,000 times 200 ordinary evaluations.)
func TestIndexCostlyFiltersUseTheBudget(t *testing.T) {
	x := NewIndex()
	glob := "*" + strings.Repeat("a", MaxGlobBytes-2) + "b"
	for i := range MaxFilterEvaluations {
		x.Add(mustSub(t, fmt.Sprintf("u-%03d", i), "u", "p/files", glob))
	}
	x.Add(mustSub(t, "v", "v", "p/files", "*.txt"))
	long := strings.Repeat("a", 4000) + ".txt"
	events, gaps := ids(x.Match(nil, Subject{"p", "files", long}, OpSet))
	evaluated := MaxFilterEvaluations - len(gaps)
	// The budget's work, and the one evaluation that may overrun it.
	if most := 1 + MaxFilterEvaluations*filterEvalUnit/(len(glob)*len(long)); evaluated > most {
		t.Fatalf("%d of u's filters evaluated on a %d-byte path, want at most %d", evaluated, len(long), most)
	}
	for _, g := range gaps {
		if !strings.HasPrefix(g, "u-") || !strings.HasSuffix(g, ":"+string(ReasonFilterEvaluationLimit)) {
			t.Errorf("gap %q, want u's, filter_evaluation_limit", g)
		}
	}
	// Another owner's budget is its own.
	if !slices.Equal(events, []string{"v"}) {
		t.Fatalf("events %v, want v's only", events)
	}
	// On a short path the same globs cost one each: every one is evaluated.
	if _, gaps := ids(x.Match(nil, Subject{"p", "files", "x"}, OpSet)); len(gaps) != 0 {
		t.Fatalf("on a one-byte path: gaps %v, want every filter evaluated", gaps)
	}
}

// BenchmarkIndexMatch: an event's cost depends on its path's depth and the
// subscriptions on it, not on how many the index holds.
func BenchmarkIndexMatch(b *testing.B) {
	x := NewIndex()
	for i := range 100_000 {
		x.Add(mustSub(b, fmt.Sprintf("s%d", i), fmt.Sprintf("u%d", i%1000), fmt.Sprintf("p%d/files/dir%d", i%1000, i%7), ""))
	}
	subj := Subject{"p1", "files", "dir1/a/b/c.txt"}
	var dst []Match
	b.ReportAllocs()
	for b.Loop() {
		dst = x.Match(dst[:0], subj, OpSet)
	}
}
