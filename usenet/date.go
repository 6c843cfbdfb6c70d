package usenet

import (
	"strings"
	"time"
)

// ParseDate reads an RFC 5322 date as news servers send it and returns unix
// seconds, or 0 when it cannot. It takes what the forms in use vary in: the
// day of the week present or not, one- or two-digit days, two- or
// four-digit years (RFC 5322 4.3: 00-49 are 20xx, 50-99 19xx), seconds
// omitted, numeric zones, the obsolete zone names (GMT, UT, UTC, Z, EST,
// EDT, CST, CDT, MST, MDT, PST, PDT; others count as +0000, as RFC 5322
// says of military zones), a missing zone (UTC) and a trailing comment
// such as "(UTC)". It is hand-written rather than a loop over time.Parse
// layouts because it runs once per article.
func ParseDate(s string) int64 {
	unix, _ := parseDate(s)
	return unix
}

// parseDate is ParseDate; it also returns the index in s of the time when
// it is written "hh:mm:ss" with a second below 60, else -1. Nothing else
// of s depends on those eight bytes: another date equal to s outside them
// is the same day, and ArticleParser computes it from the time alone.
func parseDate(s string) (int64, int) {
	p := dateParser{s: s}
	p.space()
	// An optional day of the week: letters and a comma.
	if i := strings.IndexByte(p.s, ','); i > 0 && i <= 9 && isLetters(p.s[:i]) {
		p.s = p.s[i+1:]
		p.space()
	}
	day, ok := p.num(1, 2)
	if !ok || !p.space() {
		return 0, -1
	}
	month := p.month()
	if month == 0 || !p.space() {
		return 0, -1
	}
	year, ok := p.num(2, 4)
	if !ok || !p.space() {
		return 0, -1
	}
	switch len(p.last) {
	case 2:
		if year < 50 {
			year += 2000
		} else {
			year += 1900
		}
	case 3:
		year += 1900
	}
	timeAt := len(s) - len(p.s)
	hour, ok1 := p.num(1, 2)
	twoDigitHour := len(p.last) == 2
	ok2 := p.byte(':')
	minute, ok3 := p.num(2, 2)
	if !ok1 || !ok2 || !ok3 {
		return 0, -1
	}
	sec, hasSec := 0, false
	if p.byte(':') {
		hasSec = true
		if sec, ok = p.num(2, 2); !ok {
			return 0, -1
		}
	}
	if hour > 23 || minute > 59 || sec > 60 || day < 1 || day > 31 {
		return 0, -1
	}
	leap := sec == 60
	if leap { // a leap second: the second before
		sec = 59
	}
	p.space()
	offset, ok := p.zone()
	if !ok {
		return 0, -1
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if t.Day() != day { // 31 Feb normalised into March
		return 0, -1
	}
	if !twoDigitHour || !hasSec || leap {
		timeAt = -1
	}
	return t.Unix() - int64(offset), timeAt
}

type dateParser struct {
	s    string
	last string // the digits num read last
}

// space skips white space and reports whether there was any.
func (p *dateParser) space() bool {
	t := strings.TrimLeft(p.s, " \t")
	had := len(t) < len(p.s)
	p.s = t
	return had
}

func (p *dateParser) byte(c byte) bool {
	if p.s != "" && p.s[0] == c {
		p.s = p.s[1:]
		return true
	}
	return false
}

// num reads lo to hi digits, not followed by another digit.
func (p *dateParser) num(lo, hi int) (int, bool) {
	n, i := 0, 0
	for ; i < len(p.s) && i < hi && p.s[i] >= '0' && p.s[i] <= '9'; i++ {
		n = n*10 + int(p.s[i]-'0')
	}
	if i < lo || (i < len(p.s) && p.s[i] >= '0' && p.s[i] <= '9') {
		return 0, false
	}
	p.last, p.s = p.s[:i], p.s[i:]
	return n, true
}

var months = [12]string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}

// month reads a three-letter English month name, any case; 0 when none.
func (p *dateParser) month() int {
	if len(p.s) < 3 {
		return 0
	}
	for i, m := range months {
		if strings.EqualFold(p.s[:3], m) {
			p.s = p.s[3:]
			return i + 1
		}
	}
	return 0
}

// zoneNames are the obsolete zone names of RFC 5322 4.3, in seconds east.
var zoneNames = map[string]int{
	"UT": 0, "UTC": 0, "GMT": 0, "Z": 0,
	"EST": -5 * 3600, "EDT": -4 * 3600, "CST": -6 * 3600, "CDT": -5 * 3600,
	"MST": -7 * 3600, "MDT": -6 * 3600, "PST": -8 * 3600, "PDT": -7 * 3600,
}

// zone reads the zone and what may follow it (a comment), and returns its
// offset in seconds east of UTC.
func (p *dateParser) zone() (int, bool) {
	offset := 0
	switch {
	case p.s == "" || p.s[0] == '(':
		// No zone: UTC.
	case p.s[0] == '+' || p.s[0] == '-':
		sign := 1
		if p.s[0] == '-' {
			sign = -1
		}
		p.s = p.s[1:]
		hhmm, ok := p.num(4, 4)
		if !ok || hhmm%100 > 59 {
			return 0, false
		}
		offset = sign * (hhmm/100*3600 + hhmm%100*60)
	default:
		i := 0
		for i < len(p.s) && i < 5 && (p.s[i] >= 'A' && p.s[i] <= 'Z' || p.s[i] >= 'a' && p.s[i] <= 'z') {
			i++
		}
		if i == 0 {
			return 0, false
		}
		offset = zoneNames[strings.ToUpper(p.s[:i])] // unknown names: +0000
		p.s = p.s[i:]
	}
	p.space()
	return offset, p.s == "" || p.s[0] == '('
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
