package eventsws

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func basic(user, pw string) string { return base64.StdEncoding.EncodeToString([]byte(user + ":" + pw)) }

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{`{"type":"subscribe","id":"1","anchor":"p/s/a/b","filter":{"ops":["set"],"glob":"**/*.txt"}}`, ""},
		{`{"type":"subscribe","id":"1","anchor":"p/s"}`, ""},
		{`{"type":"unsubscribe","id":"1"}`, ""},
		{`{"type":"ack","sub":"1","entry":"p/s#4"}`, ""},
		{`{"type":"subscribe","anchor":"p/s"}`, "id: want 1 to 128"},
		{`{"type":"subscribe","id":"1","anchor":"p"}`, "anchor"},
		{`{"type":"subscribe","id":"1","anchor":"p/s","filter":{"glob":"` + strings.Repeat("a/", 20) + `"}}`, "filter"},
		{`{"type":"ack","sub":"1"}`, "entry"},
		{`{"type":"` + strings.Repeat("x", 100) + `"}`, "unknown type"},
		{`{}`, "missing type"},
		{`[1]`, "not a JSON message object"},
		{`{"type":"subscribe","id":"1","anchor":"p/s","filter":{"ops":"set"}}`, "filter.ops: a JSON string, want an array of strings"},
		{"{\"type\":\"unsubscribe\",\"id\":\"\xff\"}", "not valid UTF-8"},
		// encoding/json reads a lone surrogate escape as U+FFFD, so these
		// two ids would both be "a\ufffd" (and the anchor key "\ufffd").
		{`{"type":"unsubscribe","id":"a\udcff"}`, "surrogate"},
		{`{"type":"unsubscribe","id":"a\ud800"}`, "surrogate"},
		{`{"type":"subscribe","id":"1","anchor":"p/s/\udc00"}`, "surrogate"},
		{`{"type":"unsubscribe","id":"\ud83d\ude00"}`, ""},
		{`{"type":"unsubscribe","id":"a\ufffd"}`, ""},
		{`{"type":"ack","sub":"1","entry":"p/` + strings.Repeat("s", 2000) + `#4"}`, ""},
		{`{"type":"ack","sub":"1","entry":"` + strings.Repeat("s", maxEntryBytes+1) + `"}`, "entry: want 1 to"},
	} {
		_, err := decodeRequest([]byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err != "" && (err == nil || !errors.Is(err, errBad) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error saying %q", tc.in, err, tc.err)
		case err != nil && len(err.Error()) > 400:
			t.Errorf("%s: an error of %d bytes echoes too much", tc.in, len(err.Error()))
		}
	}
}

// FuzzDecodeRequest: no client message makes the decoder panic, and what
// it accepts is a request with its fields in bounds.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"type":"subscribe","id":"1","anchor":"p/s/a","filter":{"ops":["delete"],"glob":"*"}}`))
	f.Add([]byte(`{"type":"ack","sub":"s","entry":"e"}`))
	f.Add([]byte(`{"type":"unsubscribe","id":"\u00ff"}`))
	f.Add([]byte(`{"type":"unsubscribe","id":"a\udcff"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			if !errors.Is(err, errBad) {
				t.Fatalf("error %v does not wrap errBad", err)
			}
			return
		}
		most := maxIDBytes
		if r.typ == TypeAck { // its id is the entry
			most = maxEntryBytes
		}
		// Nothing encoding/json converted: a name reads as it was sent.
		if strings.ContainsRune(r.id+r.sub, '\ufffd') && !strings.Contains(strings.ToLower(string(b)), "fffd") && !strings.Contains(string(b), "\ufffd") {
			t.Fatalf("accepted id %q (sub %q) holding a U+FFFD the client did not send: %q", r.id, r.sub, b)
		}
		if r.id == "" || len(r.id) > most || (r.typ == TypeAck && (r.sub == "" || len(r.sub) > maxIDBytes)) {
			t.Fatalf("accepted id %q (sub %q)", r.id, r.sub)
		}
		if r.typ == TypeSubscribe && r.anchor.Scope == "" {
			t.Fatalf("accepted a subscribe without an anchor: %+v", r)
		}
	})
}
