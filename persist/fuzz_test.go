package persist

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// headerFromText reads "Name: value" lines into a header, the way a fuzzer
// can shape arbitrary header sets.
func headerFromText(s string) nats.Header {
	h := nats.Header{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h
}

func frames(msgs ...Message) []byte {
	var b []byte
	for i := range msgs {
		b, _ = AppendFrame(b, &msgs[i])
	}
	return b
}

// FuzzDecodeRequest: any subject, headers and body decode to a request or to
// a bad-request / too-large *Error; never a panic, never another code.
func FuzzDecodeRequest(f *testing.F) {
	prev := uint64(3)
	seeds := []struct {
		subject, hdr string
		body         []byte
	}{
		{"persist.hub.api.0", "Sy-Cmd: set\nSy-Stream: s\nSy-Key: k\nX-User: u", []byte("value")},
		{"persist.hub.api.0", "Sy-Cmd: set\nSy-Stream: s\nSy-Key: k\nSy-Prev-Seq: 0\nSy-Msg-Id: m\nSy-Ttl: 1000", nil},
		{"persist.hub.api.0", "Sy-Cmd: setMany\nSy-Stream: s", frames(Message{Value: []byte("a")}, Message{Key: "k", PrevSeq: &prev, Headers: map[string]string{"h": "v"}})},
		{"persist.hub.api.0", "Sy-Cmd: get\nSy-Stream: s\nSy-Seq: 1", nil},
		{"persist.account-1.api.0", "Sy-Cmd: getAll\nSy-Stream: s\nSy-Start-Seq: 1\nSy-End-Seq: 9\nSy-Limit: 5\nSy-Ephemeral: true", nil},
		{"persist.hub.api.0", "Sy-Cmd: delete\nSy-Stream: s\nSy-Seqs: 1,2,3", nil},
		{"persist.hub.api.0", "Sy-Cmd: delete\nSy-Stream: s\nSy-Up-To: 7", nil},
		{"persist.hub.api.0", "Sy-Cmd: config\nSy-Stream: s", []byte(`{"max_msgs": 10}`)},
		{"persist.hub.api.0", "Sy-Cmd: keys\nSy-Stream: ../../etc", nil},
		{"persist.HUB.api.0", "Sy-Cmd: nope", nil},
		{"persist.hub.api.0", "Sy-Cmd: setMany\nSy-Stream: s", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	}
	for _, s := range seeds {
		f.Add(s.subject, s.hdr, s.body)
	}
	f.Fuzz(func(t *testing.T, subject, hdr string, body []byte) {
		m := &nats.Msg{Subject: subject, Header: headerFromText(hdr), Data: body}
		r, err := decodeRequest(m)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Code != CodeBadRequest && e.Code != CodeTooLarge) {
				t.Fatalf("decode error %v (%T) is not bad-request or too-large", err, err)
			}
			return
		}
		if r.cmd == "" || validStreamName(r.stream) != nil {
			t.Fatalf("accepted request without a valid command or stream: %+v", r)
		}
		// Whatever name was accepted maps to a file inside the data directory.
		if _, err := streamPath("/data", r.scope, r.stream); err != nil {
			t.Fatalf("accepted stream %q does not map: %v", r.stream, err)
		}
		for _, op := range r.ops {
			if len(op.Key) > MaxKeyBytes || op.TTL < 0 || (op.PrevSeq != nil && op.Key == "") {
				t.Fatalf("accepted bad op %+v", op)
			}
		}
	})
}

// FuzzDecodeFrames: DecodeFrames never panics, and what it accepts
// re-encodes to frames that decode to the same messages.
func FuzzDecodeFrames(f *testing.F) {
	f.Add(frames(Message{Value: []byte("a")}, Message{Seq: 2, Time: 3, Key: "k", TTL: 4, Headers: map[string]string{"h": "v"}, Value: bytes.Repeat([]byte("x"), 300)}))
	f.Add([]byte{})
	f.Add([]byte{0x02, '{', '}', 0x05})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Message
		err := DecodeFrames(b, 100, func(m *Message) error {
			got = append(got, *m)
			return nil
		})
		if err != nil {
			if c := CodeOf(err); c != CodeBadRequest && c != CodeTooLarge {
				t.Fatalf("code %s for %v", c, err)
			}
			return
		}
		again := frames(got...)
		var back []Message
		if err := DecodeFrames(again, 0, func(m *Message) error {
			back = append(back, *m)
			return nil
		}); err != nil {
			t.Fatalf("re-encoded frames do not decode: %v", err)
		}
		if len(back) != len(got) {
			t.Fatalf("%d messages, %d after a round trip", len(got), len(back))
		}
		for i := range got {
			if !bytes.Equal(got[i].Value, back[i].Value) || got[i].Seq != back[i].Seq || got[i].Key != back[i].Key {
				t.Fatalf("message %d changed in a round trip", i)
			}
		}
	})
}

func TestStreamFileNames(t *testing.T) {
	a, b := streamFileName("Case"), streamFileName("case")
	if strings.EqualFold(a, b) {
		t.Fatalf("%q and %q collide on a case-insensitive filesystem", a, b)
	}
	for _, n := range []string{"..", "/", "a/b", "\x00", strings.Repeat("é", 2000)} {
		f := streamFileName(n)
		if strings.ContainsAny(f, "/\\\x00") || strings.HasPrefix(f, ".") || len(f) > readableMax+1+hashHexLen+len(fileSuffix) {
			t.Fatalf("%q maps to unsafe file name %q", n, f)
		}
	}
	if _, err := streamPath("/data", "Bad", "s"); CodeOf(err) != CodeBadRequest {
		t.Fatalf("bad scope: %v", err)
	}
}
