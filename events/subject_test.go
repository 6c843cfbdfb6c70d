package events

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSubjectAnchors(t *testing.T) {
	cases := []struct {
		s    Subject
		want []string
	}{
		{Subject{"p", "files", "a/b/c.txt"}, []string{"p/files/a/b/c.txt", "p/files/a/b", "p/files/a", "p/files"}},
		{Subject{"p", "notes", "n1"}, []string{"p/notes/n1", "p/notes"}},
		{Subject{"p", "log", ""}, []string{"p/log"}},
		{Subject{"p", "a/b", "k"}, []string{"p/a%2Fb/k", "p/a%2Fb"}},
	}
	for _, c := range cases {
		if got := c.s.Anchors(nil); !slices.Equal(got, c.want) {
			t.Errorf("%+v: anchors %q, want %q", c.s, got, c.want)
		}
	}
}

func TestParseAnchor(t *testing.T) {
	good := map[string]Subject{
		"project-1/files":       {"project-1", "files", ""},
		"project-1/files/a":     {"project-1", "files", "a"},
		"project-1/files/a/b.c": {"project-1", "files", "a/b.c"},
		"p/a%2Fb%25/k":          {"p", "a/b%", "k"},
	}
	for in, want := range good {
		a, err := ParseAnchor(in)
		if err != nil || a.Subject != want {
			t.Errorf("ParseAnchor(%q) = %+v, %v; want %+v", in, a.Subject, err, want)
			continue
		}
		// The text round-trips, and the token is among the subject's own.
		if a.Token() != in && !strings.Contains(in, "%2F") {
			t.Errorf("token %q, want %q", a.Token(), in)
		}
		if !slices.Contains(a.Subject.Anchors(nil), a.Token()) {
			t.Errorf("%q: its token is not among its subject's anchors", in)
		}
	}
	// "p/files//a" is an empty first path segment (key "/a", which persist
	// takes): it was accepted.
	bad := []string{"", "p", "P/files", "p/", "p//k", "p/files/", "p/files/a//b", "p/files//a", "p/files//a/b", "p/files/a/", "p/x%zz/k",
		"p/files/\x00", " p/files", strings.Repeat("a", MaxAnchorBytes+1), "p/\xff"}
	for _, in := range bad {
		if _, err := ParseAnchor(in); !errors.Is(err, ErrBadAnchor) {
			t.Errorf("ParseAnchor(%q): %v, want ErrBadAnchor", in, err)
		}
	}
	// An empty stream is said in the anchor's words. (Was: persist's
	// refusal, naming its wire header Sy-Stream.)
	for _, in := range []string{"p//k", "p/"} {
		if _, err := ParseAnchor(in); err == nil || !strings.Contains(err.Error(), "empty stream name") || strings.Contains(err.Error(), "Sy-Stream") {
			t.Errorf("ParseAnchor(%q): %v, want it to say the stream name is empty", in, err)
		}
	}
}

func TestAnchorRest(t *testing.T) {
	a, _ := ParseAnchor("p/files/a")
	cases := []struct {
		key  string
		rest string
		ok   bool
	}{
		{"a", "", true}, {"a/b/c.txt", "b/c.txt", true}, {"a2/x", "", false}, {"b", "", false}, {"", "", false},
	}
	for _, c := range cases {
		rest, ok := a.Rest(Subject{"p", "files", c.key})
		if rest != c.rest || ok != c.ok {
			t.Errorf("Rest(%q) = %q, %v; want %q, %v", c.key, rest, ok, c.rest, c.ok)
		}
	}
	if _, ok := a.Rest(Subject{"q", "files", "a"}); ok {
		t.Error("another scope is below the anchor")
	}
	whole, _ := ParseAnchor("p/files")
	if rest, ok := whole.Rest(Subject{"p", "files", "a/b"}); !ok || rest != "a/b" {
		t.Errorf("stream anchor: rest %q, %v", rest, ok)
	}
}
