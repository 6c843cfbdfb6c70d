package persist

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParseMetaFastTakesEncoderOutput: what the frame encoders write for
// feed frames takes the fast path and reads back the same.
func TestParseMetaFastTakesEncoderOutput(t *testing.T) {
	prev := uint64(7)
	cases := []Frame{
		{Seq: 12, Time: 1700000000123, Key: "k42"},
		{Seq: 1},
		{},
		{Seq: 3, Time: -5, TTL: 60000, MsgID: "id-1", PrevSeq: &prev, Op: FeedOpRef},
		{Op: FeedOpDelete, Seqs: []uint64{1, 2, 18446744073709551615}},
	}
	for _, want := range cases {
		frame, err := AppendFrame(nil, &want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeFeedBody(frame)
		if err != nil || len(got) != 1 {
			t.Fatalf("%+v: decoded %d frames, err %v", want, len(got), err)
		}
		got[0].Value = nil
		if !reflect.DeepEqual(got[0], want) {
			t.Errorf("decoded %+v, want %+v", got[0], want)
		}
		meta, _ := json.Marshal(&want)
		var m Frame
		if !parseMetaFast(meta, &m) {
			t.Errorf("%s: not on the fast path", meta)
		}
	}
}

// FuzzParseMetaFast: whenever the fast path accepts metadata, encoding/json
// accepts it too and reads the same message.
func FuzzParseMetaFast(f *testing.F) {
	for _, s := range []string{
		`{"seq":12,"time":1700000000123,"key":"k42"}`,
		`{"op":"delete","seqs":[1,2,3]}`,
		`{"seq":0,"time":-0,"ttl":9223372036854775807,"msgId":"x","prevSeq":18446744073709551615,"op":"ref"}`,
		`{"seqs":[]}`, `{}`, `{"seq":01}`, `{"Seq":1}`, `{"seq":1,}`, `{"key":"a\"b"}`, `{"seq":1.5}`,
		`{"seq":18446744073709551616}`, `{"time":-9223372036854775808}`, `{"seqs":[1,]}`, `{"headers":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		var fast Frame
		if !parseMetaFast(meta, &fast) {
			return
		}
		var slow Frame
		if err := json.Unmarshal(meta, &slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json: %v", meta, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", meta, fast, slow)
		}
	})
}
