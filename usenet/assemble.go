package usenet

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
)

// idOf hashes the fields of a key into a 32-hex-digit id: short enough for
// a persist key and a Newznab guid, long enough never to collide.
func idOf(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// BinaryID keys a binary: its poster, its subject without the part
// counter and the number of parts announced, as every part of one file
// shares them. A repost of a file split into another number of parts is
// another binary, so that no NZB mixes the parts of two splits.
func BinaryID(poster, binary string, parts int) string {
	return idOf("b", poster, binary, strconv.Itoa(parts))
}

// CollectionID keys a Collection: its poster, its base name (case folded)
// and the number of files it announced.
func CollectionID(poster, base string, files int) string {
	return idOf("r", poster, strings.ToLower(base), strconv.Itoa(files))
}

// BinaryOf is the binary holding one article: a record with one segment.
func BinaryOf(a Article) Binary {
	s := a.Subject
	return Binary{
		ID:       BinaryID(a.From, s.Binary, s.Parts),
		Release:  CollectionID(a.From, s.Base, s.Files),
		Poster:   a.From,
		Subject:  a.RawSubject,
		Name:     s.Name,
		File:     s.File,
		Files:    s.Files,
		Parts:    s.Parts,
		Date:     a.Date,
		Groups:   slices.Clone(a.Groups),
		Segments: []Segment{{Number: s.Part, Bytes: a.Bytes, ID: a.MessageID, Date: a.Date}},
		base:     s.Base,
	}
}

// segLess orders segments by part number, then message-id: the order of
// an NZB, and the one that picks which of a part's reposts comes first.
func segCmp(a, b Segment) int {
	return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.ID, b.ID))
}

// Merge adds o's articles to b (two records of the same binary) and
// reports whether b changed. Every field stays a function of the union of
// the articles, so merges commute and repeat without effect: segments are
// unique by message-id (an article counts once however often it is seen),
// groups are a sorted union, the date is the earliest, and the subject is
// that of the first segment.
func (b *Binary) Merge(o Binary) bool {
	changed := false
	if len(o.Segments) > 0 && (len(b.Segments) == 0 || segCmp(o.Segments[0], b.Segments[0]) < 0) {
		if b.Subject != o.Subject {
			b.Subject, changed = o.Subject, true
		}
	}
	if segs, ok := mergeSegments(b.Segments, o.Segments); ok {
		b.Segments, changed = segs, true
	}
	if g, ok := unionSorted(b.Groups, o.Groups); ok {
		b.Groups, changed = g, true
	}
	if o.Date != 0 && (b.Date == 0 || o.Date < b.Date) {
		b.Date, changed = o.Date, true
	}
	if o.Parts > b.Parts {
		b.Parts, changed = o.Parts, true
	}
	if b.base == "" {
		b.base = o.base
	}
	return changed
}

// mergeSegments is the union of two sorted, id-unique segment lists, and
// whether it differs from a. A message-id seen under two part numbers keeps
// the lower one.
func mergeSegments(a, b []Segment) ([]Segment, bool) {
	if len(b) == 0 {
		return a, false
	}
	seen := make(map[string]int, len(a)+len(b))
	for _, s := range a {
		seen[s.ID] = s.Number
	}
	add := false
	for _, s := range b {
		n, ok := seen[s.ID]
		if !ok || s.Number < n {
			add = true
			break
		}
	}
	if !add {
		return a, false
	}
	all := append(slices.Clone(a), b...)
	slices.SortFunc(all, segCmp)
	out := all[:0]
	have := make(map[string]bool, len(all))
	for _, s := range all {
		if have[s.ID] {
			continue
		}
		have[s.ID] = true
		out = append(out, s)
	}
	return out, true
}

// unionSorted is the sorted union of two string sets, and whether it
// differs from a.
func unionSorted(a, b []string) ([]string, bool) {
	missing := false
	for _, s := range b {
		if _, ok := slices.BinarySearch(a, s); !ok {
			missing = true
			break
		}
	}
	if !missing {
		return a, false
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out), true
}

// Present is the number of distinct announced parts b has.
func (b *Binary) Present() int {
	n, last := 0, 0
	for _, s := range b.Segments {
		if s.Number >= 1 && s.Number <= b.Parts && s.Number != last {
			n++
			last = s.Number
		}
	}
	return n
}

// Bytes is the size of b's parts: one segment per part number.
func (b *Binary) Bytes() int64 {
	var n int64
	last := 0
	for _, s := range b.Segments {
		if s.Number != last {
			n = addBytes(n, s.Bytes)
			last = s.Number
		}
	}
	return n
}

// addBytes is a+b for sizes (never negative), saturating at the largest
// int64: an article's size is capped (maxArticleBytes), but a record
// stored before the cap may hold any size the overview gave, and a sum
// that wrapped would show a negative size and pass no --min-bytes.
func addBytes(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// derive recomputes the fields that follow from the others.
func (r *Release) derive() {
	r.Size = 0
	for _, f := range r.Binaries {
		r.Size = addBytes(r.Size, f.Bytes)
	}
	r.Category = Categorize(r.Groups, r.Name)
}

// Complete reports whether every announced file is present with every
// part.
func (r *Release) Complete() bool {
	if len(r.Binaries) == 0 || r.filesPresent() < r.Files {
		return false
	}
	for _, f := range r.Binaries {
		if f.Present < f.Parts {
			return false
		}
	}
	return true
}

// Completion is the fraction of r present, 0 to 1: parts present over
// parts announced, times files present over files announced.
func (r *Release) Completion() float64 {
	var have, want int
	for _, f := range r.Binaries {
		have += f.Present
		want += f.Parts
	}
	if want == 0 {
		return 0
	}
	c := float64(have) / float64(want)
	if n := r.filesPresent(); n < r.Files {
		c *= float64(n) / float64(r.Files)
	}
	return c
}

// filesPresent is the number of r's binaries that are announced files:
// numbered from 1 ([i/n]; every binary of a post of n files has a
// counter). Counting every binary would let a file numbered 0 (the .nfo
// or .nzb of a post of n files, [0/n]) stand in for a missing one; the
// numbers are not required to be distinct, since some posters number
// every file alike ([1/5] five times) and their posts are whole.
func (r *Release) filesPresent() int {
	n := 0
	for _, f := range r.Binaries {
		if f.File >= 1 {
			n++
		}
	}
	return n
}

// Batch gathers the articles of one range into binaries, in memory: a
// range is bounded (work ranges hold 20,000 articles), a group is not. Add
// costs a map lookup and an append; ids, ordering and de-duplication are
// done once per binary, in Binaries.
type Batch struct {
	bins     map[batchKey]*batchBinary
	articles int
	// last is the binary Add added to last, under lastKey: consecutive
	// articles are mostly parts of one file, which then need no lookup.
	last    *batchBinary
	lastKey batchKey
}

type batchKey struct {
	poster, binary string
	parts          int
}

type batchBinary struct {
	Binary
	key   string  // the subject without its part counter: half the id
	first Segment // the lowest segment, whose subject the binary keeps
}

func (v *batchBinary) binaryKey() string { return v.key }

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{bins: map[batchKey]*batchBinary{}} }

// Add adds one article. A zero part (Subject.ZeroPart) is counted but
// joins no binary: it is no part of the file whose name it carries, and
// as a binary of its own it would stand in the post for that file.
func (b *Batch) Add(a Article) {
	b.articles++
	if a.Subject.ZeroPart {
		return
	}
	seg := Segment{Number: a.Subject.Part, Bytes: a.Bytes, ID: a.MessageID, Date: a.Date}
	k := batchKey{a.From, a.Subject.Binary, a.Subject.Parts}
	cur, ok := b.last, b.last != nil && k == b.lastKey
	if !ok {
		cur, ok = b.bins[k]
	}
	if !ok {
		s := a.Subject
		cur = &batchBinary{key: s.Binary, first: seg, Binary: Binary{
			Poster:   a.From,
			Subject:  a.RawSubject,
			Name:     s.Name,
			File:     s.File,
			Files:    s.Files,
			Parts:    s.Parts,
			Date:     a.Date,
			Groups:   a.Groups,
			Segments: []Segment{seg},
			base:     s.Base,
		}}
		b.bins[k] = cur
		b.last, b.lastKey = cur, k
		return
	}
	b.last, b.lastKey = cur, k
	cur.Segments = append(cur.Segments, seg)
	if segCmp(seg, cur.first) < 0 {
		cur.first, cur.Subject = seg, a.RawSubject
	}
	if !slices.Equal(cur.Groups, a.Groups) {
		cur.Groups, _ = unionSorted(cur.Groups, sortedSet(a.Groups))
	}
	if a.Date != 0 && (cur.Date == 0 || a.Date < cur.Date) {
		cur.Date = a.Date
	}
}

// sortedSet returns s sorted and without repeats, copying only when it is
// not already.
func sortedSet(s []string) []string {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			s = slices.Clone(s)
			slices.Sort(s)
			return slices.Compact(s)
		}
	}
	return s
}

// Articles is the number of articles added.
func (b *Batch) Articles() int { return b.articles }

// Binaries returns the batch's binaries in id order, each with its
// segments in order and unique by message-id, as Merge keeps them.
func (b *Batch) Binaries() []*Binary {
	out := make([]*Binary, 0, len(b.bins))
	ids := map[string]struct{}{}
	for _, v := range b.bins {
		bin := v.Binary
		bin.ID = BinaryID(bin.Poster, v.binaryKey(), bin.Parts)
		bin.Release = CollectionID(bin.Poster, bin.base, bin.Files)
		bin.Groups = slices.Clone(sortedSet(bin.Groups))
		if !inOrder(bin.Segments, ids) {
			bin.Segments = uniqueSegments(bin.Segments)
		}
		out = append(out, &bin)
	}
	slices.SortFunc(out, func(x, y *Binary) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// inOrder reports segs already as uniqueSegments leaves them: sorted by
// part number and message-id, with no message-id twice. Articles mostly
// arrive in part order, and checking is cheaper than sorting twice. ids
// is scratch space, cleared first.
func inOrder(segs []Segment, ids map[string]struct{}) bool {
	if len(segs) < 2 {
		return true
	}
	if !slices.IsSortedFunc(segs, segCmp) {
		return false
	}
	clear(ids)
	for _, s := range segs {
		if _, dup := ids[s.ID]; dup {
			return false
		}
		ids[s.ID] = struct{}{}
	}
	return true
}

// uniqueSegments sorts segs by part number and message-id, keeping one
// segment per message-id: the one with the lowest part number.
func uniqueSegments(segs []Segment) []Segment {
	slices.SortFunc(segs, func(a, b Segment) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Number, b.Number)) })
	segs = slices.CompactFunc(segs, func(a, b Segment) bool { return a.ID == b.ID })
	slices.SortFunc(segs, segCmp)
	return segs
}
