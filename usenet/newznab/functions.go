package newznab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/search"
)

func (h *handler) searchFn(req *request) (response, *apiError) {
	return h.runSearch(req, nil, false)
}

func (h *handler) tvSearchFn(req *request) (response, *apiError) {
	return h.runSearch(req, []int{usenet.CatTV}, true)
}

func (h *handler) movieFn(req *request) (response, *apiError) {
	return h.runSearch(req, []int{usenet.CatMovies}, false)
}

// runSearch answers the search functions; defCats apply when the request
// names no cat, tv adds season and ep.
func (h *handler) runSearch(req *request, defCats []int, tv bool) (response, *apiError) {
	q, apiErr := h.parseQuery(req, tv)
	if apiErr != nil {
		return response{}, apiErr
	}
	if len(q.Cats) == 0 {
		q.Cats = defCats
	}
	byID, apiErr := checkIDs(req.q)
	if apiErr != nil {
		return response{}, apiErr
	}
	if byID && q.Words == "" {
		return encode(req, h.feed(req, q.Offset, 0), h.feed(req, q.Offset, 0).json())
	}
	// The budget is a deadline under the request's context, so the search
	// also ends when the client goes away (ServeHTTP then answers nothing).
	ctx, cancel := context.WithDeadline(req.Context(), h.now().Add(h.cfg.SearchBudget))
	defer cancel()
	res, err := h.cfg.Index.Search(ctx, q)
	switch {
	case err == nil:
	case req.Context().Err() != nil:
		return response{}, errorf(ErrUnknown, "client went away")
	case errors.Is(err, context.DeadlineExceeded):
		return response{}, errorf(ErrUnknown, fmt.Sprintf("search took longer than its time budget of %v: use fewer categories or more specific words", h.cfg.SearchBudget))
	case errors.Is(err, search.ErrQueryTooLarge):
		return response{}, limitError(err)
	default:
		return response{}, errorf(ErrUnknown, "search failed")
	}
	extended := req.q.Get("extended") == "1"
	ids := make([]string, len(res.Releases))
	for i, r := range res.Releases {
		ids[i] = r.ID
	}
	grabs, apiErr := h.grabs(req, ids)
	if apiErr != nil {
		return response{}, apiErr
	}
	doc := h.feed(req, q.Offset, res.Total)
	for _, r := range res.Releases {
		doc.Channel.Items = append(doc.Channel.Items, h.item(r, req.base, req.key, grabs[r.ID], extended))
	}
	return encode(req, doc, doc.json())
}

func (h *handler) feed(req *request, offset, total int) rssDoc {
	return rssDoc{
		Version: "2.0", Atom: AtomNamespace, Newznab: NewznabNamespace,
		Channel: rssChannel{
			AtomLink:    atomLink{Href: req.base + "/api", Rel: "self", Type: "application/rss+xml"},
			Title:       h.cfg.Title,
			Description: h.cfg.Title + " feed",
			Link:        req.base + "/",
			Response:    nzResponse{Offset: offset, Total: total},
		},
	}
}

func (h *handler) parseQuery(req *request, tv bool) (search.Query, *apiError) {
	v := req.q
	q := search.Query{Words: v.Get("q"), Group: v.Get("group"), Limit: h.cfg.DefaultLimit, HidePassworded: h.cfg.HidePassworded}
	var apiErr *apiError
	num := func(name string) int {
		s := v.Get(name)
		if s == "" || apiErr != nil {
			return 0
		}
		n, err := strconv.Atoi(s)
		if errors.Is(err, strconv.ErrRange) && s[0] != '-' {
			// A number past any limit is a number still: limit is
			// clamped, an offset past the end is an empty page.
			return math.MaxInt
		}
		if err != nil || n < 0 {
			apiErr = errorf(ErrIncorrectParam, name+": want a number >= 0")
			return 0
		}
		return n
	}
	if v.Has("limit") {
		q.Limit = min(num("limit"), h.cfg.MaxLimit)
		if q.Limit == 0 {
			q.Limit = h.cfg.DefaultLimit
		}
	}
	q.Offset = num("offset")
	// Days past what a Duration holds (292 years) are no limit, not a
	// product that wraps around to minutes.
	const maxDays = int(math.MaxInt64 / int64(24*time.Hour))
	if days := num("maxage"); days > 0 && days <= maxDays {
		q.MaxAge = time.Duration(days) * 24 * time.Hour
	}
	// minage, minsize and maxsize are what NNTmux added to the spec's
	// search (sizes in bytes) and Prowlarr passes on from its own
	// clients. A minage past 292 years is the longest a Duration holds,
	// which leaves nothing, as the days asked would.
	if days := num("minage"); days > maxDays {
		q.MinAge = math.MaxInt64
	} else if days > 0 {
		q.MinAge = time.Duration(days) * 24 * time.Hour
	}
	q.MinSize, q.MaxSize = int64(num("minsize")), int64(num("maxsize"))
	if tv && apiErr == nil {
		apiErr = parseEpisode(&q, v.Get("season"), v.Get("ep"))
	}
	if s := v.Get("cat"); s != "" && apiErr == nil {
		// Counted before it is split, so a long list costs no memory.
		if strings.Count(s, ",") >= search.MaxCats {
			return search.Query{}, limitError(&search.LimitError{Field: "Cats", Limit: search.MaxCats, Unit: "categories"})
		}
		for _, c := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || n <= 0 {
				return search.Query{}, errorf(ErrIncorrectParam, "cat: want numbers separated by commas")
			}
			q.Cats = append(q.Cats, n)
		}
	}
	// q's limits are checked by Index.Search, before any work, and
	// answered as 201 where it is called.
	return q, apiErr
}

// parseEpisode sets q's season and episode from Sonarr's forms: season=1
// and ep=2; season=00 (season 0, the specials); season=1 alone (the whole
// season); a daily show's season=2026&ep=12/02 (the day). The spec's
// season=S13 and ep=E13 are the same numbers: its text gives them ("Season
// string, e.g S13 or 13") and NNTmux strips the letter.
func parseEpisode(q *search.Query, season, ep string) *apiError {
	number := func(name, s string, letter byte) (int, *apiError) {
		if len(s) > 1 && (s[0] == letter || s[0] == letter+'a'-'A') {
			s = s[1:]
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, errorf(ErrIncorrectParam, fmt.Sprintf("%s: want a number >= 0 (13 or %c13)", name, letter))
		}
		return n, nil
	}
	if season != "" {
		n, e := number("season", season, 'S')
		if e != nil {
			return e
		}
		q.Season, q.HasSeason = n, true
	}
	if month, day, ok := strings.Cut(ep, "/"); ok {
		m, errM := strconv.Atoi(month)
		d, errD := strconv.Atoi(day)
		aired := time.Date(q.Season, time.Month(m), d, 0, 0, 0, 0, time.UTC)
		if season == "" || q.Season < 1000 || errM != nil || errD != nil || aired.Month() != time.Month(m) || aired.Day() != d {
			return errorf(ErrIncorrectParam, "ep: a daily episode is season=YYYY&ep=MM/DD")
		}
		q.Season, q.HasSeason, q.Aired = 0, false, aired
		return nil
	}
	if ep != "" {
		n, e := number("ep", ep, 'E')
		if e != nil {
			return e
		}
		q.Episode = n
	}
	return nil
}

// idParams are the ids of shows and films the spec's tvsearch and movie
// take. The index holds none of them (releases carry no metadata), so a
// search by id alone finds nothing rather than whatever is newest, which a
// client would take for the film or show it asked for; with q as well, q
// decides. Caps advertises none of them.
var idParams = []string{"imdbid", "tmdbid", "tvdbid", "rid", "tvmazeid", "traktid"}

// checkIDs validates the id parameters present (imdbid with or without
// its tt, as Sonarr and Radarr differ) and reports whether any is.
func checkIDs(v url.Values) (bool, *apiError) {
	found := false
	for _, name := range idParams {
		s := v.Get(name)
		if s == "" {
			continue
		}
		if name == "imdbid" {
			s = strings.TrimPrefix(strings.ToLower(s), "tt")
		}
		if n, err := strconv.ParseUint(s, 10, 63); err != nil || n == 0 {
			return false, errorf(ErrIncorrectParam, name+": want a number > 0")
		}
		found = true
	}
	return found, nil
}

// params names the request parameter of each field of search.Query that
// has a limit.
var params = map[string]string{"Words": "q", "Cats": "cat", "Group": "group"}

// limitError is the answer to a query over a limit of the index (a
// *search.LimitError): error 201 naming the parameter and the limit.
func limitError(err error) *apiError {
	var le *search.LimitError
	if !errors.As(err, &le) {
		return errorf(ErrIncorrectParam, "query too large")
	}
	what := "more than"
	if le.Unit == "bytes" {
		what = "longer than"
	}
	unit := le.Unit
	if le.Field == "Words" && le.Unit == "words" {
		unit = "distinct words"
	}
	return errorf(ErrIncorrectParam, fmt.Sprintf("%s: %s %d %s", params[le.Field], what, le.Limit, unit))
}

// release reads the release the id parameter names, or guid: the spec
// gives DETAILS as t=details&guid=ID, nZEDb and NNTmux read id.
func (h *handler) release(req *request) (usenet.Release, *apiError) {
	id := req.q.Get("id")
	if id == "" {
		id = req.q.Get("guid")
	}
	if id == "" {
		return usenet.Release{}, errorf(ErrMissingParam, "id")
	}
	r, err := h.cfg.Store.Release(req.Context(), id)
	if errors.Is(err, usenet.ErrNotFound) {
		return usenet.Release{}, errorf(ErrNoSuchItem, "")
	}
	if err != nil {
		return usenet.Release{}, errorf(ErrUnknown, "store unavailable")
	}
	return r, nil
}

func (h *handler) getFn(req *request) (response, *apiError) {
	id := req.q.Get("id")
	if id == "" {
		return response{}, errorf(ErrMissingParam, "id")
	}
	f, err := NZB(req.Context(), h.cfg.Store, id)
	switch {
	case errors.Is(err, ErrNoSuchFile):
		return response{}, errorf(ErrNoSuchItem, "a file of the release is missing")
	case errors.Is(err, usenet.ErrNotFound):
		return response{}, errorf(ErrNoSuchItem, "")
	case err != nil:
		return response{}, errorf(ErrUnknown, "store unavailable")
	}
	// Counted once the NZB is ready: a grab that fails uses nothing. A
	// HEAD is answered the headers alone, no NZB, so it is no grab: a
	// client checking a link uses none of the user's grabs and adds none
	// to the release's. It answers what its GET would, though: a user
	// with no grab left gets the GET's error.
	if req.Method == http.MethodHead {
		if apiErr := h.checkGrab(req); apiErr != nil {
			return response{}, apiErr
		}
	} else if apiErr := h.countGrab(req, f.Release.ID); apiErr != nil {
		return response{}, apiErr
	}
	return response{
		contentType: usenet.NZBContentType,
		header:      f.Header(h.link(req.base, "details", f.Release.ID, req.key)),
		body:        f.Body,
	}, nil
}

// headerValue is s made safe as a header value: a release name is what a
// poster chose, so control characters (CR and LF among them) become
// spaces, and what is not ASCII becomes _, as a downloader may decode
// header bytes as Latin-1 and get the name wrong.
func headerValue(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c < 0x20 || c == 0x7f:
			b.WriteByte(' ')
		case c >= 0x80:
			b.WriteByte('_')
		default:
			b.WriteRune(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// extValue percent-encodes s as an RFC 5987 ext-value: every byte but
// its attr-chars.
func extValue(s string) string {
	const keep = "!#$&+-.^_`|~"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// contentDisposition names the NZB file: ascii is the plain file name
// (letters, digits, dot, dash and underscore only, see usenet.NZBFileName);
// a name with other characters also gets RFC 6266's filename* in UTF-8.
func contentDisposition(ascii, name string) string {
	v := `attachment; filename="` + ascii + `"`
	for _, c := range name {
		if c >= 0x80 {
			return v + "; filename*=UTF-8''" + extValue(name+".nzb")
		}
	}
	return v
}

func (h *handler) detailsFn(req *request) (response, *apiError) {
	r, apiErr := h.release(req)
	if apiErr != nil {
		return response{}, apiErr
	}
	grabs, apiErr := h.grabs(req, []string{r.ID})
	if apiErr != nil {
		return response{}, apiErr
	}
	doc := h.feed(req, 0, 1)
	it := h.item(r, req.base, req.key, grabs[r.ID], true)
	// What post-processing read, in attrs of their own (not in the spec:
	// clients ignore what they do not know): the par2 index's files as
	// "name size", the names inside the first RAR volume, and whether an
	// NFO is there for t=getnfo.
	for _, f := range r.Par2 {
		it.Attrs = append(it.Attrs, nzAttr{"par2", f.Name + " " + strconv.FormatInt(f.Size, 10)})
	}
	for _, n := range r.Inner {
		it.Attrs = append(it.Attrs, nzAttr{"inner", n})
	}
	if r.NFO {
		it.Attrs = append(it.Attrs, nzAttr{"nfo", "1"})
	}
	for _, f := range r.Binaries {
		if f.Posted != "" {
			it.Attrs = append(it.Attrs, nzAttr{"file", f.Name})
		}
	}
	if r.PostedName != "" {
		it.Attrs = append(it.Attrs, nzAttr{"posted_name", r.PostedName})
	}
	doc.Channel.Items = []rssItem{it}
	return encode(req, doc, doc.json())
}

// getNFOFn answers t=getnfo: the release's NFO text, as the description
// of a one-item feed (XML, or JSON with o=json), or as the plain text file
// itself with raw=1 or o=file.
func (h *handler) getNFOFn(req *request) (response, *apiError) {
	r, apiErr := h.release(req)
	if apiErr != nil {
		return response{}, apiErr
	}
	text, err := h.cfg.Store.NFO(req.Context(), r.ID)
	switch {
	case errors.Is(err, usenet.ErrNotFound):
		return response{}, errorf(ErrNoSuchItem, "the release has no NFO")
	case err != nil:
		return response{}, errorf(ErrUnknown, "store unavailable")
	}
	if req.q.Get("raw") == "1" || req.q.Get("o") == "file" {
		name := strings.TrimSuffix(usenet.NZBFileName(r), ".nzb") + ".nfo"
		return response{
			contentType: "text/plain; charset=utf-8",
			header:      map[string]string{"Content-Disposition": `attachment; filename="` + name + `"`},
			body:        []byte(text),
		}, nil
	}
	doc := h.feed(req, 0, 1)
	it := h.item(r, req.base, req.key, 0, false)
	it.Description = feedText(text)
	it.Attrs = nil
	doc.Channel.Items = []rssItem{it}
	return encode(req, doc, doc.json())
}
