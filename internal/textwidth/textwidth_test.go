package textwidth

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"unicode"
)

// TestRune: wide characters take two columns, combining marks and joiners
// none, the rest one.
func TestRune(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    rune
		want int
	}{
		{'a', 1}, {'~', 1}, {'é', 1}, {'ß', 1}, {'Ж', 1}, {'α', 1},
		{'漢', 2}, {'字', 2}, {'あ', 2}, {'ア', 2}, {'한', 2}, {'。', 2},
		{'Ａ', 2}, {'！', 2}, {'￥', 2}, // fullwidth forms
		{'ｱ', 1}, {'ﾞ', 1}, // halfwidth katakana
		{'🎉', 2}, {'😀', 2}, {'🚀', 2}, {'🤖', 2}, {'🧪', 2},
		{'\u0301', 0}, {'\u20dd', 0}, {'\u200d', 0}, {'\ufe0f', 0}, {'\U000E0100', 0}, {'\u3099', 0},
		{'\U00020000', 2},
	} {
		if got := Rune(c.r); got != c.want {
			t.Errorf("Rune(%U %q) = %d, want %d", c.r, c.r, got, c.want)
		}
	}
	if got := String("e\u0301t\u00e9 漢字 🎉!"); got != 12 {
		t.Errorf("String of a mixed text = %d, want 12", got)
	}
	if got := String("a\xffb"); got != 3 {
		t.Errorf("String with a bad byte = %d, want 3", got)
	}
}

// TestSpansSorted: the range tables are sorted and do not overlap, as the
// binary search needs.
func TestSpansSorted(t *testing.T) {
	t.Parallel()
	for name, table := range map[string][]span{"wide": wide, "zero": zero} {
		for i, s := range table {
			if s.lo > s.hi || i > 0 && s.lo <= table[i-1].hi {
				t.Errorf("%s[%d] = %U-%U: out of order or overlapping", name, i, s.lo, s.hi)
			}
		}
	}
}

// TestScriptsWide: every letter of the Han, Hiragana and Katakana scripts
// and every Hangul syllable takes two columns, except the halfwidth forms,
// which are the narrow ones by name.
func TestScriptsWide(t *testing.T) {
	t.Parallel()
	for name, tab := range map[string]*unicode.RangeTable{"Han": unicode.Han, "Hiragana": unicode.Hiragana, "Katakana": unicode.Katakana} {
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if !unicode.Is(tab, r) || unicode.In(r, unicode.Mn, unicode.Me) || r >= 0xFF61 && r <= 0xFFDC {
				continue
			}
			if Rune(r) != 2 {
				t.Errorf("%s %U %q: width %d, want 2", name, r, r, Rune(r))
			}
		}
	}
	for r := rune(0xAC00); r <= 0xD7A3; r++ {
		if Rune(r) != 2 {
			t.Fatalf("Hangul syllable %U: width %d, want 2", r, Rune(r))
		}
	}
}

// tabwriterLayout is what text/tabwriter prints of text, set up as the
// CLI's tables were.
func tabwriterLayout(text string, minwidth int) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, minwidth, 4, 2, ' ', 0)
	w.Write([]byte(text))
	w.Flush()
	return b.String()
}

func tableLayout(text string) string {
	var b bytes.Buffer
	tb := NewTable(&b, 2)
	tb.Write([]byte(text))
	if err := tb.Flush(); err != nil {
		panic(err)
	}
	return b.String()
}

// tableSeeds are texts shaped like the CLI's tables: headers, ragged rows,
// blank lines between tables, titles without tabs, empty cells, trailing
// tabs, no final newline.
var tableSeeds = []string{
	"",
	"no tabs at all\n",
	"ID\tNAME\n1\talpha\n22\tb\n",
	"source s: 0 articles/s\n\nGROUP\tLOW\tHIGH\nalt.bin\t1\t10\n\nSTATE\tRANGES\nplanned\t0\ndone\t12\n",
	"a\tb\tc\n\tx\n1\t22\t333\t4444\nlonger cell\t\t\n",
	"k\tv\nkey two\tvalue\tmore\nlast without newline",
	"x\t\n\t\n\t\t\n",
	"one\ttwo\nthree\n\tfour\tfive\n",
	"a\tb\n\n\nc\td\n",
}

// TestTableMatchesTabwriter: on text whose runes each take one column, a
// Table prints exactly what text/tabwriter printed, so the CLI's tables
// did not change for ASCII.
func TestTableMatchesTabwriter(t *testing.T) {
	t.Parallel()
	for _, text := range tableSeeds {
		for _, minwidth := range []int{0, 2} {
			if got, want := tableLayout(text), tabwriterLayout(text, minwidth); got != want {
				t.Errorf("text %q (tabwriter minwidth %d):\ngot  %q\nwant %q", text, minwidth, got, want)
			}
		}
	}
}

// FuzzTableMatchesTabwriter: as TestTableMatchesTabwriter, on any text of
// printable ASCII, tabs and newlines (the characters tabwriter gives no
// other meaning).
func FuzzTableMatchesTabwriter(f *testing.F) {
	for _, s := range tableSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, c := range []byte(text) {
			if c != '\t' && c != '\n' && (c < ' ' || c > '~') {
				t.Skip()
			}
		}
		if got, want := tableLayout(text), tabwriterLayout(text, 0); got != want {
			t.Fatalf("text %q:\ngot  %q\nwant %q", text, got, want)
		}
	})
}

// cellColumns is the display column at which each of cells starts on line,
// finding them in order.
func cellColumns(t *testing.T, line string, cells []string) []int {
	t.Helper()
	var cols []int
	at := 0
	for _, c := range cells {
		i := strings.Index(line[at:], c)
		if i < 0 {
			t.Fatalf("cell %q not in line %q after byte %d", c, line, at)
		}
		cols = append(cols, String(line[:at+i]))
		at += i + len(c)
	}
	return cols
}

// TestTableAlignsWide: cells holding CJK, emoji and a combining accent
// line up with ASCII ones in the terminal's columns.
func TestTableAlignsWide(t *testing.T) {
	t.Parallel()
	rows := [][]string{
		{"NAME", "USER", "SIZE"},
		{"plain", "bob", "1"},
		{"漢字テスト", "ユーザー", "22"},
		{"party🎉🎉", "🤖", "333"},
		{"cafe\u0301 noir", "jose\u0301", "4444"},
	}
	var b bytes.Buffer
	tb := NewTable(&b, 2)
	for _, r := range rows {
		tb.Write([]byte(strings.Join(r, "\t") + "\n"))
	}
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(rows) {
		t.Fatalf("%d lines for %d rows:\n%s", len(lines), len(rows), b.String())
	}
	want := cellColumns(t, lines[0], rows[0])
	for i, r := range rows[1:] {
		if got := cellColumns(t, lines[i+1], r); !slices.Equal(got, want) {
			t.Errorf("row %q starts its cells at columns %v, the header at %v:\n%s", lines[i+1], got, want, b.String())
		}
	}
}
