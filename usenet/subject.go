package usenet

import (
	"strings"
	"unicode"
)

// Subject is what ParseSubject extracts from an article's subject.
type Subject struct {
	// Name is the file name: the quoted name, else a token that looks like a
	// file name (has an extension), else "".
	Name string
	// Part and Parts are the part counter (p/t); 1 and 1 for a subject
	// without one (a single-part file).
	Part, Parts int
	// Counter reports a valid part counter (1 <= p <= t): Part and Parts
	// alone cannot tell a subject's "(1/1)" from no counter at all.
	Counter bool
	// ZeroPart reports a part counter (0/t), t >= 1: a file's "zero
	// part", the text some posting tools send ahead of its part 1 under
	// the file's name. It is no part of the file (Part and Parts are 1
	// and 1, as for any impossible counter) and is not indexed.
	ZeroPart bool
	// File and Files are the file counter [i/n]; 0 and 0 when absent.
	File, Files int
	// Binary is the subject with its part counter (and a trailing size after
	// it) removed and spaces trimmed: with the poster, it keys the binary, so
	// every part of one file has the same Binary.
	Binary string
	// Base names the post the file belongs to: with the poster and Files it
	// keys the release, so every file of one post has the same Base. It is
	// the file name stripped of volume and recovery suffixes (.partNN.rar,
	// .rNN, .sNN, .volNN+NN.par2, .par2, .nfo, .sfv, .nzb, ...) and then of
	// one media or side-file extension (.mkv, .srt, .cue, .jpg, ...), or the
	// subject's text outside the counters and the name when that is what
	// the files share (obfuscated names).
	Base string
}

// ParseSubject extracts the file name, counters and keys of a subject. It
// never fails: a subject it cannot read is a single-part file named by
// nothing, whose Binary and Base are the trimmed subject (Base is "" only
// when the subject holds nothing but counters, "yEnc" and sizes).
//
// The rules, in the order they apply:
//   - encoded words (RFC 2047) are decoded and "Re:" prefixes dropped;
//   - quotes pair left to right; an unpaired last quote is plain text, and
//     nothing inside a quoted pair is read as a counter;
//   - the part counter is the LAST "(p/t)" outside quotes. An impossible one
//     (p=0, p>t, t=0, more than 9 digits) makes the article a single-part
//     file: it stays in Binary but never in Base. Counter reports a valid
//     one, ZeroPart one with p=0 and t>=1;
//   - the file counter is a "[i/n]" (or an earlier "(i/n)"): the last one
//     before the name, else the first after it. 0 <= i <= n, n >= 1 (posters
//     number an .nfo or .nzb [0/n]); an impossible one reads as absent.
//     Brackets never count parts: a subject with only "[p/t]" is a
//     single-part file with a file counter, the convention of the posting
//     tools ("[i/n] - "name" yEnc (p/t)");
//   - the name is the last quoted text that has an extension, else the last
//     quoted text, else the last unquoted token with a known extension
//     (.rar, .r01, .par2, .mkv, ...), else the last with any extension.
func ParseSubject(s string) Subject { return parseDecoded(decodeMIME(s)) }

// counter is a "(a/b)" or "[a/b]" in a subject; a or b is -1 when it has
// more than 9 digits.
type counter struct {
	start, end int
	a, b       int
	paren      bool
}

type span struct{ start, end int }

// parseDecoded is ParseSubject after MIME decoding; ParseArticle calls it
// on the subject it already decoded, so that no text is decoded twice.
func parseDecoded(s string) Subject {
	sub, _ := parseStripped(stripRe(s))
	return sub
}

// parseStripped is parseDecoded after stripRe. It also returns where the
// part counter is in s when it is a valid one (1 <= p <= t), or
// span{-1, -1}: outside that span, nothing of s depends on the counter's
// digits, which is what lets ArticleParser reuse the result for the
// next part of the same file.
func parseStripped(s string) (Subject, span) {
	sub := Subject{Part: 1, Parts: 1}
	part := span{-1, -1}
	var cbuf [16]counter
	cs, quoted, outer, named := scanSubject(s, cbuf[:0])

	// The part counter.
	partIdx := -1
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].paren {
			partIdx = i
			break
		}
	}
	var masks [4]span
	nm := 0
	sub.Binary = s
	if partIdx >= 0 {
		pc := cs[partIdx]
		masks[nm] = span{pc.start, pc.end}
		nm++
		prefix := strings.TrimSpace(s[:pc.start])
		rem := strings.TrimSpace(s[pc.end:])
		remSize := rem == "" || isSizeText(rem)
		if remSize {
			masks[nm] = span{pc.end, len(s)}
			nm++
		}
		sub.ZeroPart = pc.a == 0 && pc.b >= 1
		if pc.a >= 1 && pc.a <= pc.b {
			sub.Part, sub.Parts, sub.Counter = pc.a, pc.b, true
			part = span{pc.start, pc.end}
			switch {
			case remSize:
				sub.Binary = prefix
			case prefix == "":
				sub.Binary = rem
			default:
				sub.Binary = prefix + " " + rem
			}
		}
	}
	sub.Binary = stripRe(sub.Binary)

	// The name: quoted, else a token (outer is the span either way).
	if named {
		sub.Name = s[quoted.start:quoted.end]
	} else if tok, ok := nameToken(s, cs); ok {
		sub.Name = s[tok.start:tok.end]
		outer = tok
		named = true
	}
	if named {
		masks[nm] = outer
		nm++
	}

	// The file counter: the last before the name, else the first after it.
	fileIdx := -1
	for i, c := range cs {
		if i == partIdx {
			continue
		}
		if named && c.start >= outer.end {
			if fileIdx < 0 {
				fileIdx = i
			}
			break
		}
		if !named || c.end <= outer.start {
			fileIdx = i
		}
	}
	if fileIdx >= 0 {
		fc := cs[fileIdx]
		masks[nm] = span{fc.start, fc.end}
		nm++
		if fc.b >= 1 && fc.a >= 0 && fc.a <= fc.b {
			sub.File, sub.Files = fc.a, fc.b
		}
	}

	if rest := restText(s, masks[:nm]); rest != "" {
		sub.Base = rest
	} else {
		sub.Base = stripSuffixes(sub.Name, sub.Files)
	}
	return sub, part
}

// stripRe drops leading "Re:" (any case, repeated) and surrounding spaces.
func stripRe(s string) string {
	s = strings.TrimSpace(s)
	for len(s) >= 3 && (s[0] == 'R' || s[0] == 'r') && (s[1] == 'E' || s[1] == 'e') && s[2] == ':' {
		s = strings.TrimSpace(s[3:])
	}
	return s
}

// scanSubject finds the counters outside quotes (in order) and the quoted
// name: the trimmed content of the last quoted pair with an extension, else
// of the last non-empty one, and its span with the quotes.
func scanSubject(s string, cs []counter) (_ []counter, name, outer span, named bool) {
	usable := strings.Count(s, `"`) &^ 1 // an unpaired last quote is text
	var last, lastExt, lastOuter, lastExtOuter span
	haveLast, haveExt := false, false
	qi, open := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			if qi < usable {
				if qi%2 == 0 {
					open = i + 1
				} else {
					st, en := trimSpan(s, open, i)
					if st < en {
						last, lastOuter, haveLast = span{st, en}, span{open - 1, i + 1}, true
						if _, ok := extension(s[st:en]); ok {
							lastExt, lastExtOuter, haveExt = last, lastOuter, true
						}
					}
				}
			}
			qi++
		case (c == '(' || c == '[') && !(qi%2 == 1 && qi < usable):
			if ct, ok := counterAt(s, i); ok {
				cs = append(cs, ct)
				i = ct.end - 1
			}
		}
	}
	switch {
	case haveExt:
		return cs, lastExt, lastExtOuter, true
	case haveLast:
		return cs, last, lastOuter, true
	}
	return cs, span{}, span{}, false
}

// trimSpan narrows s[start:end] to exclude leading and trailing white
// space (any Unicode space, as strings.TrimSpace).
func trimSpan(s string, start, end int) (int, int) {
	return trimSpanFunc(s, start, end, unicode.IsSpace)
}

// trimSpanFunc narrows s[start:end] to exclude leading and trailing runes
// for which cut is true.
func trimSpanFunc(s string, start, end int, cut func(rune) bool) (int, int) {
	t := strings.TrimLeftFunc(s[start:end], cut)
	start = end - len(t)
	return start, start + len(strings.TrimRightFunc(t, cut))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// counterAt reads "(a/b)" or "[a/b]" at s[i].
func counterAt(s string, i int) (counter, bool) {
	closer := byte(')')
	if s[i] == '[' {
		closer = ']'
	}
	a, j := number(s, i+1)
	if j == i+1 || j >= len(s) || s[j] != '/' {
		return counter{}, false
	}
	b, k := number(s, j+1)
	if k == j+1 || k >= len(s) || s[k] != closer {
		return counter{}, false
	}
	return counter{start: i, end: k + 1, a: a, b: b, paren: closer == ')'}, true
}

// number reads the decimal digits at s[i:]: their value (-1 past 9 digits,
// so no overflow) and the index after them.
func number(s string, i int) (int, int) {
	n, j := 0, i
	for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
		if n >= 0 {
			if j-i >= 9 {
				n = -1
			} else {
				n = n*10 + int(s[j]-'0')
			}
		}
	}
	return n, j
}

// nameToken finds the name of a subject without a quoted one: the last
// token with a known extension, else the last with any extension and a
// letter. Tokens are separated by spaces and counters, and trimmed of
// punctuation.
func nameToken(s string, cs []counter) (span, bool) {
	var known, generic span
	haveKnown, haveGeneric := false, false
	ci := 0
	for i := 0; i < len(s); {
		// Skip separators: spaces and counters.
		if isSpace(s[i]) {
			i++
			continue
		}
		if ci < len(cs) && i >= cs[ci].start {
			if i < cs[ci].end {
				i = cs[ci].end
			}
			ci++
			continue
		}
		end := i
		for end < len(s) && !isSpace(s[end]) && (ci >= len(cs) || end < cs[ci].start) {
			end++
		}
		st, en := trimSpanFunc(s, i, end, isTokenPunct)
		if ext, ok := extension(s[st:en]); ok {
			if knownExt(ext) {
				known, haveKnown = span{st, en}, true
			} else if hasLetter(s[st:en]) {
				generic, haveGeneric = span{st, en}, true
			}
		}
		i = end
	}
	switch {
	case haveKnown:
		return known, true
	case haveGeneric:
		return generic, true
	}
	return span{}, false
}

// isTokenPunct is what surrounds an unquoted file name without being part
// of it: brackets, punctuation, and spaces that do not separate tokens
// (Unicode ones, \v).
func isTokenPunct(r rune) bool {
	return strings.ContainsRune(`[](){}<>,;:'"`, r) || unicode.IsSpace(r)
}

// extension returns the text after the last dot of name when it is 1 to 5
// ASCII letters or digits after a non-empty stem.
func extension(name string) (string, bool) {
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || dot >= len(name)-1 || len(name)-dot-1 > 5 {
		return "", false
	}
	ext := name[dot+1:]
	for i := 0; i < len(ext); i++ {
		if !isAlnum(ext[i]) {
			return "", false
		}
	}
	return ext, true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// lower returns ext (at most 5 bytes) lower-cased in buf, without
// allocating.
func lower(buf *[5]byte, ext string) []byte {
	n := copy(buf[:], ext)
	for i := 0; i < n; i++ {
		if c := buf[i]; c >= 'A' && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return buf[:n]
}

// volumeExts are the extensions of the files that carry a post's content
// in pieces or guard it: stripped, repeatedly, to reach the base.
var volumeExts = map[string]bool{
	"rar": true, "7z": true, "zip": true, "par2": true, "par": true,
	"nfo": true, "sfv": true, "nzb": true, "srr": true, "md5": true,
}

// mediaExts are the final extensions of a file posted whole (or inside
// the volumes): stripped once, after the volume suffixes.
var mediaExts = map[string]bool{
	"mkv": true, "mp4": true, "avi": true, "m4v": true, "mov": true, "wmv": true,
	"ts": true, "m2ts": true, "mpg": true, "mpeg": true, "webm": true, "vob": true,
	"mp3": true, "flac": true, "m4a": true, "m4b": true, "aac": true, "ogg": true,
	"opus": true, "wav": true, "ape": true, "wv": true, "alac": true,
	"epub": true, "mobi": true, "azw3": true, "azw": true, "pdf": true,
	"cbr": true, "cbz": true, "cb7": true, "djvu": true,
	"iso": true, "img": true, "nrg": true, "mdf": true,
}

// sideExts are the extensions of the small files posted beside a post's
// main file under its name (subtitles, a CD image's cue sheet and rip log,
// a playlist, cover art, notes): stripped once, as a media extension is,
// so that Movie.srt joins Movie.mkv's release. Not known extensions
// (knownExt): they do not make a word of a subject its file name.
var sideExts = map[string]bool{
	"srt": true, "sub": true, "idx": true, "ass": true, "ssa": true, "vtt": true,
	"smi": true, "sup": true, "lrc": true,
	"cue": true, "log": true, "m3u": true, "m3u8": true, "pls": true, "ffp": true,
	"st5": true, "sha1": true,
	"jpg": true, "jpeg": true, "png": true, "gif": true, "bmp": true, "webp": true,
	"txt": true, "url": true, "diz": true,
}

// subtitleExts are the side-file extensions of subtitles, which players
// and Sonarr/Radarr name after the film with language tags between
// (Movie.en.srt, Movie.eng.forced.srt): subtitleTags strips those.
var subtitleExts = map[string]bool{
	"srt": true, "sub": true, "idx": true, "ass": true, "ssa": true, "vtt": true,
	"smi": true, "sup": true,
}

// subtitleLangs are the language codes a subtitle's name carries: ISO
// 639-1 and 639-2 (both forms) of the languages subtitles are posted in.
var subtitleLangs = map[string]bool{}

func init() {
	for _, l := range strings.Fields(`en eng fr fre fra de ger deu es spa esp it ita nl dut nld
		pt por ru rus ja jpn zh chi zho ko kor sv swe da dan fi fin no nor nb nob nn nno
		pl pol hu hun cs cze ces sk slo slk tr tur ar ara he heb el gre ell hi hin th tha
		vi vie id ind ms may msa ro rum ron bg bul hr hrv sr srp scc sl slv uk ukr et est
		lv lav lt lit fa per fas is ice isl ca cat eu baq eus gl glg bs bos mk mac mkd
		sq alb sqi ta tam te tel bn ben ur urd tl tgl fil ml mal cy wel cym ga gle`) {
		subtitleLangs[l] = true
	}
}

// subtitleQualifiers are the words beside a subtitle's language: forced
// (only the foreign dialogue), SDH/HI/CC (for the deaf), default.
var subtitleQualifiers = map[string]bool{
	"forced": true, "sdh": true, "hi": true, "cc": true, "default": true,
	"full": true, "signs": true,
}

// subtitleTags strips up to three language tags and qualifiers from the
// end of a subtitle's name without its extension: Movie.en,
// Movie.eng.forced, Movie.pt-BR and Movie.zh-Hans are Movie. A language
// code counts in one case only (en, EN, eng), so that a title's last word
// ("Movie.It", "Movie.Dan") stays; it never strips stem to "".
func subtitleTags(stem string) string {
	for range 3 {
		dot := strings.LastIndexByte(stem, '.')
		if dot <= 0 || !subtitleTag(stem[dot+1:]) {
			break
		}
		stem = stem[:dot]
	}
	return stem
}

// subtitleTag reports a language tag (a code in one case, with a region,
// area or script after - or _: pt-BR, es-419, zh-Hans) or a qualifier.
func subtitleTag(t string) bool {
	if subtitleQualifiers[strings.ToLower(t)] {
		return true
	}
	lang, sub, ok := strings.Cut(t, "-")
	if !ok {
		lang, sub, ok = strings.Cut(t, "_")
	}
	if lang != strings.ToLower(lang) && lang != strings.ToUpper(lang) || !subtitleLangs[strings.ToLower(lang)] {
		return false
	}
	if !ok {
		return true
	}
	switch len(sub) {
	case 2: // a region: BR, US
		return asciiLetters(sub)
	case 3: // an area: 419
		return isDigits(sub)
	case 4: // a script, title case: Hans, Latn (NL-SUBS is a word)
		return asciiLetters(sub) && sub[0] <= 'Z' && sub[1:] == strings.ToLower(sub[1:])
	}
	return false
}

func asciiLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// numberedVolume reports an extension numbering a volume: rNN and rNNN
// (rar), zNN (split zip), NNN (7z.001, .001 splits).
func numberedVolume(ext []byte) bool {
	switch {
	case len(ext) == 3 && isDigits(string(ext)):
		return true
	case (ext[0] == 'r' && (len(ext) == 3 || len(ext) == 4)) || (ext[0] == 'z' && len(ext) == 3):
		return isDigits(string(ext[1:]))
	}
	return false
}

// oldVolume reports the volumes of the old naming that are stripped only
// as a name's last extension, in a post of files announced files (0: not
// announced) that can hold one:
//   - sNN, tNN and uNN (and sNNN, ...): the rar volumes after .r99 in the
//     old naming scene releases keep (.rar, .r00-.r99, .s00-.s99,
//     .t00-.t99, .u00-...). A .s00 is at least the 102nd file, a .t00 the
//     202nd and a .u00 the 302nd. The letters after u (v01, x264) are left
//     alone: no post reaches them, and they are versions and codecs;
//   - pNN: a PAR1 set's recovery volumes beside name.par (.p01-.p99).
//
// They are not numberedVolumes because "S01" is also a season (and "P01"
// a title's part): as known extensions they would make a title word
// "Show.Name.S01" a subject's file name, and stripped anywhere they would
// cut the season off "Show.Name.S01.part01.rar" (see stripSuffixes).
func oldVolume(ext []byte, files int) bool {
	if len(ext) < 3 || !isDigits(string(ext[1:])) {
		return false
	}
	switch ext[0] {
	case 's', 't', 'u':
		return len(ext) <= 4 && (files == 0 || files > 100*int(ext[0]-'r')+1)
	case 'p':
		return len(ext) == 3
	}
	return false
}

func knownExt(ext string) bool {
	var buf [5]byte
	l := lower(&buf, ext)
	return volumeExts[string(l)] || mediaExts[string(l)] || numberedVolume(l)
}

// stripSuffixes strips the volume and recovery suffixes of name
// (.part01.rar, .r00, .7z.001, .vol03+04.par2, .par2, .nfo, ...) as long
// as one is left, then one media or side-file extension (.mkv, .srt,
// .cue, ...) and, after a subtitle's, its language tags (subtitleTags);
// it never strips name to "". An old volume .sNN, .tNN, .uNN or .pNN is
// stripped only as name's last extension and only in a post of files
// announced files that can hold one (oldVolume): elsewhere "S01" is a
// season, part of the name ("Show.Name.S01.par2", a post of 20 files
// titled "Show.Name.S01").
func stripSuffixes(name string, files int) string {
	var buf [5]byte
	for last := true; ; last = false {
		ext, ok := extension(name)
		if !ok {
			break
		}
		l := lower(&buf, ext)
		if !volumeExts[string(l)] && !numberedVolume(l) && !(last && oldVolume(l, files)) {
			break
		}
		stem := name[:len(name)-len(ext)-1]
		switch string(l) {
		case "rar":
			stem = trimCounted(stem, "part", "")
		case "par2":
			stem = trimCounted(stem, "vol", "+-")
		}
		if stem == "" {
			return name
		}
		name = stem
	}
	if ext, ok := extension(name); ok {
		if l := lower(&buf, ext); mediaExts[string(l)] || sideExts[string(l)] {
			stem := name[:len(name)-len(ext)-1]
			if subtitleExts[string(l)] {
				stem = subtitleTags(stem)
			}
			return stem
		}
	}
	return name
}

// trimCounted strips a final ".WORDdigits" (".part01") from stem, or
// ".WORDdigits<sep>digits" (".vol03+04") when seps is not "", any case.
func trimCounted(stem, word, seps string) string {
	dot := strings.LastIndexByte(stem, '.')
	if dot <= 0 {
		return stem
	}
	t := stem[dot+1:]
	if len(t) <= len(word) || !strings.EqualFold(t[:len(word)], word) {
		return stem
	}
	t = t[len(word):]
	if seps != "" {
		i := strings.IndexAny(t, seps)
		if i < 0 || !isDigits(t[i+1:]) {
			return stem
		}
		t = t[:i]
	}
	if !isDigits(t) {
		return stem
	}
	return stem[:dot]
}

// restText is the subject outside masks (the counters, the name, a size
// after the part counter) without the word "yEnc" and the sizes next to
// it or at the end, trimmed of separators and enclosing brackets: the
// text the files of one post share. It is "" when that holds no letter or
// digit.
func restText(s string, masks []span) string {
	// Sort the (at most four) masks by start.
	for i := 1; i < len(masks); i++ {
		for j := i; j > 0 && masks[j].start < masks[j-1].start; j-- {
			masks[j], masks[j-1] = masks[j-1], masks[j]
		}
	}
	var fbuf [32]span
	fields := fbuf[:0]
	pos := 0
	for _, m := range append(masks, span{len(s), len(s)}) {
		if m.start > pos {
			fields = appendFields(fields, s, pos, m.start)
		}
		if m.end > pos {
			pos = m.end
		}
	}
	// Drop "yEnc" and the size after it.
	kept := fields[:0]
	for i := 0; i < len(fields); i++ {
		f := s[fields[i].start:fields[i].end]
		if strings.EqualFold(f, "yenc") {
			i += sizeFields(s, fields[i+1:], false)
			continue
		}
		kept = append(kept, fields[i])
	}
	// Drop a size at the end (before separators).
	end := len(kept)
	for end > 0 && isSeparators(s[kept[end-1].start:kept[end-1].end]) {
		end--
	}
	for _, n := range []int{2, 1} {
		if end >= n && sizeFields(s, kept[end-n:end], true) == n {
			kept = append(kept[:end-n], kept[end:]...)
			break
		}
	}
	if len(kept) == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(kept[len(kept)-1].end - kept[0].start)
	for i, f := range kept {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s[f.start:f.end])
	}
	rest := trimRest(b.String())
	for _, r := range rest {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return rest
		}
	}
	return ""
}

// appendFields appends the space-separated fields of s[from:to].
func appendFields(fields []span, s string, from, to int) []span {
	for i := from; i < to; {
		if isSpace(s[i]) {
			i++
			continue
		}
		j := i
		for j < to && !isSpace(s[j]) {
			j++
		}
		fields = append(fields, span{i, j})
		i = j
	}
	return fields
}

// sizeFields is how many of the first fields form a size: "35651584",
// "1.2GB", "1.2 GB", "512 bytes". A bare number counts only when big is
// false or it has 5 digits or more, so that a year or an episode number
// at the end of a title stays.
func sizeFields(s string, fields []span, big bool) int {
	if len(fields) == 0 {
		return 0
	}
	f := s[fields[0].start:fields[0].end]
	num := numberPrefix(f)
	if num == 0 {
		return 0
	}
	if num < len(f) {
		if isUnit(f[num:]) {
			return 1
		}
		return 0
	}
	if len(fields) > 1 && isUnit(s[fields[1].start:fields[1].end]) {
		return 2
	}
	if big && num < 5 {
		return 0
	}
	return 1
}

// isSizeText reports text that is a size and nothing else.
func isSizeText(t string) bool {
	var fbuf [4]span
	fields := appendFields(fbuf[:0], t, 0, len(t))
	return len(fields) <= 2 && sizeFields(t, fields, false) == len(fields)
}

// numberPrefix is the length of the decimal number ("123", "1.25") that
// starts f.
func numberPrefix(f string) int {
	i := 0
	for i < len(f) && f[i] >= '0' && f[i] <= '9' {
		i++
	}
	if i > 0 && i+1 < len(f) && f[i] == '.' && f[i+1] >= '0' && f[i+1] <= '9' {
		i++
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			i++
		}
	}
	return i
}

func isUnit(u string) bool {
	switch strings.ToLower(u) {
	case "b", "bytes", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib", "t", "tb", "tib":
		return true
	}
	return false
}

// restSeps are the separators trimmed from the ends of the shared text.
const restSeps = " \t-_:;,|~*\"'"

func isSeparators(f string) bool {
	for i := 0; i < len(f); i++ {
		if strings.IndexByte(restSeps, f[i]) < 0 {
			return false
		}
	}
	return true
}

// trimRest trims separators, then a pair of brackets enclosing all of it
// ("[My Post]"), repeatedly.
func trimRest(t string) string {
	for {
		t = strings.Trim(t, restSeps)
		if len(t) < 2 {
			return t
		}
		open, closer := t[0], byte(0)
		switch open {
		case '[':
			closer = ']'
		case '(':
			closer = ')'
		case '{':
			closer = '}'
		case '<':
			closer = '>'
		}
		inner := t[1 : len(t)-1]
		if closer == 0 || t[len(t)-1] != closer || strings.IndexByte(inner, open) >= 0 || strings.IndexByte(inner, closer) >= 0 {
			return t
		}
		t = inner
	}
}

// BaseName is name without its volume and recovery suffixes and one media
// or side-file extension (Some.Show.part01.rar, Some.Show.mkv and
// Some.Show.srt are Some.Show), the name a release of the file is known
// by. It knows no file count, so a last .sNN, .tNN, .uNN or .pNN counts
// as a volume.
func BaseName(name string) string { return stripSuffixes(name, 0) }

// KnownExtension reports whether name ends in an extension of the files
// posted to binary groups (archives and their volumes, recovery files,
// media).
func KnownExtension(name string) bool {
	ext, ok := extension(name)
	return ok && knownExt(ext)
}

// Obfuscated reports whether a file or release name says nothing of what
// it holds: one word (no separator) without a known extension, or one
// word of 12 or more letters and digits mixed (a random string, as
// obfuscating posters name files) before a known one. Names of several
// words are never obfuscated.
func Obfuscated(name string) bool {
	base := name
	known := KnownExtension(name)
	if known {
		base = BaseName(name)
	} else if ext, ok := extension(name); ok {
		base = name[:len(name)-len(ext)-1]
	}
	if strings.ContainsAny(base, " ._-()[]") {
		return false
	}
	if !known || base == "" {
		return true
	}
	letters, digits := false, false
	for i := 0; i < len(base); i++ {
		switch c := base[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters = true
		}
	}
	return len(base) >= 12 && letters && digits
}
