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
		out = append(out, p)
	}
	return out
}

// articles is every article of posts as each group sees it: a crossposted
// article appears in each of its groups with the same message-id.
func articles(posts []post) map[string][]Article {
	byGroup := map[string][]Article{}
	for pi, p := range posts {
		for fi, f := range p.files {
			for part := 1; part <= f.parts; part++ {
				subj := fmt.Sprintf(`%s [%d/%d] - "%s" yEnc (%d/%d) %d`, p.base, fi+1, len(p.files), f.name, part, f.parts, f.parts*1000)
				a := Article{
					Subject: Subject{
						Name: f.name, Part: part, Parts: f.parts, File: fi + 1, Files: len(p.files),
						Binary: fmt.Sprintf(`%s [%d/%d] - "%s" yEnc`, p.base, fi+1, len(p.files), f.name),
						Base:   p.base,
					},
					RawSubject: subj,
					From:       p.poster,
					Date:       p.date + int64(part),
					MessageID:  fmt.Sprintf("p%d.f%d.%d@gen", pi, fi, part),
					Bytes:      int64(1000 + part),
					Groups:     p.groups,
				}
				for _, g := range p.groups {
					byGroup[g] = append(byGroup[g], a)
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
