package persist

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/jsonstr"
)

// TestParseMetaFastTakesEncoderOutput: what the frame encoders write for
// feed frames takes the fast path and reads back the same.
func TestParseMetaFastTakesEncoderOutput(t *testing.T) {
	t.Parallel()
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
// accepts it too and reads the same message, field by field; and
// decodeFeedBody (fast path or encoding/json) always gives what
// encoding/json gives, error or message, except that it refuses what
// jsonstr.CheckText refuses (text encoding/json would convert).
func FuzzParseMetaFast(f *testing.F) {
	for _, s := range []string{
		`{"seq":12,"time":1700000000123,"key":"k42"}`,
		`{"op":"delete","seqs":[1,2,3]}`,
		`{"seq":0,"time":-0,"ttl":9223372036854775807,"msgId":"x","prevSeq":18446744073709551615,"op":"ref"}`,
		`{"seqs":[]}`, `{}`, `{"seq":01}`, `{"Seq":1}`, `{"seq":1,}`, `{"key":"a\"b"}`, `{"seq":1.5}`,
		`{"seq":18446744073709551616}`, `{"time":-9223372036854775808}`, `{"seqs":[1,]}`, `{"headers":{}}`,
		`{"seq":1,"headers":{"h":"v","x":""},"ttl":5}`, `{"prevSeq":5,"prevSeq":null}`, `{"seqs":[1],"seqs":null}`,
		`{"seq":5,"SEQ":null}`, `{"key":"\u003c"}`, `{"msgId":"\u00e9","op":"set"}`, `{"key":null}`, `{"ttl":-1}`,
		`{"prevSeq":0}`, `{"seq":1} `, ` {"seq":1}`, `{"seq":1}x`, `{"value":"ignored"}`,
		"{\"key\":\"alias\xff\"}", `{"key":"alias\udcff"}`, `{"key":"alias\ufffd"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		var slow Frame
		slowErr := json.Unmarshal(meta, &slow)
		textErr := jsonstr.CheckText(meta)
		var fast Frame
		if parseMetaFast(meta, &fast) {
			if slowErr != nil || textErr != nil {
				t.Fatalf("fast path accepted %q, encoding/json: %v, text: %v", meta, slowErr, textErr)
			}
			if d := diffFrame(&fast, &slow); d != nil {
				t.Fatalf("%q: parseMetaFast differs from encoding/json:\n%v", meta, d)
			}
		}
		// The same metadata in a frame, through the feed decoder.
		value := []byte("v")
		frame := binary.AppendUvarint(nil, uint64(len(meta)))
		frame = append(frame, meta...)
		frame = binary.AppendUvarint(frame, uint64(len(value)))
		frame = append(frame, value...)
		msgs, err := decodeFeedBody(frame)
		if (err != nil) != (slowErr != nil || textErr != nil) {
			t.Fatalf("%q: decodeFeedBody error %v, encoding/json error %v, text error %v", meta, err, slowErr, textErr)
		}
		if err != nil {
			if len(msgs) != 0 {
				t.Fatalf("%q: decodeFeedBody returned %d messages with its error", meta, len(msgs))
			}
			return
		}
		slow.Value = value
		if len(msgs) != 1 {
			t.Fatalf("%q: decodeFeedBody gave %d messages", meta, len(msgs))
		}
		if d := diffFrame(&msgs[0], &slow); d != nil {
			t.Fatalf("%q: decodeFeedBody differs from encoding/json:\n%v", meta, d)
		}
	})
}

// A feed frame whose key is not valid UTF-8, raw or as a lone surrogate
// escape, is an error, not a key with U+FFFD in it: a forged feed message
// cannot show a watcher a key that aliases a real one.
func TestDecodeFeedBodyRefusesTextNotUTF8(t *testing.T) {
	t.Parallel()
	for _, meta := range []string{"{\"seq\":1,\"key\":\"alias\xff\"}", `{"seq":1,"key":"alias\udcff"}`, `{"seq":1,"headers":{"h":"\ud800"}}`} {
		frame := binary.AppendUvarint(nil, uint64(len(meta)))
		frame = append(frame, meta...)
		frame = binary.AppendUvarint(frame, 0)
		if msgs, err := decodeFeedBody(frame); CodeOf(err) != CodeBadRequest || len(msgs) != 0 {
			t.Errorf("%q: %d messages, error %v; want none and bad-request", meta, len(msgs), err)
		}
	}
}
