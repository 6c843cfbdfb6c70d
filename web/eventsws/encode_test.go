package eventsws

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/events"
)

// wireEvent is an "event" message as json.Marshal writes it: the
// reference the spliced encoding (eventEncoder) is held to.
type wireEvent struct {
	Type      string `json:"type"`
	Sub       string `json:"sub"`
	ID        string `json:"id"`
	Subject   string `json:"subject"`
	Op        string `json:"op"`
	Seq       uint64 `json:"seq"`
	TS        int64  `json:"ts"`
	Value     string `json:"value,omitempty"`
	Enc       string `json:"enc,omitempty"` // "base64" when the value is not UTF-8
	Coalesced int    `json:"coalesced"`
	Mode      string `json:"mode,omitempty"`    // a durable subscription's
	Entry     string `json:"entry,omitempty"`   // a `single` delivery's: ack it
	Attempt   int    `json:"attempt,omitempty"` // a `single` delivery's: 2 and more after a lease ran out
}

// marshalEvent is what the gateway wrote before the spliced encoding.
func marshalEvent(d events.Delivery) []byte {
	ev := d.Event
	w := wireEvent{Type: TypeEvent, Sub: d.Sub, ID: ev.ID, Subject: ev.Subject.String(), Op: string(ev.Op), Seq: ev.Seq, TS: ev.TS, Coalesced: ev.Coalesced,
		Mode: d.Mode, Entry: d.Entry, Attempt: d.Attempt}
	if utf8.Valid(ev.Value) {
		w.Value = string(ev.Value)
	} else {
		w.Value, w.Enc = base64.StdEncoding.EncodeToString(ev.Value), "base64"
	}
	return mustJSON(w)
}

// TestEncodeDeliveryTricky: the spliced event message is json.Marshal's,
// byte for byte, for ids, subjects and values that need escaping; a
// second subscription of the same change reuses the common part and
// still gets its own id and count; a different change is not mistaken
// for the cached one.
func TestEncodeDeliveryTricky(t *testing.T) {
	tricky := []string{"", "plain", `q"uote`, `back\slash`, "<b>&amp;</b>", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é ü 日本 🎉", "\u2028\u2029", "bad\xffutf8\xc3", "\xed\xa0\x80", strings.Repeat("x", 300)}
	var enc eventEncoder
	for _, s := range tricky {
		for _, v := range [][]byte{nil, []byte(s), {0xff, 0x00, 0x80}} {
			ev := &events.Event{ID: "p/s#" + s, Subject: events.Subject{Scope: "p", Stream: "s", Key: s}, Op: events.OpSet, Seq: 42, TS: 1796222249056, Value: v, Coalesced: 1}
			for _, d := range []events.Delivery{
				{Sub: s, Event: ev},
				{Sub: "other " + s, Event: ev, Mode: events.ModeSingle, Entry: s, Attempt: 3},
				{Sub: "b", Event: ev, Mode: events.ModeBroadcast},
			} {
				got, want := encodeDelivery(d, "presence", &enc), marshalEvent(d)
				if !bytes.Equal(got, want) {
					t.Errorf("sub %q value %q:\n got  %s\n want %s", d.Sub, v, got, want)
				}
			}
		}
	}
	// Same pointer, different content: not the cached part.
	ev := &events.Event{ID: "p/s#1", Subject: events.Subject{Scope: "p", Stream: "s", Key: "k"}, Op: events.OpSet, Seq: 1, TS: 1, Value: []byte("a"), Coalesced: 1}
	_ = encodeDelivery(events.Delivery{Sub: "1", Event: ev}, "presence", &enc)
	ev2 := *ev
	ev2.Value = []byte("b")
	ev2.Coalesced = 7
	d := events.Delivery{Sub: "1", Event: &ev2}
	if got, want := encodeDelivery(d, "presence", &enc), marshalEvent(d); !bytes.Equal(got, want) {
		t.Errorf("a changed value:\n got  %s\n want %s", got, want)
	}
	del := &events.Event{ID: "p/s#1", Subject: ev.Subject, Op: events.OpDelete, Seq: 1, TS: 1, Coalesced: 2}
	d = events.Delivery{Sub: "1", Event: del}
	if got, want := encodeDelivery(d, "presence", &enc), marshalEvent(d); !bytes.Equal(got, want) {
		t.Errorf("a delete:\n got  %s\n want %s", got, want)
	}
}

// FuzzEncodeDelivery: for any id, subject, value and delivery fields the
// spliced event message equals json.Marshal's, first from a fresh
// encoder and then from one holding the change's common part.
func FuzzEncodeDelivery(f *testing.F) {
	f.Add("sub", "p/s#1", "key", []byte("value"), uint64(1), int64(1796222249056), 1, "", "", 0, false)
	f.Add("<s>", "p/s#\u2028", "a/\"b\"", []byte{0xff, 0xfe}, uint64(1<<63), int64(-1), 1<<40, "single", "e\x00", 2, true)
	f.Add("é", "", "\\", []byte(nil), uint64(0), int64(0), 0, "broadcast", "", -5, false)
	f.Fuzz(func(t *testing.T, sub, id, key string, value []byte, seq uint64, ts int64, coalesced int, mode, entry string, attempt int, del bool) {
		ev := &events.Event{ID: id, Subject: events.Subject{Scope: "p", Stream: "s", Key: key}, Op: events.OpSet, Seq: seq, TS: ts, Value: value, Coalesced: coalesced}
		if del {
			ev.Op, ev.Value = events.OpDelete, nil
		}
		d := events.Delivery{Sub: sub, Event: ev, Mode: mode, Entry: entry, Attempt: attempt}
		want := marshalEvent(d)
		var enc eventEncoder
		if got := encodeDelivery(d, "presence", &enc); !bytes.Equal(got, want) {
			t.Fatalf("fresh:\n got  %s\n want %s", got, want)
		}
		d.Sub += "2"
		want = marshalEvent(d)
		if got := encodeDelivery(d, "presence", &enc); !bytes.Equal(got, want) {
			t.Fatalf("cached:\n got  %s\n want %s", got, want)
		}
		if !json.Valid(want) {
			t.Fatalf("invalid JSON %s", want)
		}
	})
}

// BenchmarkEncodeEvent: one change delivered to 50 subscriptions, the
// spliced encoding against json.Marshal per subscription (the anchor).
func BenchmarkEncodeEvent(b *testing.B) {
	ev := &events.Event{ID: "bench/shared#123456", Subject: events.Subject{Scope: "bench", Stream: "shared", Key: "m123456"}, Op: events.OpSet,
		Seq: 123456, TS: 1796222249056, Value: bytes.Repeat([]byte("x"), 128), Coalesced: 1}
	subs := make([]string, 50)
	for i := range subs {
		subs[i] = "sub-" + strings.Repeat("a", i%8)
	}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, s := range subs {
				_ = marshalEvent(events.Delivery{Sub: s, Event: ev})
			}
		}
	})
	b.Run("spliced", func(b *testing.B) {
		b.ReportAllocs()
		var enc eventEncoder
		for b.Loop() {
			enc.last.Store(nil) // a new change each round
			for _, s := range subs {
				_ = encodeDelivery(events.Delivery{Sub: s, Event: ev}, "presence", &enc)
			}
		}
	})
}
