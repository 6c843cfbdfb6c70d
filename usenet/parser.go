package usenet

import (
	"bytes"
	"slices"
	"strings"
)

// ArticleParser is ParseArticle for the consecutive overview lines of one
// range. Its results are those of ParseArticle, line for line; it is
// faster because consecutive lines are almost always parts of one file:
// the same poster, the same subject but for the part counter, the same
// date but for the time, the same groups. It remembers the previous line's
// fields and what they parsed to, and when a field matches, it reads only
// what differs (the counter's digits, the time) instead of parsing again.
//
// The Groups of the articles it returns are shared between articles: they
// must not be modified. The zero value is ready to use; an ArticleParser
// is not safe for concurrent use.
type ArticleParser struct {
	// The previous subject: as posted, stripped (stripRe), its parse, and
	// the span of its part counter in subj (start -1 when it had no valid
	// one, so that only an identical subject reuses sub).
	raw, subj string
	sub       Subject
	part      span
	haveSubj  bool

	// The previous poster, as posted and as read.
	fromRaw, from string
	haveFrom      bool

	// The previous date, its unix time less its time of day, and where its
	// "hh:mm:ss" is (-1: only an identical date reuses unix).
	date     string
	dateDay  int64
	unix     int64
	dateTime int
	haveDate bool

	// The previous Xref's group names (the key, space-separated), the group
	// read, and the groups they made.
	xrefKey, keyBuf []byte
	// xrefPrefix is the previous Xref up to its last colon when only an
	// article number follows it: an Xref of that prefix and another
	// number names the same groups, and needs no splitting into fields.
	xrefPrefix string
	xrefGroup  string
	groups     []string
	haveGroups bool

	// arena holds the strings of the articles (subjects, message-ids),
	// many lines to one allocation.
	arena strings.Builder
}

// arenaSize is the size of one allocation of the arena: a few hundred
// lines' subjects and message-ids.
const arenaSize = 32 << 10

// text returns a and b concatenated in a string of the arena. The arena
// only appends: bytes already written (and the strings over them) never
// change, and when it is full a new one starts, the old one living on as
// long as its strings do, which is the range's batch.
func (p *ArticleParser) text(a, b []byte) string {
	n := len(a) + len(b)
	if n > arenaSize/4 {
		return string(a) + string(b)
	}
	if p.arena.Cap()-p.arena.Len() < n {
		p.arena = strings.Builder{}
		p.arena.Grow(arenaSize)
	}
	start := p.arena.Len()
	p.arena.Write(a)
	p.arena.Write(b)
	return p.arena.String()[start:]
}

// Parse reads one OVER/XOVER line of group, as ParseArticle does.
func (p *ArticleParser) Parse(line []byte, group string) (Article, error) {
	if a, ok := p.parse(line, group); ok {
		return a, nil
	}
	// Anything out of the ordinary (encoded words, spaces around numbers,
	// a malformed line) takes the general path, errors included.
	return ParseArticle(line, group)
}

// parse is the common path; it reports false, without a result, for a
// line it leaves to ParseArticle. It accepts only lines that
// nntp.ParseOverview accepts and reads them the same way.
func (p *ArticleParser) parse(line []byte, group string) (Article, bool) {
	tab := bytes.IndexByte(line, '\t')
	num, ok := digits(line[:max(tab, 0)])
	if tab < 0 || !ok || num == 0 {
		return Article{}, false
	}
	var f [7][]byte
	rest := line[tab+1:]
	for i := range 6 {
		j := bytes.IndexByte(rest, '\t')
		if j < 0 {
			return Article{}, false
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	var extra []byte
	if j := bytes.IndexByte(rest, '\t'); j >= 0 {
		f[6], extra = rest[:j], rest[j+1:]
	} else {
		f[6] = rest
	}
	size, ok1 := optDigits(f[5])
	_, ok2 := optDigits(f[6])
	subject, id := f[0], f[3]
	// The message-id: "<...>" whose inside starts and ends with a byte
	// TrimSpace keeps (ASCII, not a space), so trimming changes nothing;
	// one too long is ParseArticle's error.
	if !ok1 || !ok2 || len(id) < 3 || len(id) > maxMessageIDBytes || id[0] != '<' || id[len(id)-1] != '>' ||
		!plainEdge(id[1]) || !plainEdge(id[len(id)-2]) || bytes.Contains(subject, []byte("=?")) {
		return Article{}, false
	}
	id = id[1 : len(id)-1]

	a := Article{Number: num, Bytes: articleBytes(size)}
	if p.haveSubj && string(subject) == p.raw {
		a.MessageID = p.text(id, nil)
		a.RawSubject, a.Subject = p.raw, p.sub
	} else {
		t := p.text(subject, id)
		a.RawSubject, a.MessageID = t[:len(subject)], t[len(subject):]
		a.Subject = p.parseSubject(a.RawSubject)
	}
	a.From = p.parseFrom(f[1])
	a.Date = p.parseDate(f[2])
	a.Groups = p.xrefGroups(xrefOf(extra), group)
	return a, true
}

// parseSubject parses raw (decoded: it has no encoded word), reusing the
// previous subject's parse when raw differs from it only in the digits of
// a valid part counter.
func (p *ArticleParser) parseSubject(raw string) Subject {
	s := stripRe(raw)
	if p.haveSubj && p.part.start >= 0 {
		prefix, suffix := p.subj[:p.part.start], p.subj[p.part.end:]
		if len(s) > len(prefix)+len(suffix) && strings.HasPrefix(s, prefix) && strings.HasSuffix(s, suffix) {
			if a, b, ok := partCounter(s[len(prefix) : len(s)-len(suffix)]); ok {
				// Only the numbers change: storing them alone spares the
				// write barriers of the strings of a whole Subject.
				p.sub.Part, p.sub.Parts = a, b
				p.raw, p.subj = raw, s
				p.part.end = len(s) - len(suffix)
				return p.sub
			}
		}
	}
	sub, part := parseStripped(s)
	p.raw, p.subj, p.sub, p.part, p.haveSubj = raw, s, sub, part, true
	return sub
}

// partCounter reads a whole "(p/t)" with 1 <= p <= t, 1 to 9 digits each:
// the counter parseStripped reads as valid, at the same place.
func partCounter(c string) (int, int, bool) {
	if len(c) < 5 || c[0] != '(' || c[len(c)-1] != ')' {
		return 0, 0, false
	}
	var n [2]int
	k, digits := 0, 0
	for i := 1; i < len(c)-1; i++ {
		switch ch := c[i]; {
		case ch >= '0' && ch <= '9':
			if digits++; digits > 9 {
				return 0, 0, false
			}
			n[k] = n[k]*10 + int(ch-'0')
		case ch == '/' && k == 0 && digits > 0:
			k, digits = 1, 0
		default:
			return 0, 0, false
		}
	}
	if k != 1 || digits == 0 || n[0] < 1 || n[0] > n[1] {
		return 0, 0, false
	}
	return n[0], n[1], true
}

func (p *ArticleParser) parseFrom(raw []byte) string {
	if !p.haveFrom || string(raw) != p.fromRaw {
		p.fromRaw = string(raw)
		p.from = strings.TrimSpace(decodeMIME(p.fromRaw))
		p.haveFrom = true
	}
	return p.from
}

// parseDate is ParseDate(string(d)), computed from the time alone when d
// is the previous date but for its "hh:mm:ss".
func (p *ArticleParser) parseDate(d []byte) int64 {
	if p.haveDate {
		if t := p.dateTime; t >= 0 {
			if len(d) == len(p.date) && string(d[:t]) == p.date[:t] && string(d[t+8:]) == p.date[t+8:] {
				if secs, ok := timeOfDay(d[t : t+8]); ok {
					return p.dateDay + secs
				}
			}
		} else if string(d) == p.date {
			return p.unix
		}
	}
	p.date = string(d)
	p.unix, p.dateTime = parseDate(p.date)
	p.haveDate = true
	if p.dateTime >= 0 {
		secs, _ := timeOfDay(p.date[p.dateTime : p.dateTime+8])
		p.dateDay = p.unix - secs
	}
	return p.unix
}

// timeOfDay reads "hh:mm:ss" (a second below 60) as seconds.
func timeOfDay[T string | []byte](t T) (int64, bool) {
	d := func(i int) (int64, bool) {
		a, b := t[i], t[i+1]
		return int64(a-'0')*10 + int64(b-'0'), a >= '0' && a <= '9' && b >= '0' && b <= '9'
	}
	h, ok1 := d(0)
	m, ok2 := d(3)
	s, ok3 := d(6)
	if !ok1 || !ok2 || !ok3 || t[2] != ':' || t[5] != ':' || h > 23 || m > 59 || s > 59 {
		return 0, false
	}
	return h*3600 + m*60 + s, true
}

// xrefOf is Overview.Xref of the fields after the eighth.
func xrefOf(extra []byte) []byte {
	for len(extra) > 0 {
		f := extra
		if j := bytes.IndexByte(extra, '\t'); j >= 0 {
			f, extra = extra[:j], extra[j+1:]
		} else {
			extra = nil
		}
		if len(f) >= 5 && bytes.EqualFold(f[:5], []byte("xref:")) {
			return f[5:]
		}
	}
	return nil
}

// xrefGroups is xrefGroups(string(xref), group), shared with the previous
// line when its Xref names the same groups in the same order.
func (p *ArticleParser) xrefGroups(xref []byte, group string) []string {
	if p.haveGroups && group == p.xrefGroup && p.xrefPrefix != "" &&
		len(xref) > len(p.xrefPrefix) && string(xref[:len(p.xrefPrefix)]) == p.xrefPrefix && articleNumber(xref[len(p.xrefPrefix):]) {
		return p.groups
	}
	key, ok := xrefKey(p.keyBuf[:0], xref)
	p.keyBuf = key
	if !ok { // not ASCII: FieldsSeq splits at Unicode spaces too
		return xrefGroups(string(xref), group)
	}
	if p.haveGroups && group == p.xrefGroup && bytes.Equal(key, p.xrefKey) {
		return p.groups
	}
	// Clipped, so that an append to one article's groups cannot write
	// into the others'.
	p.groups = slices.Clip(xrefGroups(string(xref), group))
	p.xrefKey = append(p.xrefKey[:0], key...)
	p.xrefGroup, p.haveGroups = group, true
	p.xrefPrefix = ""
	if c := bytes.LastIndexByte(xref, ':'); c >= 0 && articleNumber(xref[c+1:]) {
		p.xrefPrefix = string(xref[:c+1])
	}
	return p.groups
}

// articleNumber reports what may end the last field of an Xref without
// changing the group names: ASCII without spaces or colons. Empty is not,
// so that the prefix itself, ending in a colon, always has a field after
// the host.
func articleNumber(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || c == ':' || asciiSpace(c) {
			return false
		}
	}
	return len(b) > 0
}

// xrefKey appends to key the group names of an ASCII Xref value (the
// fields after the host, each up to its last colon, those with a name),
// separated by spaces; false when the value is not ASCII.
func xrefKey(key, xref []byte) ([]byte, bool) {
	first := true
	for i := 0; i < len(xref); {
		if xref[i] >= 0x80 {
			return key, false
		}
		if asciiSpace(xref[i]) {
			i++
			continue
		}
		j := i
		for j < len(xref) && !asciiSpace(xref[j]) {
			if xref[j] >= 0x80 {
				return key, false
			}
			j++
		}
		if first {
			first = false
		} else if c := bytes.LastIndexByte(xref[i:j], ':'); c > 0 {
			key = append(key, xref[i:i+c]...)
			key = append(key, ' ')
		}
		i = j
	}
	return key, true
}

// asciiSpace is unicode.IsSpace for ASCII, as strings.Fields splits.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// plainEdge reports a byte that strings.TrimSpace never trims at either
// end of a string: ASCII and not a space.
func plainEdge(c byte) bool { return c < 0x80 && !asciiSpace(c) }

// digits reads 1 to 18 decimal digits (no overflow possible).
func digits[T string | []byte](b T) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for i := range len(b) {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// optDigits is digits, or 0 for an empty field (as nntp.ParseOverview
// reads the bytes and lines fields); false for what it leaves to
// ParseOverview (spaces, signs, long numbers).
func optDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	return digits(b)
}
