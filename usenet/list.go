package usenet

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/switchyard-dev/switchyard/persist"
)

// ListQuery filters List. Zero fields match everything.
type ListQuery struct {
	// Group keeps releases posted to this group.
	Group string
	// Words keeps releases whose name holds every word, ignoring case and
	// accents (Fold), with . _ - and spaces as separators on both sides,
	// as the search index's Query.Words does: empty (or spaces alone)
	// keeps every release, text that holds no word ("...", "-") none.
	Words string
	// Limit bounds the result; 0 means no bound.
	Limit int
}

// List reads the visible releases from the releases stream, newest first.
// It reads the whole stream: fine for a command line, while the Newznab
// API searches a derived index instead.
func (s *Store) List(ctx context.Context, q ListQuery) ([]Release, error) {
	words := foldWords(q.Words)
	if len(words) == 0 && strings.TrimSpace(q.Words) != "" {
		return nil, nil // words no name holds, as the index answers them
	}
	var out []Release
	_, err := s.releases.Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key == "" {
			return nil
		}
		var r Release
		if err := json.Unmarshal(m.Value, &r); err != nil {
			return fmt.Errorf("usenet: decode release %s: %w", m.Key, err)
		}
		if q.Group != "" && !slices.Contains(r.Groups, q.Group) {
			return nil
		}
		if len(words) > 0 {
			have := foldWords(r.Name)
			for _, w := range words {
				if !slices.Contains(have, w) {
					return nil
				}
			}
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("usenet: list releases: %w", err)
	}
	slices.SortFunc(out, func(a, b Release) int { return cmp.Or(cmp.Compare(b.Date, a.Date), cmp.Compare(a.ID, b.ID)) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// foldWords is Words(s), each word folded (Fold).
func foldWords(s string) []string {
	words := Words(s)
	for i, w := range words {
		words[i] = Fold(w)
	}
	return words
}

// Words splits s into the lower-case words a release name is searched by:
// at everything but letters, numbers and private-use characters, as the
// search index's tokenizer (SQLite's unicode61) splits names, so that
// spaces, dots, underscores and dashes all separate words. A combining
// mark (Mn, Mc) after a letter or number stays in its word: unicode61
// keeps an accent typed apart (decomposed, e + U+0301) inside its token
// and folds it, so Ame\u0301lie is one word (the index's amelie), not ame
// and lie.
func Words(s string) []string {
	s = strings.ToLower(s)
	var words []string
	start := -1 // of the word being read, -1 between words
	for i, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r):
			if start < 0 {
				start = i
			}
		case start >= 0 && (unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)):
			// in the word
		default:
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// NZB writes the NZB of visible release id to w.
func (s *Store) NZB(ctx context.Context, id string, w interface{ Write([]byte) (int, error) }) (Release, error) {
	r, err := s.Release(ctx, id)
	if err != nil {
		return r, err
	}
	ids := make([]string, len(r.Binaries))
	for i, f := range r.Binaries {
		ids[i] = f.ID
	}
	bins, err := s.Binaries(ctx, ids)
	if err != nil {
		return r, err
	}
	return r, WriteNZB(w, r, PostBinaries(r, bins))
}
