package releases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

// Item is one release of a search answer.
type Item struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Category     int    `json:"category"`
	CategoryName string `json:"category_name"`
	Size         int64  `json:"size"`
	// Files is usenet.Release.FileCount, as the Newznab feed and the
	// dashboard show it.
	Files  int      `json:"files"`
	Date   int64    `json:"date"` // unix seconds
	Groups []string `json:"groups"`
	Poster string   `json:"poster"`
	// Password is the Newznab password attr post-processing found: 0
	// none, 1 passworded, 2 potentially.
	Password int `json:"password"`
}

// SearchAnswer is GET /releases/api/search's answer.
type SearchAnswer struct {
	Total  int    `json:"total"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
	Items  []Item `json:"items"`
	// IndexSeq is the last releases-stream seq the index had applied.
	IndexSeq uint64 `json:"index_seq"`
}

// File is one file of a release.
type File struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Parts   int    `json:"parts"`
	Present int    `json:"present"`
}

// Detail is GET /releases/api/release's answer: the release and its files.
type Detail struct {
	Item
	FilesList []File `json:"file_list"`
	// Parts and Present are the articles announced and seen, over every
	// file: the release's completion.
	Parts   int `json:"parts"`
	Present int `json:"present"`
	// NZB is the path of its NZB download.
	NZB string `json:"nzb"`
	// What post-processing read: the name it was posted under when it
	// was renamed, the par2 index's files, the names inside its first
	// RAR volume and its NFO text ("" without one).
	PostedName string            `json:"posted_name,omitempty"`
	Par2       []usenet.Par2File `json:"par2"`
	Inner      []string          `json:"inner"`
	NFO        string            `json:"nfo"`
}

// Info is GET /releases/api/info's answer: what the page needs before it
// searches.
type Info struct {
	Scope      string     `json:"scope"`
	Stream     string     `json:"stream"`
	PageSize   int        `json:"page_size"`
	Categories []Category `json:"categories"`
	// SignedIn says the request's credentials admit it; Who is its
	// principal's name, Problem why it is not admitted.
	SignedIn bool   `json:"signed_in"`
	Who      string `json:"who,omitempty"`
	Problem  string `json:"problem,omitempty"`
	// BusUsers says the bus's users may sign in too (up --auth).
	BusUsers bool `json:"bus_users"`
	// Cookie says the request carried the page's key cookie (which only
	// the server can read): signing out forgets it.
	Cookie bool `json:"cookie"`
}

// Category is one entry of the category filter.
type Category struct {
	ID      int        `json:"id"`
	Name    string     `json:"name"`
	Subcats []Category `json:"subcats,omitempty"`
}

func item(r usenet.Release) Item {
	groups := r.Groups
	if groups == nil {
		groups = []string{}
	}
	return Item{ID: r.ID, Name: r.Name, Category: r.Category, CategoryName: usenet.CategoryName(r.Category),
		Size: r.Size, Files: r.FileCount(), Date: r.Date, Groups: groups, Poster: r.Poster, Password: r.Password}
}

func categories(cs []usenet.Category) []Category {
	var out []Category
	for _, c := range cs {
		out = append(out, Category{ID: c.ID, Name: c.Name, Subcats: categories(c.Subcats)})
	}
	return out
}

func (p *Page) serveInfo(w http.ResponseWriter, r *http.Request) {
	info := Info{Scope: p.cfg.Scope, Stream: usenet.ReleasesStream, PageSize: p.cfg.PageSize,
		Categories: categories(usenet.Categories), BusUsers: p.cfg.Authorizer != nil}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		info.Cookie = true
	}
	who, err := p.who(r)
	switch {
	case err != nil:
		info.Problem = err.Error()
	case !who.CanRead(p.cfg.Scope):
		info.Problem = fmt.Sprintf("%s may not read scope %s", who.Name, p.cfg.Scope)
	default:
		info.SignedIn, info.Who = true, who.Name
	}
	writeJSON(w, http.StatusOK, info)
}

// searchQuery reads a search's parameters: q, cat (ids separated by
// commas), group, offset, limit and seen (a stream seq to wait for).
func (p *Page) searchQuery(v url.Values) (q search.Query, seen uint64, err error) {
	q = search.Query{Words: v.Get("q"), Group: strings.TrimSpace(v.Get("group")), Limit: p.cfg.PageSize, HidePassworded: p.cfg.HidePassworded}
	num := func(name string, lo, hi int) (int, error) {
		n, err := strconv.Atoi(v.Get(name))
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%s %q: want a whole number from %d to %d", name, v.Get(name), lo, hi)
		}
		return n, nil
	}
	if v.Get("offset") != "" {
		if q.Offset, err = num("offset", 0, 1<<30); err != nil {
			return q, 0, err
		}
	}
	if v.Get("limit") != "" {
		if q.Limit, err = num("limit", 1, MaxPageSize); err != nil {
			return q, 0, err
		}
	}
	if s := v.Get("seen"); s != "" {
		if seen, err = strconv.ParseUint(s, 10, 64); err != nil {
			return q, 0, fmt.Errorf("seen %q: want a stream seq (a whole number)", s)
		}
	}
	if s := v.Get("cat"); s != "" {
		if strings.Count(s, ",") >= search.MaxCats {
			return q, 0, fmt.Errorf("cat: more than %d categories", search.MaxCats)
		}
		for _, c := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || n <= 0 {
				return q, 0, fmt.Errorf("cat %q: want category ids (such as 5000 or 5040) separated by commas", s)
			}
			q.Cats = append(q.Cats, n)
		}
	}
	var le *search.LimitError
	if err := q.Check(); errors.As(err, &le) {
		name := map[string]string{"Words": "q", "Cats": "cat", "Group": "group"}[le.Field]
		return q, 0, fmt.Errorf("%s: more than %d %s", name, le.Limit, le.Unit)
	} else if err != nil {
		return q, 0, err
	}
	return q, seen, nil
}

// query is r's URL query, or the answer 400 naming what could not be
// decoded: url.ParseQuery skips such a pair (a '%' not followed by two hex
// digits, a ';') and keeps the rest, and a search without its q would list
// every release.
func query(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-request", "malformed query: "+err.Error())
		return nil, false
	}
	return v, true
}

func (p *Page) serveSearch(w http.ResponseWriter, r *http.Request) {
	v, ok := query(w, r)
	if !ok {
		return
	}
	q, seen, err := p.searchQuery(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad-request", err.Error())
		return
	}
	p.catchUp(r.Context(), seen)
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.SearchBudget)
	defer cancel()
	res, err := p.cfg.Index.Search(ctx, q)
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		return // the page went away
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("the search took longer than %v: use fewer categories or more specific words", p.cfg.SearchBudget))
		return
	default:
		p.cfg.Logger.Warn("releases: search", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the search failed")
		return
	}
	ans := SearchAnswer{Total: res.Total, Offset: q.Offset, Limit: q.Limit, Items: []Item{}, IndexSeq: p.cfg.Index.LastSeq()}
	for _, rel := range res.Releases {
		ans.Items = append(ans.Items, item(rel))
	}
	writeJSON(w, http.StatusOK, ans)
}

// catchUp waits, at most CatchUpWait, until the index has applied the
// releases-stream seq seen: the page heard of a change on the stream and
// searches again, and the index follows the same stream a little behind.
func (p *Page) catchUp(ctx context.Context, seen uint64) {
	if seen == 0 {
		return
	}
	t := time.NewTimer(p.cfg.CatchUpWait)
	defer t.Stop()
	for {
		ch := p.cfg.Index.Changed()
		if p.cfg.Index.LastSeq() >= seen {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// release reads the release the id names, answering the request itself
// when it cannot (ok false).
func (p *Page) release(w http.ResponseWriter, r *http.Request, id string) (rel usenet.Release, ok bool) {
	if id == "" {
		writeError(w, http.StatusBadRequest, "bad-request", "id: missing")
		return rel, false
	}
	rel, err := p.cfg.Store.Release(r.Context(), id)
	switch {
	case errors.Is(err, usenet.ErrNotFound):
		writeError(w, http.StatusNotFound, "not-found", fmt.Sprintf("no release %q", id))
		return rel, false
	case err != nil:
		p.cfg.Logger.Warn("releases: read release", "id", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the store did not answer")
		return rel, false
	}
	return rel, true
}

func (p *Page) serveRelease(w http.ResponseWriter, r *http.Request) {
	v, ok := query(w, r)
	if !ok {
		return
	}
	rel, ok := p.release(w, r, v.Get("id"))
	if !ok {
		return
	}
	d := Detail{Item: item(rel), FilesList: []File{}, NZB: nzbPath(rel.ID), PostedName: rel.PostedName, Par2: rel.Par2, Inner: rel.Inner}
	if d.Par2 == nil {
		d.Par2 = []usenet.Par2File{}
	}
	if d.Inner == nil {
		d.Inner = []string{}
	}
	if rel.NFO {
		// An NFO that cannot be read now leaves the rest of the page.
		if text, err := p.cfg.Store.NFO(r.Context(), rel.ID); err == nil {
			d.NFO = text
		}
	}
	for _, b := range rel.Binaries {
		d.FilesList = append(d.FilesList, File{Name: b.Name, Bytes: b.Bytes, Parts: b.Parts, Present: b.Present})
		d.Parts += b.Parts
		d.Present += b.Present
	}
	writeJSON(w, http.StatusOK, d)
}

// nzbPath is the page's NZB download of release id.
func nzbPath(id string) string { return "/releases/nzb/" + url.PathEscape(id) }

func (p *Page) serveNZB(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, err := newznab.NZB(r.Context(), p.cfg.Store, id)
	switch {
	case errors.Is(err, newznab.ErrNoSuchFile):
		writeError(w, http.StatusNotFound, "not-found", fmt.Sprintf("release %q: a file of it is missing", id))
		return
	case errors.Is(err, usenet.ErrNotFound):
		writeError(w, http.StatusNotFound, "not-found", fmt.Sprintf("no release %q", id))
		return
	case err != nil:
		p.cfg.Logger.Warn("releases: nzb", "id", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the store did not answer")
		return
	}
	if p.cfg.Grab != nil && r.Method != http.MethodHead {
		if err := p.cfg.Grab(r.Context(), keyOf(r), id); err != nil {
			var le *users.LimitError
			if errors.As(err, &le) {
				w.Header().Set("Retry-After", strconv.FormatInt(int64(max((le.Wait+time.Second-1)/time.Second, 1)), 10))
				writeError(w, http.StatusTooManyRequests, "limit", "download limit reached: "+le.Error())
				return
			}
			p.cfg.Logger.Warn("releases: count grab", "id", id, "err", err)
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the accounts did not answer")
			return
		}
	}
	// The details link is the release's page, which names no key.
	for k, v := range f.Header("") {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", usenet.NZBContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(f.Body)
}

// errorAnswer is every refusal's body: a stable code and a message.
type errorAnswer struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e errorAnswer
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal: encode answer", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
