package forward

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"from":"eu","items":[]}`))
	f.Add(batchBody("f", del("s1", "a"), &Ack{SubID: "s", EntryID: "e"}, &Watch{Op: "add", Token: "t"},
		&Bump{Scope: "presence"}, &Event{Family: "kv", ID: "i", KV: &KVChange{Op: "set", Value: []byte(`{"v":1}`)}}))
	f.Add([]byte(`{"from":"eu","items":[{"kind":"nope"},{"kind":"delivery","subId":"s","event":{"op":"gap"},"appUid":null}]}`))
	f.Add([]byte(`{"from":"eu","epoch":1764000000000000000,"seq":7,"base":5,"items":[{"kind":"ack","subId":"s","entryId":"e"}]}`))
	f.Add([]byte(`{"from":"eu","epoch":-1,"seq":1.5,"base":0,"items":[]}`))
	f.Add([]byte(`{"from":1}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeBatch(body)
		if err != nil {
			return
		}
		if b.checkOrder() != "" {
			t.Fatalf("accepted numbering epoch %d seq %d base %d", b.Epoch, b.Seq, b.Base)
		}
		// Whatever decodes re-encodes to a body that decodes the same.
		re := batchBody("f", b.Items...)
		if b.Seq != 0 {
			re = bytes.Replace(re, []byte(`,"items":[`),
				fmt.Appendf(nil, `,"epoch":%d,"seq":%d,"base":%d,"items":[`, b.Epoch, b.Seq, b.Base), 1)
		}
		again, err := DecodeBatch(re)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if len(again.Items) != len(b.Items) || again.Unknown != 0 || again.Epoch != b.Epoch || again.Seq != b.Seq || again.Base != b.Base {
			t.Fatalf("%+v, then %+v", b, again)
		}
		for _, it := range b.Items {
			if !json.Valid(AppendJSON(nil, it)) {
				t.Fatalf("invalid encoding of %#v", it)
			}
		}
	})
}

func FuzzParseAuth(f *testing.F) {
	const sum = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	f.Add("eu", "us", "3", "1764000000", "1", sum, sum)
	f.Add("", "", "", "", "", "", "")
	f.Add("eu", "us", "1", "+1", "-1", "zz", "zz")
	f.Add("eu", "", "2", "1764000000", "1", sum, sum)
	f.Add("eu", "us", "3", "99999999999999999999", "18446744073709551615", sum, sum)
	f.Add("eu", "us", "3", "9223372036854775807", "18446744073709551616", sum, sum)
	f.Add("eu", "us", "3", "0", "007", strings.ToUpper(sum), sum)
	f.Fuzz(func(t *testing.T, peer, to, version, ts, nonce, bodySum, sig string) {
		h := http.Header{}
		h.Set(HeaderPeer, peer)
		h.Set(HeaderTo, to)
		h.Set(HeaderVersion, version)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderNonce, nonce)
		h.Set(HeaderBodySHA256, bodySum)
		h.Set(HeaderSignature, sig)
		a, err := parseAuth(h, true)
		if err != nil {
			return
		}
		// Accepted values have one spelling: the one that was signed, the
		// shortest decimal of the value and the lowercase hex of the hash.
		if a.tsText != h.Get(HeaderTimestamp) || a.nonceText != h.Get(HeaderNonce) || a.sumText != h.Get(HeaderBodySHA256) || a.peer == "" || a.to == "" {
			t.Fatalf("parsed %+v from %q %q %q %q", a, peer, ts, nonce, bodySum)
		}
		if a.version != ProtocolVersion || a.ts < 0 ||
			strconv.FormatInt(a.ts, 10) != a.tsText || strconv.FormatUint(a.nonce, 10) != a.nonceText ||
			hex.EncodeToString(a.bodySum[:]) != a.sumText {
			t.Fatalf("parsed %+v from %q %q %q %q %q", a, version, ts, nonce, bodySum, sig)
		}
		// The canonical string reads back into the same fields: after the
		// prefix and the two peer ids (header values, which net/http never
		// sends with a newline), four fields none of which can hold a
		// newline, so no value can run into the next.
		if strings.ContainsAny(a.peer+a.to, "\n") {
			return
		}
		c := string(canonical(nil, a.peer, a.to, a.tsText, a.nonceText, 42, a.sumText))
		rest, ok := strings.CutPrefix(c, "sy-forward/"+ProtocolVersion+"\n"+a.peer+"\n"+a.to+"\n")
		fields := strings.Split(rest, "\n")
		if !ok || len(fields) != 4 || fields[0] != a.tsText || fields[1] != a.nonceText || fields[2] != "42" || fields[3] != a.sumText {
			t.Fatalf("canonical string of %+v is %q", a, c)
		}
	})
}

// FuzzScanObject checks the top-level scanner, used on event payloads,
// against encoding/json: it never panics, and on valid objects it finds
// the same "op" as a decoder would when the key is unique.
func FuzzScanObject(f *testing.F) {
	f.Add([]byte(`{"id":"a","op":"gap","data":"x\"y"}`))
	f.Add([]byte(`{"a":{"op":"no"},"op":"write"}`))
	f.Add([]byte(`{"op":"g\u0061p"}`))
	f.Add([]byte(`{"x":[1,{"y":"}"}],"op" : "gap" }`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := topLevel(b, "op")
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil {
			return
		}
		n := 0
		scanObject(b, func(k, _ []byte) bool {
			if string(k) == "op" {
				n++
			}
			return true
		})
		want, ok := m["op"]
		if n != 1 || !ok {
			return
		}
		if string(trimJSONSpace(got)) != string(trimJSONSpace(want)) {
			t.Fatalf("op = %q, decoder says %q in %s", got, want, b)
		}
	})
}

func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
