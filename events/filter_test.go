package events

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestFilterGlob(t *testing.T) {
	cases := []struct {
		glob string
		rest string
		want bool
	}{
		{"", "anything/at/all", true},
		{"*.txt", "c.txt", true},
		{"*.txt", "b/c.txt", false},
		{"**/*.txt", "b/c.txt", true},
		{"**/*.txt", "c.txt", true},
		{"**", "", true},
		{"*", "", false},
		{"b/**", "b", true},
		{"b/**", "b/x/y", true},
		{"b/**", "bx/y", false},
		{"**/x/**/y", "a/x/b/c/y", true},
		{"**/x/**/y", "a/x/b/c/z", false},
		{"[ab]?", "ax", true},
		{"[ab]?", "cx", false},
	}
	for _, c := range cases {
		f, err := ParseFilter(nil, c.glob)
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", c.glob, err)
		}
		if got := f.Match(OpSet, c.rest); got != c.want {
			t.Errorf("glob %q on %q: %v, want %v", c.glob, c.rest, got, c.want)
		}
	}
}

func TestFilterOps(t *testing.T) {
	f, err := ParseFilter([]string{"delete"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Match(OpSet, "x") || !f.Match(OpDelete, "x") {
		t.Error("a delete-only filter must take deletes only")
	}
	if _, err := ParseFilter([]string{"put"}, ""); !errors.Is(err, ErrBadFilter) {
		t.Errorf("op put: %v", err)
	}
}

// (Was: ParseFilter kept every op it was given, so a subscribe naming "set" thousands of times held thousands of ops, each compared on every event it was matched against.)
func TestFilterOpsOnce(t *testing.T) {
	many := make([]string, 10_000)
	for i := range many {
		many[i] = []string{"set", "delete"}[i%2]
	}
	for _, c := range []struct {
		name string
		ops  []string
		want []Op
	}{
		{"set many times", slices.Repeat([]string{"set"}, 10_000), []Op{OpSet}},
		{"both many times", many, []Op{OpSet, OpDelete}},
		{"delete first", []string{"delete", "set", "delete"}, []Op{OpDelete, OpSet}},
	} {
		f, err := ParseFilter(c.ops, "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(f.Ops, c.want) {
			t.Errorf("%s: %d ops beginning %v, want %v", c.name, len(f.Ops), f.Ops[:min(len(f.Ops), 4)], c.want)
		}
	}
	if _, err := ParseFilter(append(slices.Repeat([]string{"set"}, 100), "put"), ""); !errors.Is(err, ErrBadFilter) {
		t.Errorf("an unknown op after many known ones: %v, want ErrBadFilter", err)
	}
}

func TestFilterLimits(t *testing.T) {
	for _, g := range []string{
		strings.Repeat("a", MaxGlobBytes+1),
		strings.Repeat("a/", MaxGlobSegments) + "a",
		"a**",
		"[",
	} {
		if _, err := ParseFilter(nil, g); !errors.Is(err, ErrBadFilter) {
			t.Errorf("glob %.40q: %v, want ErrBadFilter", g, err)
		}
	}
	if _, err := ParseFilter(nil, strings.Repeat("*/", MaxGlobSegments-1)+"*"); err != nil {
		t.Errorf("a glob of exactly %d segments: %v", MaxGlobSegments, err)
	}
}

// TestFilterManyStarStarIsFast: the worst glob against the longest path
// is matched by the dynamic program, not by trying every split (which
// would not finish).
func TestFilterManyStarStarIsFast(t *testing.T) {
	f, err := ParseFilter(nil, strings.Repeat("**/a/", 7)+"b")
	if err != nil {
		t.Fatal(err)
	}
	rest := strings.Repeat("a/", 2000) + "c"
	if f.Match(OpSet, rest) {
		t.Error("matched a path that does not end in b")
	}
	if !f.Match(OpSet, strings.Repeat("a/", 2000)+"b") {
		t.Error("did not match a path that fits")
	}
}

// FuzzFilter: any glob ParseFilter accepts matches any path without
// panicking, and "**" matches everything.
func FuzzFilter(f *testing.F) {
	f.Add("**/x/*.txt", "a/x/b.txt")
	f.Add("[a-", "a")
	f.Fuzz(func(t *testing.T, glob, rest string) {
		flt, err := ParseFilter(nil, glob)
		if err != nil {
			return
		}
		flt.Match(OpSet, rest)
		all, _ := ParseFilter(nil, "**")
		if !all.Match(OpDelete, rest) {
			t.Fatalf("** did not match %q", rest)
		}
	})
}

// FuzzParseAnchor: an accepted anchor's text parses back to itself.
func FuzzParseAnchor(f *testing.F) {
	f.Add("project-1/files/a/b.txt")
	f.Add("p/a%2Fb/k")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAnchor(s)
		if err != nil {
			return
		}
		b, err := ParseAnchor(a.Token())
		if err != nil || b != a {
			t.Fatalf("%q → %q → %+v, %v", s, a.Token(), b, err)
		}
	})
}
