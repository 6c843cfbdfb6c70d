package newznab

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"

	"github.com/switchyard-dev/switchyard/usenet/users"
)

// authorize checks req's key for function t, and counts the request of a
// user's key against its daily limit (refunded if the function then
// refuses its parameters, see refundable). t=get is counted as a grab
// instead, once its NZB is ready (countGrab), so that a grab of a missing
// release uses nothing, and only when the NZB is sent (not for a HEAD).
func (h *handler) authorize(req *request, t string) *apiError {
	if h.cfg.APIKeys == nil && h.cfg.Users == nil {
		return nil // an open API
	}
	if req.key == "" {
		return errorf(ErrCredentials, "")
	}
	if h.cfg.APIKeys != nil && h.cfg.APIKeys(req.key) {
		return nil // the admin's key: no limits
	}
	if h.cfg.Users == nil {
		return errorf(ErrCredentials, "")
	}
	req.user = true
	if t == "get" {
		ok, err := h.cfg.Users.Valid(req.Context(), req.key)
		switch {
		case err != nil:
			return errorf(ErrUnknown, "accounts unavailable")
		case !ok:
			return errorf(ErrCredentials, "")
		}
		return nil
	}
	if apiErr := usersError(h.cfg.Users.Request(req.Context(), req.key)); apiErr != nil {
		return apiErr
	}
	req.counted = true
	return nil
}

// refundRequest takes back the request authorize counted, for one refused
// for its parameters (see refundable). The count was taken first so that
// the limit holds for requests made at once; a refund that fails leaves
// the request counted, as every request was before refunds, and the
// answer is the parameter's error either way.
func (h *handler) refundRequest(req *request) {
	// Refunded even when the client has gone: its request was refused.
	_ = h.cfg.Users.RefundRequest(context.WithoutCancel(req.Context()), req.key)
}

// countGrab counts a grab of release: the user's (refused past its limit)
// and the release's, which the grabs attr shows.
func (h *handler) countGrab(req *request, release string) *apiError {
	return usersError(h.cfg.Grab(req.Context(), req.key, release))
}

// checkGrab is countGrab's answer without counting (a HEAD's): only a
// user's key has a limit to refuse.
func (h *handler) checkGrab(req *request) *apiError {
	if h.cfg.Users == nil || !req.user {
		return nil
	}
	return usersError(h.cfg.Users.CheckGrab(req.Context(), req.key))
}

// usersError is the answer to an error of the users store.
func usersError(err error) *apiError {
	var le *users.LimitError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, users.ErrUnknownKey):
		return errorf(ErrCredentials, "")
	case errors.As(err, &le):
		code := ErrRequestLimit
		if le.Kind == users.Grabs {
			code = ErrDownloadLimit
		}
		e := errorf(code, "")
		e.Reset, e.Wait = le.Reset, le.Wait
		return e
	}
	return errorf(ErrUnknown, "accounts unavailable")
}

// grabs is how often each release of rs was grabbed; nil (every count 0)
// without Users.
func (h *handler) grabs(req *request, ids []string) (map[string]int, *apiError) {
	if h.cfg.Users == nil {
		return nil, nil
	}
	g, err := h.cfg.Users.Grabs(req.Context(), ids)
	if err != nil {
		return nil, errorf(ErrUnknown, "accounts unavailable")
	}
	return g, nil
}

// xmlRegister is nZEDb's answer to t=register. nZEDb adds a password for
// its web site's login; this indexer has no login, so there is none.
type xmlRegister struct {
	XMLName  xml.Name `xml:"register"`
	Username string   `xml:"username,attr"`
	APIKey   string   `xml:"apikey,attr"`
}

type jsonRegister struct {
	Username string `json:"username"`
	APIKey   string `json:"apikey"`
}

// registerFn creates an account named by the email parameter, when an
// operator opened registration (`usenet users registration open`), and
// answers its key; 104 while registration is closed (the default), 103
// past the registrations a day allows.
func (h *handler) registerFn(req *request) (response, *apiError) {
	if h.cfg.Users == nil {
		return response{}, errorf(ErrRegistrationsClosed, "")
	}
	email := req.q.Get("email")
	if email == "" {
		return response{}, errorf(ErrMissingParam, "email")
	}
	key, err := h.cfg.Users.Register(req.Context(), email)
	var rl *users.RegistrationLimitError
	switch {
	case err == nil:
	case errors.Is(err, users.ErrRegistrationClosed):
		return response{}, errorf(ErrRegistrationsClosed, "")
	case errors.Is(err, users.ErrBadEmail):
		return response{}, errorf(ErrEmailBadFormat, "")
	case errors.Is(err, users.ErrExists):
		return response{}, errorf(ErrEmailTaken, "")
	case errors.As(err, &rl):
		return response{}, errorf(ErrRegistrationDenied, fmt.Sprintf("%d registrations a day; try again after %s", rl.Limit, rl.Reset.Format("2006-01-02 15:04 MST")))
	default:
		return response{}, errorf(ErrRegistrationFailed, "")
	}
	name := users.AccountName(email)
	return encode(req, xmlRegister{Username: name, APIKey: key}, jsonRegister{Username: name, APIKey: key})
}
