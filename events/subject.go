package events

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// Subject names what an event is about: a key of a stream of a scope. Its
// string form is "scope/stream/key"; a key may itself be a path
// ("a/b/c.txt"), whose segments are what anchors match on.
type Subject struct {
	Scope  string
	Stream string
	// Key is the message's key; "" for an unkeyed message, whose subject is
	// the stream's.
	Key string
}

// String is the subject's text: "scope/stream/key", or "scope/stream"
// without a key. A '/' or '%' in the stream's name is escaped (%2F, %25),
// so that the first two slashes always end the scope and the stream.
func (s Subject) String() string {
	var b strings.Builder
	b.Grow(len(s.Scope) + len(s.Stream) + len(s.Key) + 2)
	b.WriteString(s.Scope)
	b.WriteByte('/')
	writeEscaped(&b, s.Stream)
	if s.Key != "" {
		b.WriteByte('/')
		b.WriteString(s.Key)
	}
	return b.String()
}

// Anchors appends to dst the anchor tokens an event on s is looked up
// under, its own first and then each ancestor's, nearest first:
// "p/files/a/b/c.txt", "p/files/a/b", "p/files/a", "p/files". A
// subscription anchored on any of them hears the event.
func (s Subject) Anchors(dst []string) []string {
	full := s.String()
	dst = append(dst, full)
	if s.Key == "" {
		return dst
	}
	// The stream's token is full minus "/key"; the ancestors cut the key at
	// each of its slashes, from the last.
	base := len(full) - len(s.Key) - 1
	for i := len(s.Key) - 1; i >= 0; i-- {
		if s.Key[i] == '/' {
			dst = append(dst, full[:base+1+i])
		}
	}
	return append(dst, full[:base])
}

func writeEscaped(b *strings.Builder, stream string) {
	for i := 0; i < len(stream); i++ {
		switch c := stream[i]; c {
		case '/':
			b.WriteString("%2F")
		case '%':
			b.WriteString("%25")
		default:
			b.WriteByte(c)
		}
	}
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%2F"), strings.HasPrefix(s[i:], "%2f"):
			b.WriteByte('/')
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		default:
			return "", errors.New("a '%' in the stream name must be %2F or %25")
		}
		i += 2
	}
	return b.String(), nil
}

// Anchor is what a subscription is anchored on: a subject, whose key may
// be empty (the whole stream) or a path prefix cut at a '/' ("a" hears
// "a", "a/b" and "a/b/c.txt", not "a2").
type Anchor struct{ Subject }

// Limits of an anchor's text.
const (
	// MaxAnchorBytes bounds an anchor's text; the key part also obeys
	// persist.MaxKeyBytes.
	MaxAnchorBytes = 1024
)

// ErrBadAnchor is wrapped by every error of ParseAnchor.
var ErrBadAnchor = errors.New("bad anchor")

// ParseAnchor reads "scope/stream" or "scope/stream/path". The scope is a
// bus scope token, the stream a valid persist stream name (with '/' and '%'
// escaped as String does), the path a valid persist key with no empty
// segment and no trailing '/'. A path that no key has yet is valid: the
// subscription hears the first write to it.
func ParseAnchor(s string) (Anchor, error) {
	if len(s) > MaxAnchorBytes {
		return Anchor{}, fmt.Errorf("%w: %d bytes, over %d", ErrBadAnchor, len(s), MaxAnchorBytes)
	}
	subj, err := parseSubject(s)
	if err != nil {
		return Anchor{}, fmt.Errorf("%w %w", ErrBadAnchor, err)
	}
	if strings.HasSuffix(s, "/") {
		return Anchor{}, fmt.Errorf("%w %q: ends with '/'", ErrBadAnchor, s)
	}
	// A key starting with '/' is an empty first segment (scope/stream//a).
	if strings.Contains(subj.Key, "//") || strings.HasPrefix(subj.Key, "/") {
		return Anchor{}, fmt.Errorf("%w %q: empty path segment", ErrBadAnchor, s)
	}
	return Anchor{subj}, nil
}

// ParseSubject reads a subject's text (Subject.String): "scope/stream" or
// "scope/stream/key", where the key is any valid persist key — empty
// segments, a trailing '/' and any length persist takes included, which
// an anchor refuses. A peer region's events name their subjects so.
func ParseSubject(s string) (Subject, error) {
	subj, err := parseSubject(s)
	if err != nil {
		return Subject{}, fmt.Errorf("bad subject %w", err)
	}
	return subj, nil
}

func parseSubject(s string) (Subject, error) {
	if !utf8.ValidString(s) {
		return Subject{}, errors.New("(not valid UTF-8)")
	}
	scope, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Subject{}, fmt.Errorf("%q: want scope/stream or scope/stream/path", s)
	}
	if !bus.ValidScope(scope) {
		return Subject{}, fmt.Errorf("%q: scope %q is not [a-z0-9][a-z0-9_-]{0,127}", s, scope)
	}
	rawStream, key, keyed := strings.Cut(rest, "/")
	if rawStream == "" {
		// Said here: persist's own refusal names its wire header.
		return Subject{}, fmt.Errorf("%q: empty stream name", s)
	}
	stream, err := unescape(rawStream)
	if err != nil {
		return Subject{}, fmt.Errorf("%q: %v", s, err)
	}
	if err := persist.ValidStreamName(stream); err != nil {
		return Subject{}, fmt.Errorf("%q: %v", s, err)
	}
	if keyed {
		if key == "" {
			return Subject{}, fmt.Errorf("%q: ends with '/'", s)
		}
		if err := persist.ValidKey(key); err != nil {
			return Subject{}, fmt.Errorf("%q: %v", s, err)
		}
	}
	return Subject{Scope: scope, Stream: stream, Key: key}, nil
}

// Token is the anchor's index token, which Subject.Anchors lists for every
// event at or below it.
func (a Anchor) Token() string { return a.String() }

// Rest is the part of subject below the anchor ("b/c.txt" for the anchor
// p/files/a and the subject p/files/a/b/c.txt), "" for the anchor's own
// subject; ok is false when subject is not at or below the anchor.
func (a Anchor) Rest(subject Subject) (rest string, ok bool) {
	if subject.Scope != a.Scope || subject.Stream != a.Stream {
		return "", false
	}
	if a.Key == "" {
		return subject.Key, true
	}
	if subject.Key == a.Key {
		return "", true
	}
	if strings.HasPrefix(subject.Key, a.Key) && len(subject.Key) > len(a.Key) && subject.Key[len(a.Key)] == '/' {
		return subject.Key[len(a.Key)+1:], true
	}
	return "", false
}
