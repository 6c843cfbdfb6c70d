package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// TestPrintReleasesFileCount: the FILES column shows the count a reader is
// shown everywhere else (Release.FileCount), the announced [i/n] when
// fewer binaries have been seen so far.
func TestPrintReleasesFileCount(t *testing.T) {
	var out bytes.Buffer
	printReleases(&out, []usenet.Release{
		{ID: "announced", Name: "Announced.Seven", Files: 7, Binaries: []usenet.FileSummary{{}, {}}},
		{ID: "seen", Name: "Seen.Three", Binaries: []usenet.FileSummary{{}, {}, {}}},
	})
	want := map[string]string{"announced": "7", "seen": "3"}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 rows, got:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		// ID, DATE (two fields), CATEGORY, SIZE, FILES, ...
		if len(f) < 7 {
			t.Fatalf("short row %q", l)
		}
		if got := f[5]; got != want[f[0]] {
			t.Errorf("%s: FILES %s, want %s (row %q)", f[0], got, want[f[0]], l)
		}
	}
}

// TestPrintReleasesEscapesNames: the releases table escapes each release's
// name (terminalSafe), which a poster chose and may fill with terminal
// escape sequences. Before, it printed the name raw, unlike every other
// table.
func TestPrintReleasesEscapesNames(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printReleases(&out, []usenet.Release{{ID: "r1", Name: "evil\x1b]0;pwned\a\x1b[2J.mkv"}})
	noControl(t, "usenet releases", out.String())
	if !strings.Contains(out.String(), `evil\x1b]0;pwned\a\x1b[2J.mkv`) {
		t.Errorf("the escaped name is missing:\n%s", out.String())
	}
}

// TestPrintReleasesIncompleteNotShownDone: the DONE column rounds the
// completion down, so 100% is shown only for a complete release, and a
// whole percent is not lost to float error (29 of 100 parts is 29%).
// (Was: rounded to the nearest percent, so a release missing parts, 999
// of 1000 present, showed as 100% done though it cannot be fully
// downloaded.)
func TestPrintReleasesIncompleteNotShownDone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		present, parts int
		want           string
	}{{999, 1000, "99%"}, {1000, 1000, "100%"}, {29, 100, "29%"}, {0, 10, "0%"}} {
		var out strings.Builder
		printReleases(&out, []usenet.Release{{ID: "r", Name: "Some.Release", Size: 1 << 30,
			Binaries: []usenet.FileSummary{{Name: "a.rar", Parts: c.parts, Present: c.present}}}})
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("want a header and one row, got:\n%s", out.String())
		}
		// ID, DATE (two fields), CATEGORY, SIZE, FILES, DONE, NAME
		if f := strings.Fields(lines[1]); len(f) < 8 || f[6] != c.want {
			t.Errorf("%d of %d parts: DONE is not %s (row %q)", c.present, c.parts, c.want, lines[1])
		}
	}
}

// TestUsenetReleasesQueryFoldsAccents: --q matches words as the Newznab
// API's q does, ignoring accents in every script, typed either way, and
// composed or not: Amelie finds Amélie and the other way, σοφια finds
// Σοφία; and a --q of punctuation alone finds nothing, as q does. (Was:
// the command compared lower-cased words only, so Amelie did not find
// Amélie in the CLI though it did in the API, and --q ... listed every
// release.)
func TestUsenetReleasesQueryFoldsAccents(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	st, err := usenet.NewStore(env.Client(), usenet.DefaultScope)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []usenet.Release{
		{ID: "amelie", Name: "Le.Fabuleux.Destin.d.Amélie.Poulain.2001.1080p", Date: 1_700_000_000},
		{ID: "plain", Name: "Amelie.Plain.Title.2001.720p", Date: 1_700_000_100},
		{ID: "decomposed", Name: "Ame\u0301lie.Decomposed.2001", Date: 1_700_000_200},
		{ID: "greek", Name: "Σοφία.S01E01.720p", Date: 1_700_000_300},
	} {
		r.Visible, r.Version = true, 1
		v, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Releases().Set(t.Context(), v, persist.SetOptions{Key: r.ID}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"Amelie", []string{"decomposed", "plain", "amelie"}},
		{"amélie", []string{"decomposed", "plain", "amelie"}},
		{"AMÉLIE poulain", []string{"amelie"}},
		{"σοφια", []string{"greek"}},
		{"ΣΟΦΊΑ s01e01", []string{"greek"}},
		{"...", nil},
		{"-", nil},
	} {
		out, stderr, code := execute(t, "usenet", "releases", "--json", "--q", tc.q, "--nats", env.URL())
		if code != 0 {
			t.Fatalf("--q %q: exit %d, %s", tc.q, code, stderr)
		}
		var rels []usenet.Release
		if err := json.Unmarshal([]byte(out), &rels); err != nil {
			t.Fatalf("--q %q: %v\n%s", tc.q, err, out)
		}
		var got []string
		for _, r := range rels {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("--q %q: found %q, want %q", tc.q, got, tc.want)
		}
	}
}
