package persist

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// FuzzFrameMetaMatchesJSON: the reflection-free frame metadata is byte for
// byte what json.Marshal writes whenever it applies, it applies to every
// message without headers or seqs whose strings need no escaping, and a
// frame decodes (with encoding/json and with the feed decoder) to exactly
// what encoding/json makes of the message, field by field.
func FuzzFrameMetaMatchesJSON(f *testing.F) {
	f.Add(uint64(0), int64(0), "", int64(0), "", false, uint64(0), "", "", "", []byte(nil))
	f.Add(uint64(7), int64(1700000000000), "k1", int64(500), "id-1", true, uint64(0), "set", "", "", []byte(nil))
	f.Add(uint64(1<<63), int64(-5), "a<b>&\"\\", int64(-1), "é", true, uint64(9), "ref", "", "", []byte(nil))
	f.Add(uint64(0), int64(3), "tab\there", int64(0), "", false, uint64(0), "delete", "", "", []byte{1, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255})
	f.Add(uint64(2), int64(0), "k", int64(0), "", false, uint64(0), "", "X-H", "v\xff<", []byte(nil))
	f.Fuzz(func(t *testing.T, seq uint64, tm int64, key string, ttl int64, msgID string, hasPrev bool, prev uint64, op, hdrKey, hdrVal string, seqs []byte) {
		m := &Frame{Seq: seq, Time: tm, Key: key, TTL: ttl, MsgID: msgID, Op: op, Value: []byte("value")}
		if hasPrev {
			m.PrevSeq = &prev
		}
		if hdrKey != "" {
			m.Headers = map[string]string{hdrKey: hdrVal}
		}
		for len(seqs) >= 8 {
			m.Seqs = append(m.Seqs, binary.LittleEndian.Uint64(seqs))
			seqs = seqs[8:]
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		got, ok := appendMetaFast(nil, m)
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("fast %s, json %s", got, want)
		}
		if should := len(m.Headers) == 0 && len(m.Seqs) == 0 && plainStrings(m); ok != should {
			t.Fatalf("fast path taken: %v, want %v, for %+v", ok, should, m)
		}
		frame, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		// What encoding/json makes of m: invalid UTF-8 becomes U+FFFD.
		var wantMsg Frame
		if err := json.Unmarshal(want, &wantMsg); err != nil {
			t.Fatalf("encoding/json cannot read its own %s: %v", want, err)
		}
		wantMsg.Value = m.Value
		for name, decode := range map[string]func([]byte) ([]Frame, error){"DecodeFrames": decodeFramesAll, "decodeFeedBody": decodeFeedBody} {
			msgs, err := decode(frame)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("%s: %d messages, err %v", name, len(msgs), err)
			}
			if d := diffFrame(&msgs[0], &wantMsg); d != nil {
				t.Fatalf("%s of %s differs from encoding/json:\n%v", name, want, d)
			}
		}
	})
}

// TestFrameMetaFallback: messages with headers or seqs take json.Marshal.
func TestFrameMetaFallback(t *testing.T) {
	t.Parallel()
	for _, m := range []*Frame{
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

// TestParseSetManyResults: the setMany reply's fast reader takes the
// server's form of all-success replies and leaves every other one to
// encoding/json.
func TestParseSetManyResults(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		fast bool
	}{
		{`[{"seq":1,"time":5}]`, 1, true},
		{`[{"seq":1,"time":5},{"seq":2,"time":6}]`, 2, true},
		{`[{"seq":1,"time":5},{"seq":2,"time":6}]`, 3, false},
		{`[{"seq":1,"time":5},{"error":"x","code":"reject"}]`, 2, false},
		{`[{"seq":1,"time":5},]`, 1, false},
		{`[{"seq":1,"time":5} ,{"seq":2,"time":6}]`, 2, false},
		{`[]`, 0, true},
		{`[`, 0, false},
		{`{"seq":1,"time":5}`, 1, false},
	} {
		got, ok := parseSetManyResults([]byte(tc.in), tc.n)
		if ok != tc.fast {
			t.Errorf("%s: fast %v, want %v", tc.in, ok, tc.fast)
			continue
		}
		if ok {
			checkSetManyAgrees(t, tc.in, got)
		}
	}
}

// FuzzParseSetManyResults: whatever the fast reader accepts, encoding/json
// reads the same way.
func FuzzParseSetManyResults(f *testing.F) {
	f.Add([]byte(`[{"seq":1,"time":5},{"seq":2,"time":6}]`), 2)
	f.Add([]byte(`[{"seq":1,"time":5},{"error":"x","code":"reject"}]`), 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		if got, ok := parseSetManyResults(b, n); ok {
			checkSetManyAgrees(t, string(b), got)
		}
	})
}

func checkSetManyAgrees(t *testing.T, in string, got []SetManyResult) {
	t.Helper()
	var want []SetManyResult
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatalf("%s: fast reader accepted what encoding/json refuses: %v", in, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: fast %d results, encoding/json %d", in, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Time != want[i].Time || want[i].Err != nil {
			t.Fatalf("%s: result %d fast %+v, encoding/json %+v", in, i, got[i], want[i])
		}
	}
}
