package eventsws

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/jsonstr"
)

// Message types, the "type" field of every message.
const (
	// From the client.
	TypeSubscribe   = "subscribe"   // {id, anchor, filter?: {ops?, glob?}, mode?: "broadcast"|"single"}
	TypeUnsubscribe = "unsubscribe" // {id, mode?}
	TypeAck         = "ack"         // {sub, entry}

	// From the gateway.
	TypeReady        = "ready"        // first message: {user, max_subs}
	TypeSubscribed   = "subscribed"   // {id}: every change committed from now on reaches it
	TypeUnsubscribed = "unsubscribed" // {id}
	TypeAcked        = "acked"        // {id: the entry, sub}: the next `single` delivery may follow
	TypeEvent        = "event"        // {sub, id, subject, op, seq, ts, value, enc?, coalesced}
	TypePresence     = "presence"     // an event on a presence/USER anchor: {sub, user, app, region, op}
	TypeGap          = "gap"          // {sub, reason, subject?, count, from, to}
	TypeError        = "error"        // {id?, code, message}
)

// Error codes of an "error" message. A request's error names the request's
// id (a subscription's id, or an ack's entry); the connection stays open.
const (
	CodeBadRequest   = "bad-request"   // malformed message, anchor or filter
	CodeForbidden    = "forbidden"     // the anchor's scope is not the user's
	CodeTooMany      = "too-many"      // the socket holds its max_subs subscriptions (ready says how many)
	CodeNotFound     = "not-found"     // unsubscribe of an id the socket (or, durable, the user) does not hold
	CodeUnknownEntry = "unknown-entry" // ack of an entry this region does not hold
	CodeUnavailable  = "unavailable"   // the stream's watcher could not start, or the store failed (retry)
	CodeQuota        = "quota"         // the user holds its durable subscriptions' quota
)

// CodeTooManyConnections starts the body of a 429 refusal: the principal
// has Config.TenantConnections open already. It is never an "error"
// message's code (the refusal comes before the upgrade).
const CodeTooManyConnections = "too-many-connections"

// CodeTooManyApps starts the body of a 429 refusal: the principal has
// events.MaxPresenceApps other apps present in the region, so the
// socket's app could not join. Like CodeTooManyConnections it comes
// before the upgrade, never in an "error" message.
const CodeTooManyApps = "too-many-apps"

// MaxMessageBytes bounds one client message; a larger one ends the
// connection (1009).
const MaxMessageBytes = 8 << 10

// clientMsg is any message a client sends; each type reads its own fields.
type clientMsg struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Anchor string `json:"anchor"`
	Filter *struct {
		Ops  []string `json:"ops"`
		Glob string   `json:"glob"`
	} `json:"filter"`
	Sub   string `json:"sub"`
	Entry string `json:"entry"`
	Mode  string `json:"mode"`
}

// request is a client message checked and parsed.
type request struct {
	typ    string
	id     string // subscribe, unsubscribe: the subscription's id; ack: the entry
	sub    string // ack: the subscription
	anchor events.Anchor
	filter events.Filter
	mode   string // "" (a session subscription), or a durable one's mode
	ops    []string
	glob   string
}

// errBad is a request that cannot be understood; its text is what the
// client is told.
var errBad = errors.New("bad request")

// decodeRequest parses one client message. Its error wraps errBad and
// says what is wrong; the request's id, when it had one, comes back with
// it so the client can tell which request failed.
func decodeRequest(b []byte) (request, error) {
	// encoding/json turns each invalid byte, and each lone surrogate
	// escape, into U+FFFD, so checkID would never see one: requests for ids
	// "\xff" and "\udcff" would both be taken for "\uFFFD".
	if err := jsonstr.CheckText(b); err != nil {
		return request{}, fmt.Errorf("%w: %v", errBad, err)
	}
	var m clientMsg
	err := json.Unmarshal(b, &m)
	var te *json.UnmarshalTypeError
	if err != nil && (!errors.As(err, &te) || te.Field == "") {
		return request{}, fmt.Errorf("%w: not a JSON message object: %v", errBad, err)
	}
	r := request{typ: m.Type, id: m.ID, mode: m.Mode}
	if m.Type == TypeAck {
		// Before any check: an ack's error names its entry, whatever is
		// wrong with it (its mode included).
		r.id, r.sub = m.Entry, m.Sub
	}
	if te != nil {
		// A field of the wrong type (a filter's ops as a string): the
		// decoder read the others, so the error still names the request.
		return r, fmt.Errorf("%w: %s: a JSON %s, want %s", errBad, te.Field, te.Value, jsonKind(te.Type.String()))
	}
	switch m.Mode {
	case "", events.ModeBroadcast, events.ModeSingle:
	default:
		return r, fmt.Errorf("%w: mode %q: want %s or %s (or none, for a subscription of this socket only)", errBad, clip(m.Mode), events.ModeBroadcast, events.ModeSingle)
	}
	switch m.Type {
	case TypeSubscribe:
		if err := checkID("id", m.ID); err != nil {
			return r, err
		}
		a, err := events.ParseAnchor(m.Anchor)
		if err != nil {
			return r, fmt.Errorf("%w: anchor: %v", errBad, err)
		}
		r.anchor = a
		if m.Filter != nil {
			f, err := events.ParseFilter(m.Filter.Ops, m.Filter.Glob)
			if err != nil {
				return r, fmt.Errorf("%w: filter: %v", errBad, err)
			}
			r.filter, r.ops, r.glob = f, m.Filter.Ops, m.Filter.Glob
		}
	case TypeUnsubscribe:
		if err := checkID("id", m.ID); err != nil {
			return r, err
		}
	case TypeAck:
		if err := checkID("sub", m.Sub); err != nil {
			return r, err
		}
		if err := checkLen("entry", m.Entry, maxEntryBytes); err != nil {
			return r, err
		}
	case "":
		return r, fmt.Errorf("%w: missing type", errBad)
	default:
		return r, fmt.Errorf("%w: unknown type %q (want subscribe, unsubscribe or ack)", errBad, clip(m.Type))
	}
	return r, nil
}

// jsonKind names, for a client, the JSON a field of Go type typ takes.
func jsonKind(typ string) string {
	switch typ {
	case "string":
		return "a string"
	case "[]string":
		return "an array of strings"
	}
	return "an object"
}

// maxIDBytes bounds a subscription id.
const maxIDBytes = 128

// maxEntryBytes bounds an ack's entry. A `single` delivery's entry is its
// change's id, SCOPE/STREAM#SEQ, whose part before '#' is its durable
// row's anchor's (the stream escaped as there, so at most
// events.MaxAnchorBytes); after the seq may come "/delete" and "@PEER",
// before it "gap-" (a marker's) and "@HOME/" (a delivery from another
// region). The rest leaves room for the seq and two region names.
// maxIDBytes would refuse the entries of every stream name over ~115
// bytes: such a delivery could never be acked.
const maxEntryBytes = events.MaxAnchorBytes + 1024

func checkID(field, s string) error { return checkLen(field, s, maxIDBytes) }

func checkLen(field, s string, most int) error {
	if s == "" || len(s) > most || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s: want 1 to %d bytes of UTF-8", errBad, field, most)
	}
	return nil
}

// clip shortens what a client sent before it is echoed in an error.
func clip(s string) string {
	if len(s) > 32 {
		s = strings.ToValidUTF8(s[:32], "") + "…"
	}
	return s
}

// wirePresence is a "presence" message: an event on a presence anchor,
// read as who joined or left where. A durable subscription's delivery
// carries its mode, and a `single` one its entry and attempt, as an event
// message does: without the entry it could never be acked.
type wirePresence struct {
	Type    string `json:"type"`
	Sub     string `json:"sub"`
	User    string `json:"user"`
	App     string `json:"app"`
	Region  string `json:"region"`
	Op      string `json:"op"` // "join" or "leave"
	TS      int64  `json:"ts"`
	Mode    string `json:"mode,omitempty"`
	Entry   string `json:"entry,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// wireCtl is every other message the gateway sends.
type wireCtl struct {
	Type    string `json:"type"`
	ID      string `json:"id,omitempty"`
	Sub     string `json:"sub,omitempty"`
	User    string `json:"user,omitempty"`
	MaxSubs int    `json:"max_subs,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Subject string `json:"subject,omitempty"`
	Count   int    `json:"count,omitempty"`
	From    int64  `json:"from,omitempty"`
	To      int64  `json:"to,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Entry   string `json:"entry,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// encodeDelivery is the message of one delivery. presenceScope is the
// scope whose events are presence rows (stream = user, key = APP/REGION).
// An event's message is spliced from bytes (enc, see eventEncoder);
// the rarer messages go through json.Marshal.
func encodeDelivery(d events.Delivery, presenceScope string, enc *eventEncoder) []byte {
	if g := d.Gap; g != nil {
		c := wireCtl{Type: TypeGap, Sub: d.Sub, Reason: string(g.Reason), Count: g.Count, From: g.From, To: g.To, Mode: d.Mode, Entry: d.Entry, Attempt: d.Attempt}
		if g.Subject.Scope != "" {
			c.Subject = g.Subject.String()
		}
		return mustJSON(c)
	}
	ev := d.Event
	if ev.Subject.Scope == presenceScope {
		if app, region, ok := strings.Cut(ev.Subject.Key, "/"); ok {
			op := "join"
			if ev.Op == events.OpDelete {
				op = "leave"
			}
			return mustJSON(wirePresence{Type: TypePresence, Sub: d.Sub, User: ev.Subject.Stream, App: app, Region: region, Op: op, TS: ev.TS,
				Mode: d.Mode, Entry: d.Entry, Attempt: d.Attempt})
		}
	}
	return enc.appendEvent(nil, &d)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Strings and numbers always encode.
		panic("eventsws: encode: " + err.Error())
	}
	return b
}
