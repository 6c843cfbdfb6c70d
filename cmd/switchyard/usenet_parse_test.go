package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestUsenetParse(t *testing.T) {
	t.Parallel()
	out, stderr, code := execute(t, "usenet", "parse",
		`Some.Show.S01E02.720p.WEB-GRP [01/15] - "Some.Show.S01E02.720p.WEB-GRP.part01.rar" yEnc (1/50) 35651584`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"name      Some.Show.S01E02.720p.WEB-GRP.part01.rar\n",
		"part      1/50\n",
		"file      1/15\n",
		`binary    Some.Show.S01E02.720p.WEB-GRP [01/15] - "Some.Show.S01E02.720p.WEB-GRP.part01.rar" yEnc` + "\n",
		"base      Some.Show.S01E02.720p.WEB-GRP\n",
		"category  5040 TV > HD\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestUsenetParseJSONWithGroups(t *testing.T) {
	t.Parallel()
	out, stderr, code := execute(t, "usenet", "parse", `[04/15] - "k2j3h4g5f6.r02" yEnc (7/50)`,
		"--group", "alt.binaries.hdtv", "--group", "alt.binaries.teevee", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got parseResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := parseResult{
		Subject: `[04/15] - "k2j3h4g5f6.r02" yEnc (7/50)`, Name: "k2j3h4g5f6.r02", Part: 7, Parts: 50, File: 4, Files: 15,
		Binary: `[04/15] - "k2j3h4g5f6.r02" yEnc`, Base: "k2j3h4g5f6",
		Category: 5040, CategoryName: "TV > HD",
		Groups: []string{"alt.binaries.hdtv", "alt.binaries.teevee"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestUsenetParseNeedsASubject(t *testing.T) {
	t.Parallel()
	_, stderr, code := execute(t, "usenet", "parse")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d (usage): %s", code, exitUsage, stderr)
	}
	if !strings.Contains(stderr, "arg") {
		t.Errorf("stderr %q does not say what is wrong", stderr)
	}
}

// TestPrintParseEscapes: usenet parse escapes the fields it prints from the
// subject and the groups (terminalSafe). Before, it printed them raw, so an
// escape sequence in a subject reached the terminal.
func TestPrintParseEscapes(t *testing.T) {
	t.Parallel()
	out, stderr, code := execute(t, "usenet", "parse", "[1/2] - \"evil\x1b[2J.rar\" yEnc (1/5)", "--group", "alt.binaries.\x1b]0;x\a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	noControl(t, "usenet parse", out)
}
