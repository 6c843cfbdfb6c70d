package usenet

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzParseSubject: no subject panics, and the counters and keys keep
// their invariants whatever the input.
func FuzzParseSubject(f *testing.F) {
	for _, c := range subjectCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ParseSubject(s)
		if got.Part < 1 || got.Part > got.Parts {
			t.Fatalf("%q: part %d/%d", s, got.Part, got.Parts)
		}
		if got.File < 0 || got.File > got.Files || (got.Files == 0) != (got.File == 0 && got.Files == 0) {
			t.Fatalf("%q: file %d/%d", s, got.File, got.Files)
		}
		if strings.TrimSpace(got.Binary) != got.Binary || strings.TrimSpace(got.Name) != got.Name {
			t.Fatalf("%q: untrimmed Binary %q or Name %q", s, got.Binary, got.Name)
		}
		// Binary holds no part counter: a part counter appended to it is
		// read as the counter and removed again. (Binary is decoded text; an
		// encoded word inside it would be decoded a second time.)
		if !strings.Contains(got.Binary, "=?") {
			again := ParseSubject(got.Binary + " (1/5)")
			if again.Binary != got.Binary || again.Part != 1 || again.Parts != 5 {
				t.Fatalf("%q: Binary %q re-parsed with (1/5) gives %+v", s, got.Binary, again)
			}
			// The part counter does not change the keys of the file.
			if got.Part == got.Parts && got.Parts < 5 {
				other := ParseSubject(got.Binary + " (5/5)")
				if other.Base != again.Base || other.Name != again.Name {
					t.Fatalf("%q: (1/5) and (5/5) give %+v and %+v", s, again, other)
				}
			}
		}
		if got.Name != "" && !strings.Contains(decodeMIME(s), got.Name) {
			t.Fatalf("%q: Name %q is not in the subject", s, got.Name)
		}
	})
}

// FuzzParseArticle: no line panics; an accepted line has a message-id and
// sorted, distinct groups that include the group read.
func FuzzParseArticle(f *testing.F) {
	for _, c := range articleCases {
		f.Add([]byte(c.line), c.group)
	}
	f.Fuzz(func(t *testing.T, line []byte, group string) {
		a, err := ParseArticle(line, group)
		if err != nil {
			if !errors.Is(err, ErrBadArticle) {
				t.Fatalf("%q: error %v is not ErrBadArticle", line, err)
			}
			return
		}
		if a.MessageID == "" || strings.TrimSpace(a.MessageID) != a.MessageID {
			t.Fatalf("%q: message-id %q", line, a.MessageID)
		}
		if !slices.IsSorted(a.Groups) || len(slices.Compact(slices.Clone(a.Groups))) != len(a.Groups) {
			t.Fatalf("%q: groups %q not sorted and distinct", line, a.Groups)
		}
		if group != "" && !slices.Contains(a.Groups, group) {
			t.Fatalf("%q: groups %q lack %q", line, a.Groups, group)
		}
		if slices.Contains(a.Groups, "") {
			t.Fatalf("%q: an empty group in %q", line, a.Groups)
		}
		if s := a.Subject; s.Part < 1 || s.Part > s.Parts || s.File > s.Files {
			t.Fatalf("%q: counters %+v", line, s)
		}
	})
}
