package persist

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzFrameMetaMatchesJSON: the reflection-free frame metadata is byte for
// byte what json.Marshal writes, whenever it applies.
func FuzzFrameMetaMatchesJSON(f *testing.F) {
	f.Add(uint64(0), int64(0), "", int64(0), "", false, uint64(0), "")
	f.Add(uint64(7), int64(1700000000000), "k1", int64(500), "id-1", true, uint64(0), "set")
	f.Add(uint64(1<<63), int64(-5), "a<b>&\"\\", int64(-1), "é", true, uint64(9), "ref")
	f.Add(uint64(0), int64(3), "tab\there", int64(0), "", false, uint64(0), "delete")
	f.Fuzz(func(t *testing.T, seq uint64, tm int64, key string, ttl int64, msgID string, hasPrev bool, prev uint64, op string) {
		m := &Message{Seq: seq, Time: tm, Key: key, TTL: ttl, MsgID: msgID, Op: op}
		if hasPrev {
			m.PrevSeq = &prev
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Skip()
		}
		got, ok := appendMetaFast(nil, m)
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("fast %s, json %s", got, want)
		}
		if !ok && plainJSON(key) && plainJSON(msgID) && plainJSON(op) {
			t.Fatalf("fast path refused plain strings %q %q %q", key, msgID, op)
		}
		frame, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(key) || !utf8.ValidString(msgID) || !utf8.ValidString(op) {
			return // JSON replaces invalid UTF-8; nothing to round-trip
		}
		if err := DecodeFrames(frame, 0, func(d *Message) error {
			if d.Seq != seq || d.Key != key || d.MsgID != msgID || d.Op != op || d.TTL != ttl || (d.PrevSeq != nil) != hasPrev {
				t.Fatalf("round trip %+v from %+v", d, m)
			}
			return nil
		}); err != nil {
			t.Fatalf("decode: %v", err)
		}
	})
}

// TestFrameMetaFallback: messages with headers or seqs take json.Marshal.
func TestFrameMetaFallback(t *testing.T) {
	for _, m := range []*Message{
		{Seq: 1, Headers: map[string]string{"a": "b"}},
		{Op: FeedOpDelete, Seqs: []uint64{1, 2}},
		{Key: "x\"y"},
	} {
		if _, ok := appendMetaFast(nil, m); ok {
			t.Errorf("fast path taken for %+v", m)
		}
		frame, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if !bytes.Contains(frame, want) {
			t.Errorf("frame %q lacks %s", frame, want)
		}
	}
}

// TestParseSetResult: the set reply's fast reader agrees with encoding/json
// on what it accepts and leaves every other form to it.
func TestParseSetResult(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{`{"seq":1,"time":1700000000000}`, true},
		{`{"seq":18446744073709551615,"time":-5}`, true},
		{`{"time":5,"seq":1}`, false},
		{`{"seq":1,"time":5,"x":1}`, false},
		{`{"seq": 1,"time":5}`, false},
		{`{"seq":-1,"time":5}`, false},
		{`{"seq":1}`, false},
		{`{"seq":1,"time":}`, false},
		{`{"seq":1,"time":+5}`, false},
		{`{"seq":01,"time":5}`, false},
		{``, false},
	} {
		got, ok := parseSetResult([]byte(tc.in))
		if ok != tc.fast {
			t.Errorf("%s: fast %v, want %v", tc.in, ok, tc.fast)
			continue
		}
		if !ok {
			continue
		}
		var want SetResult
		if err := json.Unmarshal([]byte(tc.in), &want); err != nil || got != want {
			t.Errorf("%s: fast %+v, encoding/json %+v (%v)", tc.in, got, want, err)
		}
	}
}
