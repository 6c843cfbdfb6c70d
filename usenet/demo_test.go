package usenet

import (
	"context"
	"regexp"
	"testing"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// TestDemoReleasesFillTheAppsCategories runs the generated articles of
// groups shaped like up's demo provider through the parser, assembly and
// the categorizer: the releases look like scene releases and fill the
// categories Sonarr (5030, 5040) and Radarr (2000) ask for with no q.
func TestDemoReleasesFillTheAppsCategories(t *testing.T) {
	t.Parallel()
	const perGroup = 20000 // 100 releases of 4 files of 50 parts
	srv := nntptest.Start(t, nntptest.Config{PartSize: 2000})
	groups := []string{"alt.binaries.demo.1", "alt.binaries.demo.2"}
	for _, g := range groups {
		srv.AddGroup(g, perGroup)
	}
	ctx := context.Background()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	releases := map[string]*Collection{}
	var p ArticleParser
	for _, g := range groups {
		if _, err := c.Group(ctx, g); err != nil {
			t.Fatal(err)
		}
		err := c.OverLines(ctx, 1, perGroup, func(line []byte) error {
			a, err := p.Parse(line, g)
			if err != nil {
				return err
			}
			b := BinaryOf(a)
			r := CollectionOf(&b, testPolicy.gap())
			if old, ok := releases[r.ID]; ok {
				old.Merge(r)
			} else {
				releases[r.ID] = &r
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := len(groups) * perGroup / 200; len(releases) != want {
		t.Fatalf("%d releases, want %d: two generated releases share a name and poster", len(releases), want)
	}

	tv := regexp.MustCompile(`^[A-Z][a-z]+\.[A-Z][a-z]+\.(S\d\dE\d\d|2025\.\d\d\.\d\d)\.`)
	film := regexp.MustCompile(`^([A-Z][a-z]+\.){3}(19|20)\d\d\.`)
	byCat := map[int]int{}
	for _, c := range releases {
		r := Release{Name: c.Name}
		for _, b := range c.Binaries {
			r.Groups, _ = unionSorted(r.Groups, b.Groups)
		}
		r.derive()
		byCat[r.Category]++
		switch CategoryParent(r.Category) {
		case CatTV:
			if !tv.MatchString(r.Name) {
				t.Errorf("TV release %q (%d) is not named like an episode", r.Name, r.Category)
			}
		case CatMovies:
			if !film.MatchString(r.Name) {
				t.Errorf("film %q (%d) is not named like a film", r.Name, r.Category)
			}
		}
		if r.Category == CatTV || r.Category == CatMovies || r.Category == CatOtherMisc {
			t.Errorf("release %q got %d: want a subcategory that names what it is", r.Name, r.Category)
		}
	}
	t.Logf("releases by category: %v", byCat)
	sum := func(ids ...int) int {
		n := 0
		for id, c := range byCat {
			for _, want := range ids {
				if id == want || (want%1000 == 0 && CategoryParent(id) == want) {
					n += c
				}
			}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		ids  []int
		min  int
	}{
		{"TV SD", []int{CatTVSD}, 5},
		{"TV HD", []int{CatTVHD}, 5},
		{"Sonarr's 5030,5040", []int{CatTVSD, CatTVHD}, 20},
		{"Radarr's 2000", []int{CatMovies}, 20},
		{"Movies HD", []int{CatMoviesHD}, 3},
		{"Audio", []int{CatAudio}, 5},
		{"Books", []int{CatBooks}, 1},
	} {
		if got := sum(tc.ids...); got < tc.min {
			t.Errorf("%s: %d releases, want at least %d", tc.name, got, tc.min)
		}
	}
}
