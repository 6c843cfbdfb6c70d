package nfo

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"cp437 box art", []byte("\xda\xc4\xc4\xbf\r\n\xb3\xdb\xdb\xb3\r\n\xc0\xc4\xc4\xd9\r\n"), "┌──┐\n│██│\n└──┘\n"},
		{"cp437 shades and double lines", []byte("\xb0\xb1\xb2 \xc9\xcd\xbb \xba \xc8\xcd\xbc"), "░▒▓ ╔═╗ ║ ╚═╝"},
		{"cp437 letters", []byte("Caf\x82 \x9b \xe1 \xf8"), "Café ¢ ß °"},
		{"utf-8 kept", []byte("Ünïcödé ✓ █▓▒░ 日本\n"), "Ünïcödé ✓ █▓▒░ 日本\n"},
		{"utf-8 byte order mark dropped", []byte("\xef\xbb\xbfhi"), "hi"},
		{"controls removed, tab kept", []byte("a\x00b\x07c\td\x1b[1;33me\x1a"), "abc\tde"},
		{"ansi sequence cut short", []byte("a\x1b[1;3"), "a"},
		{"lone escape", []byte("a\x1bb"), "ab"},
		{"lone cr", []byte("a\rb\r\n\r\nc"), "a\nb\n\nc"},
		{"utf-16le", []byte("\xff\xfeh\x00\xe9\x00\r\x00\n\x00"), "hé\n"},
		{"utf-16be", []byte("\xfe\xff\x00h\x25\x88"), "h█"},
		{"c1 controls of utf-8 removed", []byte("a\u0085b"), "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Fatalf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTextEveryCP437Byte(t *testing.T) {
	t.Parallel()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	got := []rune(Text(all))
	// 0x00–0x1F but TAB and LF, and 0x7F, are removed; CR becomes LF.
	want := []rune("\t\n\n")
	for c := 0x20; c < 0x7f; c++ {
		want = append(want, rune(c))
	}
	want = append(want, cp437[:]...)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Text(all bytes) = %q, want %q", string(got), string(want))
	}
	if got, want := cp437[0xdb-0x80], '█'; got != want {
		t.Errorf("0xDB = %q, want %q", got, want)
	}
	if got, want := cp437[0xc4-0x80], '─'; got != want {
		t.Errorf("0xC4 = %q, want %q", got, want)
	}
}

func TestTextCap(t *testing.T) {
	t.Parallel()
	// A UTF-8 text cut by the cap inside a rune stays UTF-8, not CP437.
	in := []byte(strings.Repeat("a", MaxSize-1) + "é and more")
	got := Text(in)
	if len(got) != MaxSize-1 || strings.ContainsAny(got, "├⌐") {
		t.Fatalf("Text of a capped UTF-8 input: %d bytes, ends %q", len(got), got[len(got)-5:])
	}
}

// TestTextShortCP437EndingInLeadByte: an NFO shorter than MaxSize is not
// cut by the cap, so a last byte that happens to be a UTF-8 lead byte
// (here CP437 0xDB, the full block) is no cut rune: the text is not UTF-8
// and is read as CP437, keeping its last character. (Was: a partial rune
// at the end of any input was taken for one the cap cut, so such an NFO
// was read as UTF-8 and lost its last byte.)
func TestTextShortCP437EndingInLeadByte(t *testing.T) {
	t.Parallel()
	in := []byte("Release notes\r\n\xdb")
	if got, want := Text(in), "Release notes\n█"; got != want {
		t.Fatalf("Text(%q) = %q, want %q", in, got, want)
	}
}

func TestWords(t *testing.T) {
	t.Parallel()
	got := Words("Movie.2024.1080p BluRay x264-GROUP\n\n██ RELEASE NOTES ██ Größe: 4,37 GB\nmovie x " + strings.Repeat("z", 41) + " Release")
	want := []string{"movie", "2024", "1080p", "bluray", "x264", "group", "release", "notes", "größe", "37", "gb"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Words = %q, want %q", got, want)
	}
	var many strings.Builder
	for i := range 500 {
		many.WriteString("w")
		many.WriteString(strings.Repeat("x", i%30))
		many.WriteString(string(rune('a'+i%26)) + string(rune('a'+i/26)) + " ")
	}
	if n := len(Words(many.String())); n != MaxWords {
		t.Fatalf("%d words, want the cap %d", n, MaxWords)
	}
}

func TestLooks(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 37))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	art := bytes.Repeat([]byte("\xdb\xdb\xdb\xb2\xb2\xb1\xb0  \xdb\xdb\xdb\xb2\xb2\xb1\xb0  GROUP\r\n"), 50)
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"ascii text", []byte("Release: Movie\r\nSize: 4 GB\r\n"), true},
		{"cp437 art", art, true},
		{"ansi colours and eof mark", []byte("\x1b[1;33mHello\x1b[0m\r\n\x1a"), true},
		{"utf-8", []byte("Größe ✓ █▓▒░\n"), true},
		{"padded with nuls", append([]byte("text\n"), make([]byte, 100)...), true},
		{"utf-16", []byte("\xff\xfeh\x00i\x00"), true},
		{"random bytes", random, false},
		{"png header", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"), false},
		{"nuls", make([]byte, 64), false},
		{"empty", nil, false},
		{"only high bytes", bytes.Repeat([]byte{0xdb}, 100), false},
		{"utf-8 with controls", []byte("ab\x01\x02\x03 text"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Looks(tt.in); got != tt.want {
				t.Fatalf("Looks(%q...) = %v, want %v", tt.in[:min(len(tt.in), 20)], got, tt.want)
			}
		})
	}
}

// FuzzText feeds Text and Words arbitrary bytes: the text is valid UTF-8
// with no control character but LF and TAB, and Text of it is itself
// (clean text is kept as it is); words keep their bounds.
func FuzzText(f *testing.F) {
	f.Add([]byte("\xda\xc4\xbf\r\n\xb3 hi \xb3\r\n"))
	f.Add([]byte("Ünïcödé ✓\r\n"))
	f.Add([]byte("\xff\xfeh\x00\xd8\x00"))
	f.Add([]byte("a\x00\rb\xef\xbb\xbf"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := Text(in)
		if !utf8.ValidString(s) {
			t.Fatalf("Text(%q) = %q: not UTF-8", in, s)
		}
		for _, r := range s {
			if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 {
				t.Fatalf("Text(%q) = %q holds control %U", in, s, r)
			}
		}
		if len(s) <= MaxSize && !strings.HasPrefix(s, "\ufeff") {
			if again := Text([]byte(s)); again != s {
				t.Fatalf("Text(Text(%q)) = %q, want %q", in, again, s)
			}
		}
		words := Words(s)
		if len(words) > MaxWords {
			t.Fatalf("%d words", len(words))
		}
		for _, w := range words {
			if n := utf8.RuneCountInString(w); n < MinWordRunes || n > MaxWordRunes {
				t.Fatalf("word %q of %d runes", w, n)
			}
		}
		Looks(in)
	})
}
