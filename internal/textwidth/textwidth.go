// Package textwidth measures text in terminal columns, and lines up
// tab-separated cells in columns by that measure (Table).
//
// The widths follow Unicode's East Asian Width property (UAX #11) and the
// wcwidth convention terminals implement: Wide and Fullwidth characters take
// two columns, combining marks and zero-width joiners none, everything else
// one. The tables here are a hand-written approximation of that property,
// enough for names in CLI tables: they cover the CJK, Hangul and kana blocks,
// the fullwidth forms and the main emoji blocks, not every wide character of
// the latest Unicode version.
package textwidth

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// span is a closed range of code points.
type span struct{ lo, hi rune }

// wide holds the ranges of East Asian Wide (W) and Fullwidth (F) characters
// that take two columns, sorted and not overlapping (a test checks that).
var wide = []span{
	{0x1100, 0x115F},   // Hangul Jamo leading consonants
	{0x2329, 0x232A},   // angle brackets
	{0x2E80, 0x303E},   // CJK radicals, Kangxi, ideographic description, CJK symbols and punctuation
	{0x3041, 0x33FF},   // Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Kanbun, CJK strokes, enclosed CJK, CJK compatibility
	{0x3400, 0x4DBF},   // CJK Unified Ideographs Extension A
	{0x4E00, 0x9FFF},   // CJK Unified Ideographs
	{0xA000, 0xA4CF},   // Yi syllables and radicals
	{0xA960, 0xA97F},   // Hangul Jamo Extended-A (leading consonants)
	{0xAC00, 0xD7A3},   // Hangul syllables
	{0xF900, 0xFAFF},   // CJK Compatibility Ideographs
	{0xFE10, 0xFE19},   // vertical forms
	{0xFE30, 0xFE6F},   // CJK compatibility forms, small form variants
	{0xFF01, 0xFF60},   // fullwidth ASCII forms and brackets
	{0xFFE0, 0xFFE6},   // fullwidth signs (cent, pound, yen, ...)
	{0x16FE0, 0x16FFF}, // ideographic symbols and punctuation
	{0x17000, 0x18CFF}, // Tangut, Khitan (ideographs)
	{0x1AFF0, 0x1B2FF}, // Kana extended and supplement, Nushu
	{0x1F200, 0x1F2FF}, // enclosed ideographic supplement
	{0x1F300, 0x1F64F}, // emoji: miscellaneous symbols and pictographs, emoticons
	{0x1F680, 0x1F6FF}, // emoji: transport and map symbols
	{0x1F900, 0x1F9FF}, // emoji: supplemental symbols and pictographs
	{0x1FA70, 0x1FAFF}, // emoji: symbols and pictographs extended-A
	{0x20000, 0x2FFFD}, // CJK Unified Ideographs Extensions B to F, compatibility supplement
	{0x30000, 0x3FFFD}, // CJK Unified Ideographs Extensions G and later
}

// zero holds the ranges, besides the combining marks (Mn, Me), that take no
// column of their own, sorted and not overlapping.
var zero = []span{
	{0x1160, 0x11FF}, // Hangul Jamo vowels and trailing consonants: they join the leading consonant's two columns
	{0x200B, 0x200D}, // zero width space, non-joiner, joiner (joins emoji into one)
	{0x2060, 0x2060}, // word joiner
	{0xD7B0, 0xD7FF}, // Hangul Jamo Extended-B (vowels and trailing consonants)
	{0xFE00, 0xFE0F}, // variation selectors (also Mn; listed for the reader)
	{0xFEFF, 0xFEFF}, // zero width no-break space
}

func in(table []span, r rune) bool {
	i := sort.Search(len(table), func(i int) bool { return table[i].hi >= r })
	return i < len(table) && table[i].lo <= r
}

// Rune is the number of terminal columns r takes: 0, 1 or 2. Control
// characters count 1, as text/tabwriter counts them: a caller that prints
// them escapes them first.
func Rune(r rune) int {
	switch {
	case r < 0x300:
		// ASCII and Latin: one column, without a table lookup.
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me) || in(zero, r):
		return 0
	case in(wide, r):
		return 2
	}
	return 1
}

// String is the number of terminal columns s takes: the sum of its runes'
// widths. A byte that is not valid UTF-8 counts 1 (it prints as U+FFFD).
func String(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += Rune(r)
		i += size
	}
	return n
}
