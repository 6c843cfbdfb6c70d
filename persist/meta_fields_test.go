package persist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// The frame metadata has a fast encoder (appendMetaFast) and a fast decoder
// (parseMetaFast) beside encoding/json. These tests hold both to exactly
// what encoding/json writes and reads, field by field, over generated
// messages and fuzz input, so a difference names the field it is in.

// messageFields is every field of Frame that diffFrame compares.
var messageFields = []string{"Seq", "Time", "Key", "Headers", "TTL", "MsgID", "PrevSeq", "Op", "Seqs", "Value"}

// TestDiffFrameCoversMessage: a field added to Frame must be added to
// diffFrame too, or the comparisons below would silently skip it.
func TestDiffFrameCoversMessage(t *testing.T) {
	t.Parallel()
	var names []string
	for f := range reflect.TypeFor[Frame]().Fields() {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, messageFields) {
		t.Fatalf("Frame has fields %v; diffFrame compares %v", names, messageFields)
	}
}

// diffFrame lists the fields in which got differs from want, with both
// values. Nil and empty differ (encoding/json tells them apart on decode:
// "seqs":[] is an empty slice, an absent field nil), and so do two PrevSeq
// pointers only by the value they point at.
func diffFrame(got, want *Frame) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s: got %#v, want %#v", field, g, w)) }
	if got.Seq != want.Seq {
		add("Seq", got.Seq, want.Seq)
	}
	if got.Time != want.Time {
		add("Time", got.Time, want.Time)
	}
	if got.Key != want.Key {
		add("Key", got.Key, want.Key)
	}
	if (got.Headers == nil) != (want.Headers == nil) || !maps.Equal(got.Headers, want.Headers) {
		add("Headers", got.Headers, want.Headers)
	}
	if got.TTL != want.TTL {
		add("TTL", got.TTL, want.TTL)
	}
	if got.MsgID != want.MsgID {
		add("MsgID", got.MsgID, want.MsgID)
	}
	switch {
	case (got.PrevSeq == nil) != (want.PrevSeq == nil):
		add("PrevSeq", got.PrevSeq, want.PrevSeq)
	case got.PrevSeq != nil && *got.PrevSeq != *want.PrevSeq:
		add("PrevSeq", *got.PrevSeq, *want.PrevSeq)
	}
	if got.Op != want.Op {
		add("Op", got.Op, want.Op)
	}
	if (got.Seqs == nil) != (want.Seqs == nil) || !slices.Equal(got.Seqs, want.Seqs) {
		add("Seqs", got.Seqs, want.Seqs)
	}
	if (got.Value == nil) != (want.Value == nil) || !bytes.Equal(got.Value, want.Value) {
		add("Value", got.Value, want.Value)
	}
	return d
}

// TestDiffFrameSeesEveryField: diffFrame reports a change to any one
// field, so the comparisons cannot pass by comparing nothing.
func TestDiffFrameSeesEveryField(t *testing.T) {
	t.Parallel()
	p1, p2 := uint64(1), uint64(2)
	base := Frame{Seq: 1, Time: 1, Key: "k", Headers: map[string]string{"h": "v"}, TTL: 1, MsgID: "m", PrevSeq: &p1, Op: "ref", Seqs: []uint64{1}, Value: []byte("v")}
	changes := map[string]func(m *Frame){
		"Seq":           func(m *Frame) { m.Seq = 2 },
		"Time":          func(m *Frame) { m.Time = 2 },
		"Key":           func(m *Frame) { m.Key = "j" },
		"Headers":       func(m *Frame) { m.Headers = map[string]string{"h": "w"} },
		"Headers nil":   func(m *Frame) { m.Headers = nil },
		"Headers empty": func(m *Frame) { m.Headers = map[string]string{} },
		"TTL":           func(m *Frame) { m.TTL = 2 },
		"MsgID":         func(m *Frame) { m.MsgID = "n" },
		"PrevSeq":       func(m *Frame) { m.PrevSeq = &p2 },
		"PrevSeq nil":   func(m *Frame) { m.PrevSeq = nil },
		"Op":            func(m *Frame) { m.Op = "delete" },
		"Seqs":          func(m *Frame) { m.Seqs = []uint64{2} },
		"Seqs empty":    func(m *Frame) { m.Seqs = []uint64{} },
		"Value":         func(m *Frame) { m.Value = []byte("w") },
		"Value nil":     func(m *Frame) { m.Value = nil },
	}
	for name, change := range changes {
		m := base
		p := *base.PrevSeq
		m.PrevSeq = &p // equal value, other pointer: not a difference
		change(&m)
		if d := diffFrame(&m, &base); len(d) != 1 {
			t.Errorf("%s: diffFrame reported %v, want one difference", name, d)
		}
	}
	same := base
	p := *base.PrevSeq
	same.PrevSeq = &p
	if d := diffFrame(&same, &base); d != nil {
		t.Errorf("equal messages differ: %v", d)
	}
}

// genStrings are the string shapes that matter to the fast paths: empty,
// plain ASCII, what encoding/json escapes (quote, backslash, control
// characters, '<' '>' '&'), DEL, UTF-8 and invalid UTF-8.
var genStrings = []string{"", "k", "key-42", "a b", "x.y/z~", "<html>&", "q\"uote", `back\slash`, "tab\there", "nl\n", "\x7f", "é", "日本", "\xdf", "a\xffb", "\u2028"}

func genString(r *rand.Rand) string {
	if r.IntN(4) > 0 { // mostly plain, so the fast paths see many fields
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x5f)) // printable ASCII
		}
		if !plainJSON(string(b)) {
			return "plain"
		}
		return string(b)
	}
	return genStrings[r.IntN(len(genStrings))]
}

var genUints = []uint64{0, 1, 9, 10, 1 << 53, math.MaxInt64, 1 << 63, math.MaxUint64}
var genInts = []int64{0, 1, -1, 1700000000123, math.MaxInt64, math.MinInt64, -(1 << 53)}

func genUint(r *rand.Rand) uint64 {
	if r.IntN(2) == 0 {
		return genUints[r.IntN(len(genUints))]
	}
	return r.Uint64() >> r.IntN(64)
}

func genInt(r *rand.Rand) int64 {
	if r.IntN(2) == 0 {
		return genInts[r.IntN(len(genInts))]
	}
	return int64(r.Uint64()) >> r.IntN(64)
}

// genMessage makes a message with each field set or left zero at random.
// Headers and Seqs are nil or non-empty, as json.Marshal leaves an empty
// one out and a decode could not give it back.
func genMessage(r *rand.Rand) Frame {
	var m Frame
	if r.IntN(2) == 0 {
		m.Seq = genUint(r)
	}
	if r.IntN(2) == 0 {
		m.Time = genInt(r)
	}
	if r.IntN(2) == 0 {
		m.Key = genString(r)
	}
	if r.IntN(5) == 0 {
		m.Headers = map[string]string{}
		for range 1 + r.IntN(3) {
			m.Headers[genString(r)] = genString(r)
		}
	}
	if r.IntN(2) == 0 {
		m.TTL = genInt(r)
	}
	if r.IntN(2) == 0 {
		m.MsgID = genString(r)
	}
	if r.IntN(3) == 0 {
		p := genUint(r)
		m.PrevSeq = &p
	}
	switch r.IntN(4) {
	case 0:
		m.Op = FeedOpDelete
	case 1:
		m.Op = FeedOpRef
	case 2:
		m.Op = genString(r)
	}
	if r.IntN(4) == 0 {
		m.Seqs = make([]uint64, 1+r.IntN(4))
		for i := range m.Seqs {
			m.Seqs[i] = genUint(r)
		}
	}
	if r.IntN(2) == 0 {
		m.Value = fmt.Appendf(nil, "value %d", r.IntN(1000))
	}
	return m
}

// plainStrings: every string of m is one encoding/json writes verbatim.
func plainStrings(m *Frame) bool {
	return plainJSON(m.Key) && plainJSON(m.MsgID) && plainJSON(m.Op)
}

// jsonRoundTrip is what encoding/json makes of m: marshal, then unmarshal
// (invalid UTF-8 becomes U+FFFD, and so on). The value is not in the JSON;
// it is carried over.
func jsonRoundTrip(t *testing.T, m *Frame) Frame {
	t.Helper()
	meta, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Frame
	if err := json.Unmarshal(meta, &back); err != nil {
		t.Fatalf("encoding/json cannot read its own %s: %v", meta, err)
	}
	back.Value = m.Value
	return back
}

// TestParseMetaFastFieldsGenerated: for generated messages, encoded by
// json.Marshal and by AppendFrame, parseMetaFast reads every field exactly
// as encoding/json does whenever it takes the metadata; it takes exactly
// the metadata without headers or escaped strings; and decodeFeedBody,
// fast path or not, gives what encoding/json gives.
func TestParseMetaFastFieldsGenerated(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(8, 2026))
	fastFields := map[string]int{} // field -> messages the fast path read it in
	fast := 0
	const n = 5000
	for i := range n {
		m := genMessage(r)
		meta, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		want := jsonRoundTrip(t, &m)
		wantMeta := want
		wantMeta.Value = nil

		var got Frame
		ok := parseMetaFast(meta, &got)
		if should := len(m.Headers) == 0 && plainStrings(&m); ok != should {
			t.Fatalf("message %d %s: fast path took it: %v, want %v", i, meta, ok, should)
		}
		if ok {
			fast++
			if d := diffFrame(&got, &wantMeta); d != nil {
				t.Fatalf("message %d %s: parseMetaFast differs from encoding/json:\n%v", i, meta, d)
			}
			for _, f := range setFields(&got) {
				fastFields[f]++
			}
		}

		frame, err := AppendFrame(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		for name, decode := range map[string]func([]byte) ([]Frame, error){"decodeFeedBody": decodeFeedBody, "DecodeFrames": decodeFramesAll} {
			msgs, err := decode(frame)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("message %d %s: %s gave %d messages, err %v", i, meta, name, len(msgs), err)
			}
			if want.Value == nil {
				want.Value = []byte{} // a frame always carries a value, maybe empty
			}
			if d := diffFrame(&msgs[0], &want); d != nil {
				t.Fatalf("message %d %s: %s differs from encoding/json:\n%v", i, meta, name, d)
			}
		}
	}
	// The generator must reach the fast path often and with every field it
	// reads, or the comparison above proves little.
	if fast < n/10 {
		t.Fatalf("only %d of %d messages took the fast path", fast, n)
	}
	for _, f := range []string{"Seq", "Time", "Key", "TTL", "MsgID", "PrevSeq", "Op", "Seqs"} {
		if fastFields[f] == 0 {
			t.Errorf("no message read by the fast path had %s set", f)
		}
	}
}

// TestAppendMetaFastFieldsGenerated: for generated messages, appendMetaFast
// writes byte for byte what json.Marshal writes whenever it applies, and
// applies exactly to messages without headers or seqs whose strings need no
// escaping; the frames AppendFrame writes decode to what encoding/json
// makes of the message, field by field.
func TestAppendMetaFastFieldsGenerated(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 2026))
	fast := 0
	const n = 5000
	for i := range n {
		m := genMessage(r)
		want, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendMetaFast(nil, &m)
		if should := len(m.Headers) == 0 && len(m.Seqs) == 0 && plainStrings(&m); ok != should {
			t.Fatalf("message %d %+v: fast encoder took it: %v, want %v", i, m, ok, should)
		}
		if ok {
			fast++
			if !bytes.Equal(got, want) {
				var g, w Frame
				_ = json.Unmarshal(got, &g)
				_ = json.Unmarshal(want, &w)
				t.Fatalf("message %d: appendMetaFast %s, json.Marshal %s; fields %v", i, got, want, diffFrame(&g, &w))
			}
		}
		frame, err := AppendFrame(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := decodeFramesAll(frame)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("message %d: %d messages, err %v", i, len(msgs), err)
		}
		wantMsg := jsonRoundTrip(t, &m)
		if wantMsg.Value == nil {
			wantMsg.Value = []byte{}
		}
		if d := diffFrame(&msgs[0], &wantMsg); d != nil {
			t.Fatalf("message %d %s: frame decodes differently from encoding/json:\n%v", i, want, d)
		}
	}
	if fast < n/10 {
		t.Fatalf("only %d of %d messages took the fast encoder", fast, n)
	}
}

// setFields names the fields of m that are not zero.
func setFields(m *Frame) []string {
	var out []string
	v := reflect.ValueOf(m).Elem()
	for i, name := range messageFields {
		if !v.Field(i).IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// decodeFramesAll collects DecodeFrames' messages, the encoding/json path.
func decodeFramesAll(b []byte) ([]Frame, error) {
	var out []Frame
	err := DecodeFrames(b, 0, func(m *Frame) error {
		out = append(out, *m)
		return nil
	})
	return out, err
}
