package bus

import "strings"

// InboxRoot is the first token of every inbox: nats.go's default reply
// prefix "_INBOX." and, followed by "_" and a user name, the per-user
// prefixes of an authenticated bus ("_INBOX_acme.").
const InboxRoot = "_INBOX"

// IsInbox reports whether subject is a reply inbox a responder may answer
// on: "_INBOX." or "_INBOX_<name>." (name one subject token) followed by at
// least one more token, every token non-empty and free of wildcards, spaces
// and control characters.
//
// The requester chooses the reply subject and NATS lets a responder
// (allow_responses) publish there whatever its own permissions say, so the
// servers and the balancer answer only here: anywhere else ($JS.API.…,
// another scope's API or feed, a subject some tenant subscribes to) their
// answer would be a publish a tenant pointed, with a server's identity.
func IsInbox(subject string) bool {
	first, rest, ok := strings.Cut(subject, ".")
	if !ok || !strings.HasPrefix(first, InboxRoot) {
		return false
	}
	if name := first[len(InboxRoot):]; name != "" {
		// "_INBOX_<name>": the user's own prefix, never "_INBOXX".
		if name[0] != '_' || !isToken(name[1:]) {
			return false
		}
	}
	for {
		tok, more, ok := strings.Cut(rest, ".")
		if !isToken(tok) {
			return false
		}
		if !ok {
			return true
		}
		rest = more
	}
}
