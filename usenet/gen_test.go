package usenet

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// post is one generated post: files of parts by one poster.
type post struct {
	poster, base string
	files        []genFile
	groups       []string // crossposted to all of them
	date         int64
	// reposts are later copies of the post by the same poster: each is a
	// release of its own.
	reposts []repost
}

// repost is a later copy of a post, hours after it: posted alike (same
// subjects and splits, new message-ids), or split into other part counts.
type repost struct {
	date  int64
	split bool
}

// copies is the post's copies: the original (split false) then its
// reposts.
func (p post) copies() []repost { return append([]repost{{date: p.date}}, p.reposts...) }

// parts is the number of parts of f in copy c.
func (f genFile) partsIn(c repost) int {
	if c.split {
		return f.parts + 1
	}
	return f.parts
}

type genFile struct {
	name  string
	parts int
}

// genPosts builds n random posts over groups: multi-file posts with rar
// volumes and par2 files, single-part files, crossposts.
func genPosts(rng *rand.Rand, n int, groups []string) []post {
	var out []post
	for i := range n {
		p := post{
			poster: fmt.Sprintf("poster%d@example.com", rng.IntN(4)),
			base:   fmt.Sprintf("Post.%d.S01E%02d.720p-GRP", i, rng.IntN(20)),
			date:   1_700_000_000 + int64(i)*60,
		}
		nf := 1 + rng.IntN(5)
		for f := range nf {
			name := fmt.Sprintf("%s.part%02d.rar", p.base, f+1)
			if f == nf-1 && nf > 1 {
				name = p.base + ".par2"
			}
			p.files = append(p.files, genFile{name: name, parts: 1 + rng.IntN(12)})
		}
		p.groups = []string{groups[rng.IntN(len(groups))]}
		if rng.IntN(4) == 0 {
			p.groups = append(p.groups, groups[rng.IntN(len(groups))])
		}
		slices.Sort(p.groups)
		p.groups = slices.Compact(p.groups)
		// Some posts are reposted, hours later (past PostGapDefault).
		for k := range rng.IntN(3) {
			if rng.IntN(2) == 0 {
				p.reposts = append(p.reposts, repost{date: p.date + int64(k+1)*7200, split: rng.IntN(2) == 0})
			}
		}
		out = append(out, p)
	}
	return out
}

// articles is every article of posts as each group sees it: a crossposted
// article appears in each of its groups with the same message-id.
func articles(posts []post) map[string][]Article {
	byGroup := map[string][]Article{}
	for pi, p := range posts {
		for ci, c := range p.copies() {
			for fi, f := range p.files {
				parts := f.partsIn(c)
				for part := 1; part <= parts; part++ {
					byGroup = addArticle(byGroup, p, c, fi, f, part, parts, fmt.Sprintf("p%d.c%d.f%d.%d@gen", pi, ci, fi, part))
				}
			}
		}
	}
	for g, as := range byGroup {
		for i := range as {
			as[i].Number = int64(i + 1)
		}
		byGroup[g] = as
	}
	return byGroup
}

// addArticle adds part of f in copy c of p to every group of p.
func addArticle(byGroup map[string][]Article, p post, c repost, fi int, f genFile, part, parts int, id string) map[string][]Article {
	subj := fmt.Sprintf(`%s [%d/%d] - "%s" yEnc (%d/%d) %d`, p.base, fi+1, len(p.files), f.name, part, parts, parts*1000)
	a := Article{
		Subject: Subject{
			Name: f.name, Part: part, Parts: parts, File: fi + 1, Files: len(p.files),
			Binary: fmt.Sprintf(`%s [%d/%d] - "%s" yEnc`, p.base, fi+1, len(p.files), f.name),
			Base:   p.base,
		},
		RawSubject: subj,
		From:       p.poster,
		Date:       c.date + int64(part),
		MessageID:  id,
		Bytes:      int64(1000 + part),
		Groups:     p.groups,
	}
	for _, g := range p.groups {
		byGroup[g] = append(byGroup[g], a)
	}
	return byGroup
}

// split cuts a group's articles into ranges at random points.
func split(rng *rand.Rand, as []Article) [][]Article {
	var out [][]Article
	for len(as) > 0 {
		n := 1 + rng.IntN(min(len(as), 40))
		out = append(out, as[:n])
		as = as[n:]
	}
	return out
}
