package usenet

import "testing"

// TestCategoryTree: ids are unique, parents are multiples of 1000 in
// order, every subcategory shares its parent's thousands, and every id
// Categorize can return is in the tree (so t=caps lists it).
func TestCategoryTree(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	last := 0
	for _, p := range Categories {
		if p.ID%1000 != 0 || p.ID <= last || p.Name == "" {
			t.Errorf("parent %d %q: want a multiple of 1000 after %d, named", p.ID, p.Name, last)
		}
		last = p.ID
		seen[p.ID] = true
		sub := p.ID
		for _, s := range p.Subcats {
			if CategoryParent(s.ID) != p.ID || s.ID <= sub || s.Name == "" || seen[s.ID] {
				t.Errorf("subcat %d %q of %d: want a new id in %d..%d after %d, named", s.ID, s.Name, p.ID, p.ID+1, p.ID+999, sub)
			}
			sub = s.ID
			seen[s.ID] = true
		}
	}
	for _, id := range []int{2010, 2020, 2050, 2060, 3020, 3030, 5010, 5020, 5050, 5060, 5080, 8020} {
		if !seen[id] {
			t.Errorf("standard id %d missing", id)
		}
	}
	for _, r := range catRules {
		if !seen[r.id] {
			t.Errorf("rule %+v assigns %d, not in Categories", r, r.id)
		}
	}
	if got := CategoryName(CatTVHD); got != "TV > HD" {
		t.Errorf("CategoryName(5040) = %q", got)
	}
	if got := CategoryName(CatOther); got != "Other" {
		t.Errorf("CategoryName(8000) = %q", got)
	}
	if got := CategoryName(5999); got != "" {
		t.Errorf("CategoryName(5999) = %q", got)
	}
}
