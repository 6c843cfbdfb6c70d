package eventsws

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/jsonstr"
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
	b = jsonstr.Append(b, ev.ID, true)
	b = append(b, `,"subject":`...)
	b = jsonstr.Append(b, ev.Subject.String(), true)
	b = append(b, `,"op":`...)
	b = jsonstr.Append(b, string(ev.Op), true)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ev.TS, 10)
	switch {
	case len(ev.Value) == 0: // omitempty: a delete, or a set of nothing
	case utf8.Valid(ev.Value):
		b = append(b, `,"value":`...)
		b = jsonstr.Append(b, ev.Value, true)
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
	b = jsonstr.Append(b, d.Sub, true)
	b = append(b, ',')
	b = append(b, mid...)
	b = append(b, `,"coalesced":`...)
	b = strconv.AppendInt(b, int64(d.Event.Coalesced), 10)
	if d.Mode != "" {
		b = append(b, `,"mode":`...)
		b = jsonstr.Append(b, d.Mode, true)
	}
	if d.Entry != "" {
		b = append(b, `,"entry":`...)
		b = jsonstr.Append(b, d.Entry, true)
	}
	if d.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(d.Attempt), 10)
	}
	return append(b, '}')
}
