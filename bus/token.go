package bus

import (
	"fmt"
	"strings"
	"unicode"
)

// ValidToken reports why s cannot be one token of a NATS subject (a server
// id, a service name), or nil: it must be non-empty, printable, and hold no
// '.', '*', '>' or white space, which NATS reads as token separators,
// wildcards or the end of the subject.
func ValidToken(s string) error {
	if s == "" {
		return fmt.Errorf("empty subject token")
	}
	if !isToken(s) {
		return fmt.Errorf("%q is not a subject token: no '.', '*', '>', spaces or control characters", s)
	}
	return nil
}

// ValidService reports why s cannot be the first subject token of a
// service (persist's, the balancer's), or nil: a token (ValidToken) that
// does not make the service's subjects inboxes. Responders answer any
// reply subject IsInbox accepts, so under a service "_INBOX" or
// "_INBOX_<name>" a tenant could aim an answer at another scope's feed or
// API subject ("_INBOX.account-b.feed.log") and have it published there.
func ValidService(s string) error {
	if err := ValidToken(s); err != nil {
		return err
	}
	if IsInbox(s + ".x") {
		return fmt.Errorf("%q names reply inboxes (%s or %s_<name>): its subjects would be answered on as inboxes", s, InboxRoot, InboxRoot)
	}
	if strings.HasPrefix(s, "$") {
		// $SYS, $JS, $KV...: NATS's own subject spaces, whose meaning
		// and permissions are the server's, not ours.
		return fmt.Errorf("%q starts with $, which NATS keeps for its own subjects ($SYS, $JS, ...)", s)
	}
	return nil
}

// isToken says whether s is one non-empty subject token with no wildcard:
// what a subject published on may hold. ValidToken's test, without an
// error to allocate (IsInbox runs it on every request).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// ValidIDs reports why ids cannot be the member list of a fleet, or nil:
// at least one id, each a subject token (ValidToken) that is also a safe
// file-name part (no '/' or '\\': `auth init` names a creds file after
// each id) and holds no ',' (the balancer states its ids comma-separated,
// HdrIDs, and a client must read back the same list), no id twice.
func ValidIDs(ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("no server ids")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := ValidToken(id); err != nil {
			return fmt.Errorf("server id: %w", err)
		}
		if strings.ContainsAny(id, `/\`) {
			return fmt.Errorf("server id %q: no '/' or '\\' (ids name files)", id)
		}
		if strings.Contains(id, ",") {
			return fmt.Errorf("server id %q: no ',' (the balancer lists ids comma-separated in %s)", id, HdrIDs)
		}
		if seen[id] {
			return fmt.Errorf("server ids must be distinct: %q appears twice in %q", id, strings.Join(ids, ","))
		}
		seen[id] = true
	}
	return nil
}

// Wire names every service shares (docs/wire.md): the error header and
// the code of a malformed request, and the headers in which the balancer
// states its placement rule beside each answer.
const (
	// HdrError carries an error reply's code; the body is the message.
	HdrError = "Sy-Error"
	// CodeBadRequest is the code of a malformed request.
	CodeBadRequest = "bad-request"
	// HdrPlacement names the balancer's placement rule (rendezvous or
	// modulo) on each of its answers; absent when the rule has no name a
	// client could compute it by.
	HdrPlacement = "Sy-Placement"
	// HdrIDs lists the server ids the rule places over, comma-separated,
	// in the order the rule takes them (with HdrPlacement).
	HdrIDs = "Sy-Ids"
)
