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
	for _, m := range episodeRe.FindAllStringSubmatch(r.Name, -1) {
		season, ep := m[1], m[2]
		if season == "" {
			season, ep = m[3], m[4]
		}
		s, _ := strconv.Atoi(season)
		t = append(t, seasonTag(s))
		if ep != "" {
			e, _ := strconv.Atoi(ep)
			t = append(t, episodeTag(e), seasonEpisodeTag(s, e))
		}
	}
	return strings.Join(t, " ")
}

// episodeRe finds S01, S01E02, S01.E02 and 1x02 as whole tokens of a name.
var episodeRe = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])(?:s(\d{1,4})(?:[ ._-]?e(\d{1,4}))?|(\d{1,2})x(\d{1,3}))(?:[^a-z0-9]|$|e\d)`)

func catTag(c int) string              { return "c" + strconv.Itoa(c) }
func passwordTag(p int) string         { return "pw" + strconv.Itoa(p) }
func groupTag(g string) string         { return "g" + hex.EncodeToString([]byte(strings.ToLower(g))) }
func seasonTag(s int) string           { return "s" + strconv.Itoa(s) }
func episodeTag(e int) string          { return "e" + strconv.Itoa(e) }
func seasonEpisodeTag(s, e int) string { return "s" + strconv.Itoa(s) + "e" + strconv.Itoa(e) }

// Row keys: the date in the high bits, so that rowid order is date order,
// and in the low keyBits a slot that orders releases of the same second by
// ID (ascending when read newest first), from the ID's first bytes. Two IDs
// that share those bytes and their second take neighbouring slots (see
// Apply's probing).
const (
	keyBits = 22
	keySlot = 1<<keyBits - 1
	maxDate = 1<<(62-keyBits) - 1
)

func dateBase(date int64) int64 {
	return min(max(date, 0), maxDate) << keyBits
}

func dateKey(date int64, id string) int64 {
	var p uint32
	for i := range 3 {
		p <<= 8
		if i < len(id) {
			p |= uint32(id[i])
		}
	}
	return dateBase(date) | int64(keySlot-(p>>(24-keyBits)))
}
