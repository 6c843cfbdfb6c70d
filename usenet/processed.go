package usenet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/persist"
)

// The post-processing streams of the scope.
const (
	// PostprocKV holds one PostRecord per release id: what post-processing
	// did with it. A visible release without one has not been processed.
	PostprocKV = "postproc"
	// NFOKV holds the NFO text of a release (UTF-8, at most NFOMax bytes),
	// keyed by release id.
	NFOKV = "nfo"
)

// NFOMax is the most bytes of NFO text kept per release.
const NFOMax = 64 << 10

// Processed is what post-processing read in a release's bodies. It is
// kept in the release's post state (the collection record), so that
// every later publication of the release (parts arriving, the settle
// sweep) carries it: see Processed.apply.
type Processed struct {
	// Name is the release's real name when the posted one was obfuscated,
	// else "".
	Name string `json:"name,omitempty"`
	// Files maps a binary id to its real file name, for the files posted
	// under obfuscated names.
	Files    map[string]string `json:"files,omitempty"`
	Password int               `json:"password,omitempty"`
	NFO      bool              `json:"nfo,omitempty"`
	Par2     []Par2File        `json:"par2,omitempty"`
	Inner    []string          `json:"inner,omitempty"`
}

// apply sets r's post-processing fields from p: real names, the flags and
// lists, and the category of the new name.
func (p *Processed) apply(r *Release) {
	if p == nil {
		return
	}
	r.Processed = true
	r.Password, r.NFO = p.Password, p.NFO
	r.Par2, r.Inner = slices.Clone(p.Par2), slices.Clone(p.Inner)
	if len(p.Files) > 0 {
		r.Binaries = slices.Clone(r.Binaries)
		for i, f := range r.Binaries {
			if name, ok := p.Files[f.ID]; ok && name != f.Name {
				r.Binaries[i].Posted, r.Binaries[i].Name = f.Name, name
			}
		}
	}
	if p.Name != "" && p.Name != r.Name {
		r.PostedName, r.Name = r.Name, p.Name
		r.Category = Categorize(r.Groups, r.Name)
	}
}

// PostRecord is what post-processing did with one release (PostprocKV).
type PostRecord struct {
	Release string `json:"release"`
	// Status is PostDone, PostNothing or PostFailed.
	Status string `json:"status"`
	// At is when it was processed, unix milliseconds.
	At       int64 `json:"at"`
	Articles int   `json:"articles"`
	Bytes    int64 `json:"bytes"`
	// Failures are the kinds of what failed (FailFetch, FailDecode,
	// FailPar2, FailRAR, FailNFO), one entry per failure.
	Failures []string `json:"failures,omitempty"`
	// Renamed says the release or some of its files got real names.
	Renamed bool `json:"renamed,omitempty"`
	Processed
}

// Values of PostRecord.Status.
const (
	PostDone    = "done"    // at least one body was read and parsed
	PostNothing = "nothing" // no file worth reading (no .par2, .nfo or RAR volume)
	PostFailed  = "failed"  // every body it read failed to fetch, decode or parse
)

// Failure kinds of PostRecord.Failures.
const (
	FailFetch  = "fetch"  // the article could not be fetched (gone, refused)
	FailDecode = "decode" // its body is not valid yEnc
	FailPar2   = "par2"   // no PAR2 packet verified
	FailRAR    = "rar"    // no RAR headers could be read
	FailNFO    = "nfo"    // the .nfo is not text
)

// PostRecord returns what post-processing did with release id, or
// ErrNotFound when it has not (yet).
func (s *Store) PostRecord(ctx context.Context, id string) (PostRecord, error) {
	var rec PostRecord
	m, err := s.c.KV(s.scope, PostprocKV).Get(ctx, id)
	if errors.Is(err, persist.ErrNotFound) {
		return rec, fmt.Errorf("%w: post-processing of %q", ErrNotFound, id)
	}
	if err != nil {
		return rec, fmt.Errorf("usenet: post-processing of %s: %w", id, err)
	}
	if err := decodeRecord(m, &rec); err != nil {
		return rec, fmt.Errorf("usenet: decode post-processing of %s: %w", id, err)
	}
	return rec, nil
}

// PutPostRecord stores rec: the release counts as processed from then on.
func (s *Store) PutPostRecord(ctx context.Context, rec PostRecord) error {
	v, hdr, err := encodeRecord(rec)
	if err != nil {
		return fmt.Errorf("usenet: encode post-processing of %s: %w", rec.Release, err)
	}
	if _, err := s.c.KV(s.scope, PostprocKV).Set(ctx, rec.Release, v, persist.SetOptions{Headers: hdr}); err != nil {
		return fmt.Errorf("usenet: store post-processing of %s: %w", rec.Release, err)
	}
	return nil
}

// PostRecordIDs returns the ids of every release post-processing is done
// with.
func (s *Store) PostRecordIDs(ctx context.Context) (map[string]struct{}, error) {
	keys, err := s.c.KV(s.scope, PostprocKV).Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("usenet: post-processed releases: %w", err)
	}
	out := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		out[k] = struct{}{}
	}
	return out, nil
}

// NFO returns the NFO text of release id, or ErrNotFound.
func (s *Store) NFO(ctx context.Context, id string) (string, error) {
	if persist.ValidKey(id) != nil || id == "" {
		return "", fmt.Errorf("%w: nfo %q", ErrNotFound, id)
	}
	m, err := s.c.KV(s.scope, NFOKV).Get(ctx, id)
	if errors.Is(err, persist.ErrNotFound) {
		return "", fmt.Errorf("%w: nfo %q", ErrNotFound, id)
	}
	if err != nil {
		return "", fmt.Errorf("usenet: nfo %s: %w", id, err)
	}
	return string(m.Value), nil
}

// PutNFO stores text (cut to NFOMax bytes) as the NFO of release id.
func (s *Store) PutNFO(ctx context.Context, id, text string) error {
	if len(text) > NFOMax {
		// The cut steps back to the start of the rune NFOMax falls in:
		// cut inside it, the stored text would end in an invalid byte
		// sequence, where it is documented and served as UTF-8.
		n := NFOMax
		for i := 1; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(text[n]); i++ {
			n--
		}
		text = text[:n]
	}
	if _, err := s.c.KV(s.scope, NFOKV).Set(ctx, id, []byte(text), persist.SetOptions{}); err != nil {
		return fmt.Errorf("usenet: store nfo of %s: %w", id, err)
	}
	return nil
}

// CollectionOfRelease is the id of the collection release r is a post
// of, read from its first binary.
func (s *Store) CollectionOfRelease(ctx context.Context, r Release) (string, error) {
	if len(r.Binaries) == 0 {
		return "", fmt.Errorf("%w: release %s has no binaries", ErrNotFound, r.ID)
	}
	bins, err := s.Binaries(ctx, []string{r.Binaries[0].ID})
	if err != nil {
		return "", err
	}
	return bins[0].Release, nil
}

// SetProcessed keeps p in the state of post id of collection coll and,
// when the post is visible, publishes it again with p applied at a new
// version (so that readers keeping the highest version take it). Every
// later publication of the post carries p. It returns the release as
// published, and false when the collection holds no such post (then
// nothing changed).
func (s *Store) SetProcessed(ctx context.Context, coll, id string, p Processed) (Release, bool, error) {
	var out Release
	found := false
	_, _, err := s.publishingMerge(ctx, coll, func(c *Collection) (bool, []Release, error) {
		posts, idx, _ := c.resolve(s.policy.gap())
		for i := range posts {
			if posts[i].ID != id || idx[i] < 0 {
				continue
			}
			st := &c.States[idx[i]]
			if st.Post != nil && st.Post.equal(p) {
				found, out = st.Visible, posts[i]
				st.overlay(&out)
				return false, nil, nil
			}
			pc := p
			st.Post = &pc
			st.Version++
			found = true
			out = posts[i]
			st.overlay(&out)
			if !st.Visible {
				return true, nil, nil
			}
			return true, []Release{out}, nil
		}
		found = false
		return false, nil, nil
	})
	if err != nil {
		return Release{}, false, fmt.Errorf("usenet: store post-processing of %s: %w", id, err)
	}
	return out, found, nil
}

// equal reports whether p and o hold the same findings.
func (p *Processed) equal(o Processed) bool {
	return p.Name == o.Name && maps.Equal(p.Files, o.Files) && p.Password == o.Password && p.NFO == o.NFO &&
		slices.Equal(p.Par2, o.Par2) && slices.Equal(p.Inner, o.Inner)
}

// overlay gives r (one of the collection's posts, as resolved) the
// version and visibility of st and its post-processing findings.
func (st *PostState) overlay(r *Release) {
	r.Version, r.Visible, r.Updated = st.Version, st.Visible, st.Updated
	st.Post.apply(r)
}

// SortPar2 orders files by name, the order details show them in.
func SortPar2(files []Par2File) {
	slices.SortFunc(files, func(a, b Par2File) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Size, b.Size)) })
}

// PostSummary adds up the post-processing records of a scope.
type PostSummary struct {
	// Releases counts the records by status (PostDone, ...).
	Releases   map[string]int64 `json:"releases"`
	Articles   int64            `json:"articles"`
	Bytes      int64            `json:"bytes"`
	Renamed    int64            `json:"renamed"`
	Passworded int64            `json:"passworded"` // password 1
	Maybe      int64            `json:"maybe_passworded"`
	NFOs       int64            `json:"nfos"`
	// Failures counts failed bodies by kind (FailFetch, ...).
	Failures map[string]int64 `json:"failures"`
	// Pending is the visible releases without a record yet.
	Pending int64 `json:"pending"`
}

// PostSummary reads every post-processing record and the releases
// stream's keys. It reads them all: for a command line.
func (s *Store) PostSummary(ctx context.Context) (PostSummary, error) {
	sum := PostSummary{Releases: map[string]int64{}, Failures: map[string]int64{}}
	done := map[string]struct{}{}
	_, err := s.c.KV(s.scope, PostprocKV).Stream().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key == "" {
			return nil
		}
		var rec PostRecord
		if err := decodeRecord(m, &rec); err != nil {
			return fmt.Errorf("decode %s: %w", m.Key, err)
		}
		done[m.Key] = struct{}{}
		sum.Releases[rec.Status]++
		sum.Articles += int64(rec.Articles)
		sum.Bytes += rec.Bytes
		if rec.Renamed {
			sum.Renamed++
		}
		switch rec.Password {
		case 1:
			sum.Passworded++
		case 2:
			sum.Maybe++
		}
		if rec.NFO {
			sum.NFOs++
		}
		for _, k := range rec.Failures {
			sum.Failures[k]++
		}
		return nil
	})
	if err != nil {
		return sum, fmt.Errorf("usenet: post-processing records: %w", err)
	}
	keys, err := s.releases.Keys(ctx)
	if err != nil {
		return sum, fmt.Errorf("usenet: releases: %w", err)
	}
	for _, k := range keys {
		if _, ok := done[k]; !ok {
			sum.Pending++
		}
	}
	return sum, nil
}
