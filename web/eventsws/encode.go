package eventsws

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/events"
)

// The "event" message is most of what a gateway writes, and one change
// goes to every subscription it matches with only the subscription's id,
// its coalesced count and a durable delivery's fields told apart. So the
// message is built from bytes, not by json.Marshal: the part common to
// every subscription (id, subject, op, seq, ts, value, enc) is encoded
// once per change and spliced between each delivery's own fields. The
// bytes are those json.Marshal makes of the message's struct (wireEvent,
// in the tests, where FuzzEncodeDelivery holds the two together), so
// docs/events.md and events.js read them as before.

// eventEncoder keeps the common part of the last event it encoded. The
// router's loop makes one change's deliveries one after the other, so
// one entry catches them; a change whose fields differ from the entry's
// in any way is encoded anew, so an entry is never reused for another
// change, whatever the pointers. It is safe for concurrent use (an
// entry, once stored, is never modified).
type eventEncoder struct {
	last atomic.Pointer[eventCommon]
}

// eventCommon is one event's fields that go in the common part, and the
// part: `"id":…,"subject":…,"op":…,"seq":…,"ts":…[,"value":…][,"enc":…]`.
type eventCommon struct {
	ev  events.Event // Coalesced is not in the part, and not compared
	mid []byte
}

func (c *eventCommon) same(ev *events.Event) bool {
	return c.ev.ID == ev.ID && c.ev.Subject == ev.Subject && c.ev.Op == ev.Op && c.ev.Seq == ev.Seq && c.ev.TS == ev.TS &&
		bytes.Equal(c.ev.Value, ev.Value) && (c.ev.Value == nil) == (ev.Value == nil)
}

// common returns the common part of ev, from the entry when it is ev's.
func (e *eventEncoder) common(ev *events.Event) []byte {
	if c := e.last.Load(); c != nil && c.same(ev) {
		return c.mid
	}
	c := &eventCommon{ev: *ev, mid: appendEventCommon(nil, ev)}
	e.last.Store(c)
	return c.mid
}

func appendEventCommon(b []byte, ev *events.Event) []byte {
	b = append(b, `"id":`...)
	b = appendJSONString(b, ev.ID)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, ev.Subject.String())
	b = append(b, `,"op":`...)
	b = appendJSONString(b, string(ev.Op))
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ev.TS, 10)
	switch {
	case len(ev.Value) == 0: // omitempty: a delete, or a set of nothing
	case utf8.Valid(ev.Value):
		b = append(b, `,"value":`...)
		b = appendJSONString(b, ev.Value)
	default:
		b = append(b, `,"value":"`...)
		b = base64.StdEncoding.AppendEncode(b, ev.Value) // no byte of base64 needs escaping
		b = append(b, `","enc":"base64"`...)
	}
	return b
}

// appendEvent is the "event" message of d (d.Event set).
func (e *eventEncoder) appendEvent(b []byte, d *events.Delivery) []byte {
	mid := e.common(d.Event)
	if b == nil {
		b = make([]byte, 0, len(mid)+len(d.Sub)+len(d.Entry)+64)
	}
	b = append(b, `{"type":"event","sub":`...)
	b = appendJSONString(b, d.Sub)
	b = append(b, ',')
	b = append(b, mid...)
	b = append(b, `,"coalesced":`...)
	b = strconv.AppendInt(b, int64(d.Event.Coalesced), 10)
	if d.Mode != "" {
		b = append(b, `,"mode":`...)
		b = appendJSONString(b, d.Mode)
	}
	if d.Entry != "" {
		b = append(b, `,"entry":`...)
		b = appendJSONString(b, d.Entry)
	}
	if d.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(d.Attempt), 10)
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes a string (HTML
// characters escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped), so that the bytes equal json.Marshal's.
func appendJSONString[T string | []byte](b []byte, s T) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control bytes, and <, >, &
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		// A few bytes at most made a string: it stays on the stack.
		n := min(len(s)-i, utf8.UTFMax)
		r, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// htmlSafe is the ASCII bytes encoding/json writes as they are: printable,
// but not ", \, <, > or &.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
