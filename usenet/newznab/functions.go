package newznab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	doc := h.feed(req, q.Offset, res.Total)
	for _, r := range res.Releases {
		doc.Channel.Items = append(doc.Channel.Items, h.item(r, req.base, req.key, extended))
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
	q := search.Query{Words: v.Get("q"), Group: v.Get("group"), Limit: h.cfg.DefaultLimit}
	var apiErr *apiError
	num := func(name string) int {
		s := v.Get(name)
		if s == "" || apiErr != nil {
			return 0
		}
		n, err := strconv.Atoi(s)
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
	if days := num("maxage"); days > 0 {
		q.MaxAge = time.Duration(days) * 24 * time.Hour
	}
	if tv {
		q.Season = num("season")
		q.Episode = num("ep")
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
	if apiErr == nil {
		if err := q.Check(); err != nil {
			return search.Query{}, limitError(err)
		}
	}
	return q, apiErr
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

// release reads the release the id parameter names.
func (h *handler) release(req *request) (usenet.Release, *apiError) {
	id := req.q.Get("id")
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
	r, apiErr := h.release(req)
	if apiErr != nil {
		return response{}, apiErr
	}
	ids := make([]string, 0, len(r.Binaries))
	for _, b := range r.Binaries {
		ids = append(ids, b.ID)
	}
	bins, err := h.cfg.Store.Binaries(req.Context(), ids)
	if errors.Is(err, usenet.ErrNotFound) {
		return response{}, errorf(ErrNoSuchItem, "a file of the release is missing")
	}
	if err != nil {
		return response{}, errorf(ErrUnknown, "store unavailable")
	}
	var buf bytes.Buffer
	if err := usenet.WriteNZB(&buf, r, bins); err != nil {
		return response{}, errorf(ErrUnknown, "internal error")
	}
	return response{
		contentType: usenet.NZBContentType,
		header:      map[string]string{"Content-Disposition": `attachment; filename="` + usenet.NZBFileName(r) + `"`},
		body:        buf.Bytes(),
	}, nil
}

func (h *handler) detailsFn(req *request) (response, *apiError) {
	r, apiErr := h.release(req)
	if apiErr != nil {
		return response{}, apiErr
	}
	doc := h.feed(req, 0, 1)
	doc.Channel.Items = []rssItem{h.item(r, req.base, req.key, true)}
	return encode(req, doc, doc.json())
}
