// Package newznab serves the Newznab API (/api) that Sonarr, Radarr,
// Prowlarr, NZBHydra and downloaders' RSS readers call, from a search
// index and the usenet store. See docs/usenet-api.md.
package newznab

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

type handler struct {
	cfg Config
	now func() time.Time // the clock a search's budget starts from; a variable for tests
}

// Handler returns the handler of /api. It panics on an invalid Config
// (a programming error: no Index or Store, a relative BaseURL).
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api", newHandler(cfg))
	return mux
}

func newHandler(cfg Config) *handler {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return &handler{cfg: cfg, now: time.Now}
}

// request is one API call's parsed common parts.
type request struct {
	*http.Request
	q    url.Values
	json bool   // o=json
	key  string // apikey
	base string // the URL links start with
	// user says key is a user's (Config.Users), whose grabs count against
	// its limit; false for the admin's key and an open API.
	user bool
	// counted says authorize counted the request against the user's
	// limit, so that serve can refund it (see refundable).
	counted bool
	// queryErr is why the URL's query could not be decoded whole. q then
	// lacks the pairs it could not read, so the request is refused
	// rather than answered without them (a q dropped is the whole index).
	queryErr error
}

// response is an answer built in memory before anything is written, so
// that a failure or panic halfway still ends in a clean error answer.
type response struct {
	contentType string
	header      map[string]string
	body        []byte
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
	}
	q, queryErr := url.ParseQuery(r.URL.RawQuery)
	req := &request{Request: r, q: q, queryErr: queryErr}
	req.json = req.q.Get("o") == "json"
	req.key = req.q.Get("apikey")
	req.base = h.baseURL(r)
	resp, apiErr := h.serve(req)
	if apiErr != nil && r.Context().Err() != nil {
		// The client went away (which ended the work): nobody reads an
		// answer.
		return
	}
	if apiErr != nil {
		resp = h.errorResponse(req, apiErr)
	}
	if h.cfg.Observe != nil {
		fn := req.q.Get("t")
		if full, ok := aliases[fn]; ok {
			fn = full
		}
		if _, ok := functions[fn]; !ok {
			fn = "other" // a bounded set: clients cannot invent labels
		}
		code := 0
		if apiErr != nil {
			code = apiErr.Code
		}
		h.cfg.Observe(fn, code)
	}
	for k, v := range resp.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", resp.contentType)
	w.Header().Set("Content-Length", fmt.Sprint(len(resp.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(resp.body)
	}
}

// serve answers req; a panic becomes error 900, never a stack trace.
func (h *handler) serve(req *request) (resp response, apiErr *apiError) {
	defer func() {
		if p := recover(); p != nil {
			apiErr = errorf(ErrUnknown, "internal error")
		}
	}()
	if req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodPost {
		return response{}, errorf(ErrNoSuchFunction, "method "+req.Method+" not supported")
	}
	if req.Method == http.MethodPost {
		// Some clients POST the form; its fields count as parameters.
		if err := req.ParseForm(); err != nil {
			if errors.As(err, new(*http.MaxBytesError)) {
				return response{}, errorf(ErrIncorrectParam, fmt.Sprintf("form larger than %d bytes", MaxFormBytes))
			}
			return response{}, errorf(ErrIncorrectParam, "malformed form: "+err.Error())
		}
		req.q = req.Form
		req.json = req.q.Get("o") == "json"
		req.key = req.q.Get("apikey")
	} else if req.queryErr != nil {
		// url.ParseQuery skips a pair it cannot decode (a '%' not followed
		// by two hex digits, a ';') and keeps the rest: answered, q=Film%
		// or q=Law;Order would list the newest releases of every category.
		return response{}, errorf(ErrIncorrectParam, "malformed query: "+req.queryErr.Error())
	}
	t := req.q.Get("t")
	if full, ok := aliases[t]; ok {
		t = full
	}
	fn, ok := functions[t]
	if !ok {
		switch {
		case t == "":
			return response{}, errorf(ErrNoSuchFunction, "missing t")
		case notAvailable[t]:
			return response{}, errorf(ErrFunctionNotAvailable, t)
		}
		return response{}, errorf(ErrNoSuchFunction, t)
	}
	if t != "caps" && t != "register" {
		if apiErr := h.authorize(req, t); apiErr != nil {
			return response{}, apiErr
		}
	}
	resp, apiErr = fn(h, req)
	if apiErr != nil && req.counted && refundable[apiErr.Code] {
		h.refundRequest(req)
	}
	return resp, apiErr
}

// refundable are the errors of a request refused for its parameters,
// before any of the work it asked for: it uses none of the user's
// requests, as nZEDb checks a function's parameters before it counts the
// request. An answered request counts, one that finds nothing (300) too.
var refundable = map[int]bool{ErrMissingParam: true, ErrIncorrectParam: true}

var functions map[string]func(*handler, *request) (response, *apiError)

// aliases are the spec's short names of its functions.
var aliases = map[string]string{
	"c": "caps", "s": "search", "tv": "tvsearch", "m": "movie", "b": "book",
	"d": "details", "g": "get", "n": "getnfo",
}

// notAvailable are the spec's optional functions this indexer does not
// have: 203 Function not available, where an unknown name is 202.
var notAvailable = map[string]bool{"music": true, "book": true}

func init() {
	functions = map[string]func(*handler, *request) (response, *apiError){
		"caps":     (*handler).capsFn,
		"search":   (*handler).searchFn,
		"tvsearch": (*handler).tvSearchFn,
		"movie":    (*handler).movieFn,
		"get":      (*handler).getFn,
		"details":  (*handler).detailsFn,
		"getnfo":   (*handler).getNFOFn,
		"register": (*handler).registerFn,
	}
}

func (h *handler) baseURL(r *http.Request) string {
	if h.cfg.BaseURL != "" {
		return h.cfg.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// link is the API URL of function t for release id, with the caller's key.
func (h *handler) link(base, t, id, key string) string {
	v := url.Values{"t": {t}, "id": {id}}
	if key != "" {
		v.Set("apikey", key)
	}
	return base + "/api?" + v.Encode()
}

func (h *handler) capsFn(req *request) (response, *apiError) {
	c := h.caps(req.Context())
	return encode(req, c, c)
}

// encode writes v as XML, or j as JSON for o=json.
func encode(req *request, v, j any) (response, *apiError) {
	if req.json {
		body, err := json.Marshal(j)
		if err != nil {
			return response{}, errorf(ErrUnknown, "internal error")
		}
		return response{contentType: "application/json; charset=utf-8", body: body}, nil
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(v); err != nil {
		return response{}, errorf(ErrUnknown, "internal error")
	}
	ct := "application/xml; charset=utf-8"
	if _, ok := v.(rssDoc); ok {
		ct = "application/rss+xml; charset=utf-8"
	}
	return response{contentType: ct, body: buf.Bytes()}, nil
}

type xmlError struct {
	XMLName     xml.Name `xml:"error"`
	Code        int      `xml:"code,attr"`
	Description string   `xml:"description,attr"`
	Reset       string   `xml:"reset,attr,omitempty"`
}

type jsonError struct {
	Error struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
		Reset       string `json:"reset,omitempty"`
	} `json:"error"`
}

func (h *handler) errorResponse(req *request, e *apiError) response {
	var j jsonError
	j.Error.Code, j.Error.Description = e.Code, e.Description
	x := xmlError{Code: e.Code, Description: e.Description}
	var header map[string]string
	if !e.Reset.IsZero() {
		x.Reset = e.Reset.UTC().Format(time.RFC3339)
		j.Error.Reset = x.Reset
		// Whole seconds, rounded up: a client that waits this long finds
		// the counter reset.
		header = map[string]string{"Retry-After": strconv.FormatInt(int64(max((e.Wait+time.Second-1)/time.Second, 1)), 10)}
	}
	resp, err := encode(req, x, j)
	if err != nil {
		return response{contentType: "text/plain; charset=utf-8", body: []byte("900 internal error\n")}
	}
	resp.header = header
	return resp
}
