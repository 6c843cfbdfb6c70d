package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
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

func frames(msgs ...persist.Frame) []byte {
	var b []byte
	for i := range msgs {
		b, _ = persist.AppendFrame(b, &msgs[i])
	}
	return b
}

// FuzzDecodeRequest: any subject, headers and body decode to a request or to
// a bad-request / too-large *persist.Error; never a panic, never another code.
func FuzzDecodeRequest(f *testing.F) {
	prev := uint64(3)
	seeds := []struct {
		subject, hdr string
		body         []byte
	}{
		{"persist.hub.api.0", "Sy-Cmd: set\nSy-Stream: s\nSy-Key: k\nX-User: u", []byte("value")},
		{"persist.hub.api.0", "Sy-Cmd: set\nSy-Stream: s\nSy-Key: k\nSy-Prev-Seq: 0\nSy-Msg-Id: m\nSy-Ttl: 1000", nil},
		{"persist.hub.api.0", "Sy-Cmd: setMany\nSy-Stream: s", frames(persist.Frame{Value: []byte("a")}, persist.Frame{Key: "k", PrevSeq: &prev, Headers: map[string]string{"h": "v"}})},
		{"persist.hub.api.0", "Sy-Cmd: get\nSy-Stream: s\nSy-Seq: 1", nil},
		{"persist.hub.api.0", "Sy-Cmd: get\nSy-Stream: s\nSy-Seq: 1\nSy-Deadline: 1796191299994", nil},
		{"persist.hub.api.0", "Sy-Cmd: keys\nSy-Stream: s\nSy-Deadline: 9223372036854775808", nil},
		{"persist.account-1.api.0", "Sy-Cmd: getAll\nSy-Stream: s\nSy-Start-Seq: 1\nSy-End-Seq: 9\nSy-Limit: 5\nSy-Ephemeral: true", nil},
		{"persist.hub.api.0", "Sy-Cmd: delete\nSy-Stream: s\nSy-Seqs: 1,2,3", nil},
		{"persist.hub.api.0", "Sy-Cmd: delete\nSy-Stream: s\nSy-Up-To: 7", nil},
		{"persist.hub.api.0", "Sy-Cmd: delete\nSy-Stream: s\nSy-Seq: 4\nSy-Msg-Id: d-1", nil},
		{"persist.hub.api.0", "Sy-Cmd: config\nSy-Stream: s", []byte(`{"max_msgs": 10}`)},
		{"persist.hub.api.0", "Sy-Cmd: config\nSy-Stream: s", []byte(`{"discard_policy":"sometimes"}`)},
		{"persist.hub.api.0", "Sy-Cmd: set\nSy-Stream: s\nX-A: a\x01b\nX(B: v", []byte("v")},
		{"persist.hub.api.0", "Sy-Cmd: keys\nSy-Stream: ../../etc", nil},
		{"persist.HUB.api.0", "Sy-Cmd: nope", nil},
		{"persist.hub.api.0", "Sy-Cmd: setMany\nSy-Stream: s", frames(persist.Frame{Key: " sp "}, persist.Frame{Key: "a\nb"})},
		{"persist.hub.api.0", "Sy-Cmd: get\nSy-Stream: a\tb\nSy-Key: k\x00", nil},
		{"persist.hub.api.0", "Sy-Cmd: setMany\nSy-Stream: s", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	}
	for _, s := range seeds {
		f.Add(s.subject, s.hdr, s.body)
	}
	f.Fuzz(func(t *testing.T, subject, hdr string, body []byte) {
		m := &nats.Msg{Subject: subject, Header: headerFromText(hdr), Data: body}
		r, err := decodeRequest(m)
		if err != nil {
			var e *persist.Error
			if !errors.As(err, &e) || (e.Code != persist.CodeBadRequest && e.Code != persist.CodeTooLarge) {
				t.Fatalf("decode error %v (%T) is not bad-request or too-large", err, err)
			}
			return
		}
		if !r.deadline.IsZero() && r.deadline.UnixMilli() < 0 {
			t.Fatalf("accepted a deadline before 1970: %v", r.deadline)
		}
		if r.cmd == "" || persist.ValidStreamName(r.stream) != nil || persist.ValidKey(r.key) != nil {
			t.Fatalf("accepted request without a valid command, stream or key: %+v", r)
		}
		// Whatever name was accepted maps to a file inside the data directory.
		if _, err := store.StreamPath("/data", r.scope, r.stream); err != nil {
			t.Fatalf("accepted stream %q does not map: %v", r.stream, err)
		}
		// A config patch is checked on arrival: one the worker would
		// refuse on a new stream must not get that far (it would create
		// the stream first).
		if r.configPatch != nil {
			if _, err := store.MergeConfig(persist.DefaultConfig(), r.configPatch); err != nil {
				t.Fatalf("accepted config patch %q: %v", r.configPatch, err)
			}
		}
		for _, op := range r.ops {
			if persist.ValidKey(op.Key) != nil || op.TTL < 0 || (op.PrevSeq != nil && op.Key == "") {
				t.Fatalf("accepted bad op %+v", op)
			}
			// set and setMany hold user headers to one rule.
			for k, v := range op.Headers {
				if err := persist.CheckHeader(k, v); err != nil {
					t.Fatalf("accepted user header %q: %q: %v", k, v, err)
				}
			}
		}
	})
}
