package persist

import (
	"bytes"
	"encoding/json"
	"testing"
)

func frames(msgs ...Frame) []byte {
	var b []byte
	for i := range msgs {
		b, _ = AppendFrame(b, &msgs[i])
	}
	return b
}

// FuzzDecodeFrames: DecodeFrames never panics, and what it accepts
// re-encodes to frames that decode to the same messages.
func FuzzDecodeFrames(f *testing.F) {
	f.Add(frames(Frame{Value: []byte("a")}, Frame{Seq: 2, Time: 3, Key: "k", TTL: 4, Headers: map[string]string{"h": "v"}, Value: bytes.Repeat([]byte("x"), 300)}))
	f.Add([]byte{})
	f.Add([]byte{0x02, '{', '}', 0x05})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Frame
		err := DecodeFrames(b, 100, func(m *Frame) error {
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
		var back []Frame
		if err := DecodeFrames(again, 0, func(m *Frame) error {
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

// FuzzDeleteResult: a delete answer from the wire (either form) never
// panics and never expands past maxDeleteRunSeqs.
func FuzzDeleteResult(f *testing.F) {
	f.Add([]byte(`{"seqs":[1,2,3]}`))
	f.Add([]byte(`{"runs":[[1,3],[5,9]]}`))
	f.Add([]byte(`{"runs":[[0,18446744073709551615]]}`))
	f.Add(AppendDeleteRuns(nil, []uint64{1, 2, 3, 10, 12, 13}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r DeleteResult
		if err := json.Unmarshal(b, &r); err != nil {
			return
		}
		if len(r.Seqs) > maxDeleteRunSeqs && bytes.Contains(b, []byte(`"runs"`)) {
			t.Fatalf("runs expanded to %d seqs", len(r.Seqs))
		}
	})
}
