package work

import "testing"

func TestParseShard(t *testing.T) {
	for _, s := range []string{"1/1", "2/3", "3/3"} {
		if _, err := ParseShard(s); err != nil {
			t.Errorf("ParseShard(%q): %v", s, err)
		}
	}
	for _, s := range []string{"0/2", "3/2", "x", "1/0", "1/2x", "", "1/", "-1/2", "1/2/3"} {
		if sh, err := ParseShard(s); err == nil {
			t.Errorf("ParseShard(%q) = %v, want an error", s, sh)
		}
	}
	sh, _ := ParseShard("2/3")
	for id, want := range map[uint64]bool{1: true, 4: true, 2: false, 3: false} {
		if sh.Owns(id) != want {
			t.Errorf("shard 2/3 owns %d: %v, want %v", id, !want, want)
		}
	}
}

func TestParseGroups(t *testing.T) {
	g, err := ParseGroups("alt.binaries.*, alt.test")
	if err != nil || len(g.Patterns) != 2 || !g.Globs() || g.Wildmat() != "alt.binaries.*,alt.test" {
		t.Errorf("ParseGroups: %+v %v", g, err)
	}
	for _, s := range []string{"", " , ", "a b", "!alt.*"} {
		if _, err := ParseGroups(s); err == nil {
			t.Errorf("ParseGroups(%q): no error", s)
		}
	}
}
