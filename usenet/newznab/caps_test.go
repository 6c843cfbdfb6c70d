package newznab_test

import (
	"encoding/json"
	"encoding/xml"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// appCaps is t=caps read the way Sonarr's, Radarr's and Prowlarr's
// NewznabCapabilitiesProvider read it: attributes as strings, ids and
// limits through int.Parse (strconv.Atoi here), so a missing or
// non-numeric attribute fails as it fails there.
type appCaps struct {
	Limits struct {
		Max     string `xml:"max,attr"`
		Default string `xml:"default,attr"`
	} `xml:"limits"`
	Searching struct {
		Search      appSearch `xml:"search"`
		TVSearch    appSearch `xml:"tv-search"`
		MovieSearch appSearch `xml:"movie-search"`
	} `xml:"searching"`
	Categories []struct {
		ID      string `xml:"id,attr"`
		Name    string `xml:"name,attr"`
		Subcats []struct {
			ID   string `xml:"id,attr"`
			Name string `xml:"name,attr"`
		} `xml:"subcat"`
	} `xml:"categories>category"`
}

type appSearch struct {
	Available       string `xml:"available,attr"`
	SupportedParams string `xml:"supportedParams,attr"`
}

// params is what an app takes from a search element: nothing unless it
// is available="yes", else supportedParams split at commas.
func (s appSearch) params() []string {
	if s.Available != "yes" {
		return nil
	}
	return strings.Split(s.SupportedParams, ",")
}

// prowlarrNames are standard categories as Prowlarr names them
// ("Parent/Sub"); it maps an indexer's category to one of them by the
// names caps gives.
var prowlarrNames = map[int]string{
	1000: "Console", 2000: "Movies", 2010: "Movies/Foreign", 2020: "Movies/Other", 2030: "Movies/SD",
	2040: "Movies/HD", 2045: "Movies/UHD", 2050: "Movies/BluRay", 2060: "Movies/3D",
	3000: "Audio", 3010: "Audio/MP3", 3020: "Audio/Video", 3030: "Audio/Audiobook", 3040: "Audio/Lossless",
	4000: "PC", 4010: "PC/0day", 4020: "PC/ISO", 4030: "PC/Mac", 4050: "PC/Games",
	5000: "TV", 5010: "TV/WEB-DL", 5020: "TV/Foreign", 5030: "TV/SD", 5040: "TV/HD", 5045: "TV/UHD",
	5050: "TV/Other", 5060: "TV/Sport", 5070: "TV/Anime", 5080: "TV/Documentary",
	6000: "XXX", 7000: "Books", 7010: "Books/Mags", 7020: "Books/EBook", 7030: "Books/Comics",
	8000: "Other", 8010: "Other/Misc", 8020: "Other/Hashed",
}

// TestCapsAsAppsRead: caps parses as the apps parse it, and passes the
// checks their "Test" buttons make on it.
func TestCapsAsAppsRead(t *testing.T) {
	e := newEnv(t)
	_, body := e.get("t=caps")
	var caps appCaps
	if err := xml.Unmarshal(body, &caps); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}

	max, errMax := strconv.Atoi(caps.Limits.Max)
	def, errDef := strconv.Atoi(caps.Limits.Default)
	if errMax != nil || errDef != nil || def <= 0 || def > max {
		t.Errorf("limits max=%q default=%q: want two ints, 0 < default <= max", caps.Limits.Max, caps.Limits.Default)
	}

	// Sonarr: search with q, tv-search with q and season and ep. Radarr:
	// movie-search with q or imdbid; releases carry no ids, so q alone.
	// Only what the search honours.
	if got := caps.Searching.Search.params(); !slices.Equal(got, []string{"q"}) {
		t.Errorf("search params %q, want q", got)
	}
	if got := caps.Searching.TVSearch.params(); !slices.Equal(got, []string{"q", "season", "ep"}) {
		t.Errorf("tv-search params %q, want q,season,ep", got)
	}
	if got := caps.Searching.MovieSearch.params(); !slices.Equal(got, []string{"q"}) {
		t.Errorf("movie-search params %q, want q", got)
	}

	// Every id an int, every subcat under its parent, the names mapping to
	// Prowlarr's standard categories.
	got := map[int]string{}
	for _, c := range caps.Categories {
		id, err := strconv.Atoi(c.ID)
		if err != nil || id%1000 != 0 || c.Name == "" {
			t.Errorf("category id=%q name=%q: want a parent id and a name", c.ID, c.Name)
			continue
		}
		got[id] = c.Name
		for _, s := range c.Subcats {
			sid, err := strconv.Atoi(s.ID)
			if err != nil || sid/1000*1000 != id || sid == id || s.Name == "" {
				t.Errorf("subcat id=%q name=%q under %d: want an id of its parent's thousands and a name", s.ID, s.Name, id)
				continue
			}
			got[sid] = c.Name + "/" + s.Name
		}
	}
	for id, name := range prowlarrNames {
		if got[id] != name {
			t.Errorf("category %d maps to %q, want Prowlarr's %q", id, got[id], name)
		}
	}
	// Sonarr's and Radarr's default categories.
	for _, id := range []int{5030, 5040, 2000, 2010, 2020, 2030, 2040, 2045, 2050, 2060} {
		if got[id] == "" {
			t.Errorf("default category %d of Sonarr or Radarr missing", id)
		}
	}

	// The JSON form carries the same tree.
	_, body = e.get("t=caps&o=json")
	var j struct {
		Limits struct {
			Max, Default int
		} `json:"limits"`
		Categories []struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Subcats []struct {
				ID, Name string
			} `json:"subcat"`
		} `json:"categories"`
	}
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatalf("caps json: %v\n%s", err, body)
	}
	n := 0
	for _, c := range j.Categories {
		n += 1 + len(c.Subcats)
	}
	if n != len(got) || j.Limits.Max != max || j.Limits.Default != def {
		t.Errorf("caps json has %d categories, limits %+v; XML %d, %d/%d", n, j.Limits, len(got), max, def)
	}
}
