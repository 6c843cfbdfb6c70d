package usenet

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Fold removes the accents of s, in every script: each character is
// decomposed (NFD), its combining marks (Mn) are dropped, and what is left
// is composed again (NFC). The search index folds both the names it holds
// and the words searched for, and List its words and the names it reads,
// so that a word is found whether it is typed with its accents or
// without: Σοφία by σοφια, Ёлки by елки. The tokenizer's
// remove_diacritics does the same, but for Latin letters only; Latin text
// comes out of Fold as the tokenizer folds it, but for the few letters
// whose base is not a-z, which it leaves and Fold takes to their base
// (ǽ to æ, ǿ to ø).
//
// A mark is dropped wherever it is, so letters some languages count as
// their own, and not as an accented letter, are folded too (й as и, as
// the tokenizer already took ñ as n): a search finds more.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] < 0x80
	}
	if ascii {
		return s // no marks: most names
	}
	d := strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, norm.NFD.String(s))
	return norm.NFC.String(d)
}
