package usenet

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Copy is one posting of a binary: a run of its segments, in date order,
// with no gap between two consecutive ones longer than the post gap
// (SettleConfig.PostGap). Two copies of a file posted alike (same subject,
// same split) are told apart by their dates this way; its articles carry
// nothing else that ties them together.
type Copy struct {
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Present int   `json:"present"`
	Bytes   int64 `json:"bytes"`
}

// Copies cuts b's segments into copies at every gap of more than gap
// seconds between consecutive posting dates. The result is a function of
// the set of segments, whatever order they came in.
func (b *Binary) Copies(gap int64) []Copy {
	segs := slices.Clone(b.Segments)
	slices.SortFunc(segs, func(x, y Segment) int { return cmp.Or(cmp.Compare(x.Date, y.Date), segCmp(x, y)) })
	var out []Copy
	for start := 0; start < len(segs); {
		end := start + 1
		for end < len(segs) && segs[end].Date-segs[end-1].Date <= gap {
			end++
		}
		run := Binary{Parts: b.Parts, Segments: slices.Clone(segs[start:end])}
		slices.SortFunc(run.Segments, segCmp)
		out = append(out, Copy{From: segs[start].Date, To: segs[end-1].Date, Present: run.Present(), Bytes: run.Bytes()})
		start = end
	}
	return out
}

// CollectedBinary is what a Collection keeps of one of its binaries.
type CollectedBinary struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	File   int      `json:"file,omitempty"`
	Parts  int      `json:"parts"`
	Groups []string `json:"groups"`
	// Segments is the number of segments the binary had: a binary only
	// gains segments, so of two summaries of one binary the one with more
	// is the newer.
	Segments int    `json:"segments"`
	Copies   []Copy `json:"copies"`
}

// PostState is what a Collection remembers of one of its posts between
// changes: the post's release id (kept when later parts move its first
// date), its version and whether it was published.
type PostState struct {
	ID      string `json:"id"`
	Gen     int    `json:"gen,omitempty"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Sum     string `json:"sum"`
	Version int64  `json:"version"`
	Visible bool   `json:"visible,omitempty"`
	Updated int64  `json:"updated"`
	// Post is what post-processing read in the post's bodies, applied to
	// every publication of it (nil until it ran).
	Post *Processed `json:"post,omitempty"`
}

// Collection is everything one poster posted under one base name and
// announced file count: one post, or a post and its reposts. Its posts
// (Posts) are the releases.
type Collection struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Poster   string            `json:"poster"`
	Files    int               `json:"files"`
	Binaries []CollectedBinary `json:"binaries"`
	// States are the posts as last published or held back, in the order
	// Posts returns them.
	States []PostState `json:"posts,omitempty"`
}

// CollectionOf is the collection holding b, with b as its only binary.
func CollectionOf(b *Binary, gap int64) Collection {
	return Collection{
		ID:     b.Release,
		Name:   b.base,
		Poster: b.Poster,
		Files:  b.Files,
		Binaries: []CollectedBinary{{
			ID: b.ID, Name: b.Name, File: b.File, Parts: b.Parts, Groups: slices.Clone(b.Groups),
			Segments: len(b.Segments), Copies: b.Copies(gap),
		}},
	}
}

// Merge adds o's binaries to c (two records of the same collection) and
// reports whether c changed. States are not merged: they belong to the
// stored record, which update keeps.
func (c *Collection) Merge(o Collection) bool {
	changed := false
	if o.Name != "" && (c.Name == "" || o.Name < c.Name) {
		c.Name, changed = o.Name, true
	}
	if c.ID == "" {
		c.ID, c.Poster, changed = o.ID, o.Poster, true
	}
	if o.Files > c.Files {
		c.Files, changed = o.Files, true
	}
	for _, f := range o.Binaries {
		i, ok := slices.BinarySearchFunc(c.Binaries, f.ID, func(s CollectedBinary, id string) int { return cmp.Compare(s.ID, id) })
		switch {
		case !ok:
			c.Binaries = slices.Insert(slices.Clone(c.Binaries), i, f)
			changed = true
		case c.Binaries[i].Segments < f.Segments:
			g, _ := unionSorted(f.Groups, c.Binaries[i].Groups)
			c.Binaries = slices.Clone(c.Binaries)
			c.Binaries[i] = f
			c.Binaries[i].Groups = g
			changed = true
		default:
			// A binary gains groups without gaining segments when a
			// crosspost's groups are learnt one range at a time (an
			// overview without Xref names only the range's group): the
			// summary of as many segments may be the newer, so groups
			// are a union whichever summary is kept.
			if g, ok := unionSorted(c.Binaries[i].Groups, f.Groups); ok {
				c.Binaries = slices.Clone(c.Binaries)
				c.Binaries[i].Groups = g
				changed = true
			}
		}
	}
	return changed
}

// Posts are c's releases: its binaries' copies cut into posts. A post is
// a maximal run of copies, in date order, with no gap longer than gap
// seconds between one and the next, and within such a run the n-th copy
// of a file (by date) belongs to the run's n-th post (a repost made
// within the gap, of other splits). A file is its name (any case) and its
// file counter: two files of one post may share a name (a folder.jpg in
// each CD's folder, or subjects without a file name, where every file is
// named by the title word), and a repost numbers its files as the
// original did. The first post by date is the original; every other one
// is a repost of it. Posts is a function of the binaries alone, so it
// does not depend on the order articles came in; Version, Visible and
// Updated are left zero (the states hold them).
func (c *Collection) Posts(gap int64) []Release {
	posts, _ := c.posts(gap)
	return posts
}

// posts is Posts and the generation of each post within its run.
func (c *Collection) posts(gap int64) ([]Release, []int) {
	type item struct {
		b *CollectedBinary
		c Copy
	}
	var items []item
	for i := range c.Binaries {
		for _, cp := range c.Binaries[i].Copies {
			items = append(items, item{&c.Binaries[i], cp})
		}
	}
	slices.SortFunc(items, func(x, y item) int {
		return cmp.Or(cmp.Compare(x.c.From, y.c.From), cmp.Compare(x.b.ID, y.b.ID), cmp.Compare(x.c.To, y.c.To))
	})
	type genPost struct {
		r   Release
		gen int
	}
	var posts []genPost
	for start := 0; start < len(items); {
		end, hi := start+1, items[start].c.To
		for end < len(items) && items[end].c.From-hi <= gap {
			hi = max(hi, items[end].c.To)
			end++
		}
		type file struct {
			name string
			num  int
		}
		seen := map[file]int{}
		var gens [][]item
		for _, it := range items[start:end] {
			k := file{strings.ToLower(it.b.Name), it.b.File}
			if k.name == "" {
				k.name = it.b.ID
			}
			g := seen[k]
			seen[k] = g + 1
			if g == len(gens) {
				gens = append(gens, nil)
			}
			gens[g] = append(gens[g], it)
		}
		for g, its := range gens {
			r := Release{Name: c.Name, Poster: c.Poster, Files: c.Files, Date: its[0].c.From}
			for _, it := range its {
				r.Groups, _ = unionSorted(r.Groups, it.b.Groups)
				r.Binaries = append(r.Binaries, FileSummary{
					ID: it.b.ID, Name: it.b.Name, File: it.b.File, Parts: it.b.Parts,
					Present: it.c.Present, Bytes: it.c.Bytes, From: it.c.From, To: it.c.To,
				})
			}
			slices.SortFunc(r.Binaries, func(x, y FileSummary) int { return cmp.Compare(x.ID, y.ID) })
			r.Groups = slices.Clone(r.Groups)
			r.ID = idOf("p", c.ID, strconv.FormatInt(r.Date, 10), strconv.Itoa(g))
			r.derive()
			posts = append(posts, genPost{r, g})
		}
		start = end
	}
	slices.SortStableFunc(posts, func(x, y genPost) int { return cmp.Compare(x.r.Date, y.r.Date) })
	rels, gens := make([]Release, len(posts)), make([]int, len(posts))
	for i, p := range posts {
		rels[i], gens[i] = p.r, p.gen
	}
	return rels, gens
}

// postSpan is the first and last posting date of r's files.
func postSpan(r *Release) (from, to int64) {
	from = r.Date
	for _, f := range r.Binaries {
		to = max(to, f.To)
	}
	return from, to
}

// resolve is Posts with the ids of c's states: a post that overlaps a
// published post of the same generation keeps that post's id (its first
// date moved because an earlier part arrived late), and every post after
// the first is marked a repost of it. It returns each post's state index
// in c.States (or -1) and generation. A post takes the first state (in
// c.States) not taken yet of its id, else the first of those published
// that overlaps it; states are looked up by id and by generation, not
// scanned for each post, since update and visible resolve every post of a
// collection on every merge and settle sweep.
func (c *Collection) resolve(gap int64) ([]Release, []int, []int) {
	posts, gens := c.posts(gap)
	idx := make([]int, len(posts))
	byID := make(map[string][]int, len(c.States)) // states by id, in order
	for j, st := range c.States {
		byID[st.ID] = append(byID[st.ID], j)
	}
	used := make([]bool, len(c.States))
	unmatched := false
	for i := range posts {
		idx[i] = -1
		if js := byID[posts[i].ID]; len(js) > 0 {
			idx[i], used[js[0]] = js[0], true
			byID[posts[i].ID] = js[1:]
		} else {
			unmatched = true
		}
	}
	if unmatched {
		// The published states left, by generation, in order.
		open := map[int][]int{}
		for j, st := range c.States {
			if !used[j] && st.Visible {
				open[st.Gen] = append(open[st.Gen], j)
			}
		}
		for i := range posts {
			if idx[i] >= 0 {
				continue
			}
			from, to := postSpan(&posts[i])
			js := open[gens[i]]
			for k, j := range js {
				if st := c.States[j]; st.From <= to+gap && from <= st.To+gap {
					posts[i].ID = st.ID
					idx[i] = j
					if k == 0 { // the usual case: posts and states both go by date
						open[gens[i]] = js[1:]
					} else {
						open[gens[i]] = slices.Delete(js, k, k+1)
					}
					break
				}
			}
		}
	}
	for i := 1; i < len(posts); i++ {
		posts[i].RepostOf = posts[0].ID
	}
	return posts, idx, gens
}

// sum is a hash of what a post shows, to tell whether it changed.
func sum(r *Release) string {
	v, _ := json.Marshal(r)
	h := sha256.Sum256(v)
	return hex.EncodeToString(h[:8])
}

// update brings c's states in line with its posts after a change at ms
// (unix milliseconds) and returns the posts to publish: the visible ones
// that changed, at their new versions. A post becomes visible once
// complete and past the minimums of p.
func (c *Collection) update(p SettleConfig, ms int64) []Release {
	posts, idx, gens := c.resolve(p.gap())
	states := make([]PostState, len(posts))
	var pub []Release
	for i := range posts {
		r := &posts[i]
		var st PostState
		if idx[i] >= 0 {
			st = c.States[idx[i]]
		}
		s := sum(r)
		from, to := postSpan(r)
		if idx[i] < 0 || st.Sum != s || st.ID != r.ID {
			st.ID, st.From, st.To, st.Sum = r.ID, from, to, s
			st.Gen = gens[i]
			st.Version++
			st.Updated = ms
			if !st.Visible && r.Complete() && p.passes(r) {
				st.Visible = true
			}
			if st.Visible {
				p := *r
				st.overlay(&p)
				pub = append(pub, p)
			}
		}
		states[i] = st
	}
	c.States = states
	return pub
}

// visible is c's published posts as their states last published them.
func (c *Collection) visible(p SettleConfig) []Release {
	posts, idx, _ := c.resolve(p.gap())
	var out []Release
	for i := range posts {
		if idx[i] < 0 || !c.States[idx[i]].Visible {
			continue
		}
		st := c.States[idx[i]]
		st.overlay(&posts[i])
		out = append(out, posts[i])
	}
	return out
}
