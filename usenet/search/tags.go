package search

import (
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/usenet"
)

// The filter tokens of the fts tags column. Each is one unicode61 token
// (letters and digits only), so a filter is an exact token match:
//
//	c5040, c5000    the category and its parent
//	g<hex>          a group the release was posted to, hex of its lower-case name
//	s1, e2, s1e2    season and episode numbers found in the name
//	pw1, pw2        passworded, potentially passworded (post-processing)
func tags(r usenet.Release) string {
	var t []string
	if r.Password > 0 {
		t = append(t, passwordTag(r.Password))
	}
	t = append(t, catTag(r.Category))
	if p := usenet.CategoryParent(r.Category); p != r.Category {
		t = append(t, catTag(p))
	}
	for _, g := range r.Groups {
		t = append(t, groupTag(g))
	}
	for _, m := range episodeMarkers(r.Name) {
		t = append(t, seasonTag(m.season))
		for _, e := range m.episodes {
			t = append(t, episodeTag(e), seasonEpisodeTag(m.season, e))
		}
	}
	return strings.Join(t, " ")
}

// episodeRe finds S01, S01E02, S01.E02 and 1x02 as whole tokens of a name.
// Its last group is what must follow a marker (a separator, the end, or a
// further episode as in S01E02E03 and 1x02x03): it is only checked, not
// taken, see episodeMarkers.
var episodeRe = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])(?:s(\d{1,4})(?:[ ._-]?e(\d{1,4}))?|(\d{1,2})x(\d{1,3}))([^a-z0-9]|$|[ex]\d)`)

// episodePartRe is one further episode of a multi-episode marker, read
// right after the episode of an SxxEyy: E03 joined to it (S01E02E03), or
// after a dash -E03 or -03 (S01E02-E03, S01E02-03), or the whole marker
// again, of the same season (S01E01-S01E03, as scene names write it and
// Sonarr reads it: episodes 1 to 3). After a dash the number has two
// digits at least, as episode numbers in names are padded: a short token
// there is the group's (Show.S01E01-E2).
var episodePartRe = regexp.MustCompile(`(?i)^(?:e(?P<ep>\d{1,4})|-s(?P<season>\d{1,4})[ ._-]?e(?P<ep>\d{1,4})|-e?(?P<ep>\d{2,4}))`)

// crossPartRe is episodePartRe for an NxMM marker, in Sonarr's forms:
// x05 joined to it (2x04x05), after a dash the marker again -2x05 (of
// the same season), -x05, or a bare -05 of two digits at least (2x04-05).
var crossPartRe = regexp.MustCompile(`(?i)^(?:x(?P<ep>\d{1,3})|-(?P<season>\d{1,2})x(?P<ep>\d{1,3})|-x(?P<ep>\d{1,3})|-(?P<ep>\d{2,3}))`)

// maxMarkerEpisodes is the most episodes one marker may name (S01E01-E24
// names 24). A wider range is not an episode list but a number that
// happens to follow (Show.S01E01-2010): only its first episode is tagged.
const maxMarkerEpisodes = 50

// maxMarkers is the most markers of one name that are tagged: a real name
// has one or two (Show.S01E01, Show.S01.S02), and without a bound a name
// of tens of KiB written of markers (S1E01-50, S2E01-50, ...) made
// hundreds of thousands of tags, megabytes of FTS index for one release.
const maxMarkers = 8

// marker is an episode marker of a name: a season and its episodes, none
// for a season pack (S01).
type marker struct {
	season   int
	episodes []int
}

// episodeMarkers returns the markers episodeRe finds in name. Each search
// starts again at the last marker's trailing group, so that one separator
// both ends a marker and starts the next (Show.S01.S02, Show.S01E05.S01E06),
// which FindAll, going on after the whole match, missed. A restart begins
// at a separator or an "e", where episodeRe's ^ cannot start a marker.
//
// An SxxEyy may name further episodes (episodePartRe): S03E01E02,
// S01E04-E05, S01E04-05, S01E04-S01E05; so may an NxMM (crossPartRe): 1x01x02, 1x01-02,
// 1x01-x02, 1x01-1x02. Sonarr reads such a marker as the range from its
// first episode to its last (S01E01E03 and 1x01-1x03 are 1, 2 and 3) and
// searches each episode on its own, so each one of the range is tagged.
// The range ends before a part that does not ascend, is of another season
// or would make it longer than maxMarkerEpisodes (see episodeRange). Only
// the first maxMarkers markers are returned.
func episodeMarkers(name string) []marker {
	var out []marker
	for pos := 0; pos < len(name) && len(out) < maxMarkers; {
		m := episodeRe.FindStringSubmatchIndex(name[pos:])
		if m == nil {
			break
		}
		sub := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return name[pos+m[2*i] : pos+m[2*i+1]]
		}
		season, ep := sub(1), sub(2)
		if season == "" {
			season, ep = sub(3), sub(4)
		}
		next := pos + m[10] // the trailing group, past the marker's own characters
		mk := marker{season: atoi(season)}
		if ep != "" {
			first := atoi(ep)
			mk.episodes = []int{first}
			parts := episodePartRe
			if sub(1) == "" {
				parts = crossPartRe
			}
			if last, n := episodeRange(first, mk.season, parts, name[next:]); n > 0 {
				for e := first + 1; e <= last; e++ {
					mk.episodes = append(mk.episodes, e)
				}
				next += n // at a separator or the end, like a trailing group
			}
		}
		out = append(out, mk)
		pos = next
	}
	return out
}

// episodeRange reads the further episodes of a marker of season whose
// episode is first from s, what follows it, with parts (episodePartRe or
// crossPartRe). It returns the last episode and the bytes read, 0 when s
// names none. A part that does not ascend, names another season or would
// make the range longer than maxMarkerEpisodes, ends it, and only parts
// that end a token count: S01E01-02x is episode 1 alone.
func episodeRange(first, season int, parts *regexp.Regexp, s string) (last, n int) {
	prev := first
	for at := 0; ; {
		m := parts.FindStringSubmatchIndex(s[at:])
		if m == nil {
			return last, n
		}
		e, ok := -1, true
		for i, name := range parts.SubexpNames() {
			if i == 0 || m[2*i] < 0 {
				continue
			}
			v := atoi(s[at+m[2*i] : at+m[2*i+1]])
			switch name {
			case "ep":
				e = v
			case "season":
				ok = v == season
			}
		}
		if !ok || e <= prev || e-first >= maxMarkerEpisodes {
			return last, n // the range ends before it: Show.S01E01-E02-2010
		}
		prev, at = e, at+m[1]
		if at == len(s) || !isAlnum(s[at]) {
			last, n = e, at
		}
	}
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// atoi is strconv.Atoi of what episodeRe took: at most four digits.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func catTag(c int) string              { return "c" + strconv.Itoa(c) }
func passwordTag(p int) string         { return "pw" + strconv.Itoa(p) }
func groupTag(g string) string         { return "g" + hex.EncodeToString([]byte(strings.ToLower(g))) }
func seasonTag(s int) string           { return "s" + strconv.Itoa(s) }
func episodeTag(e int) string          { return "e" + strconv.Itoa(e) }
func seasonEpisodeTag(s, e int) string { return "s" + strconv.Itoa(s) + "e" + strconv.Itoa(e) }

// Row keys: the date in the high bits, so that rowid order is date order,
// and in the low keyBits a slot that orders releases of the same second by
// ID (ascending when read newest first). Release IDs are hex: the slot's
// high idBits are the ID's first idDigits hex digits, exactly, and its low
// rankBits rank, in ID order, the releases of one second whose IDs share
// those digits (a group; see Apply's placing).
const (
	idDigits = 5
	idBits   = 4 * idDigits
	rankBits = 4
	keyBits  = idBits + rankBits
	keySlot  = 1<<keyBits - 1
	maxDate  = 1<<(62-keyBits) - 1
)

func dateBase(date int64) int64 {
	return min(max(date, 0), maxDate) << keyBits
}

// groupKey is the highest key of the group of date and id: that of its
// lowest ID. The group's keys are the 1<<rankBits from it down.
func groupKey(date int64, id string) int64 {
	return dateBase(date) | int64(keySlot-idPrefix(id)<<rankBits)
}

// idPrefix is the value of id's first idDigits hex digits. It never
// decreases as id increases (byte order), whatever id holds, so that keys
// keep the ID order: a shorter id is padded with 0, and the first
// character that is not a lower-case hex digit counts as 0 (below "0"), a
// (below "a") or f (above "f") and the rest as 0, 0 or f. IDs that tie are
// ranked within their group.
func idPrefix(id string) uint32 {
	var p, fill uint32
	cut := false
	for i := range idDigits {
		p <<= 4
		switch {
		case cut:
			p |= fill
		case i >= len(id):
			cut = true
		default:
			switch c := id[i]; {
			case '0' <= c && c <= '9':
				p |= uint32(c - '0')
			case 'a' <= c && c <= 'f':
				p |= uint32(c-'a') + 10
			case c < '0':
				cut = true
			case c < 'a':
				p |= 10
				cut = true
			default:
				p |= 0xf
				fill, cut = 0xf, true
			}
		}
	}
	return p
}
