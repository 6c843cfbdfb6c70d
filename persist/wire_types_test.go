package persist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
)

// Config travels with max_age in milliseconds; a Duration in Go.
func TestConfigJSON(t *testing.T) {
	c := DefaultConfig()
	c.MaxAge = 90 * time.Second
	c.MaxMsgs = 7
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if wire["max_age"] != float64(90000) || wire["max_msgs"] != float64(7) {
		t.Fatalf("wire form %s", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("round trip %+v, %v; want %+v", back, err, c)
	}
	// Absent fields keep their values.
	back = DefaultConfig()
	if err := json.Unmarshal([]byte(`{"max_age":1500}`), &back); err != nil || back.MaxAge != 1500*time.Millisecond || back.MaxMsgs != -1 {
		t.Fatalf("partial decode %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"max_age":9223372036854775807}`), &back); err == nil {
		t.Fatal("a max_age beyond time.Duration was accepted")
	}
}

func TestConfigUpdate(t *testing.T) {
	age, n, policy := 1500*time.Microsecond, int64(0), DiscardNew
	u := ConfigUpdate{MaxAge: &age, MaxMsgs: &n, DiscardPolicy: &policy}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	// Only the set fields, max_age rounded up to whole milliseconds, and a
	// zero that is set is still sent.
	if string(b) != `{"max_msgs":0,"max_age":2,"discard_policy":"new"}` {
		t.Fatalf("wire form %s", b)
	}
	back, err := ParseConfigUpdate(b)
	if err != nil || *back.MaxMsgs != 0 || *back.MaxAge != 2*time.Millisecond || *back.DiscardPolicy != DiscardNew || back.MaxBytes != nil {
		t.Fatalf("parse %+v, %v", back, err)
	}
	got := back.Apply(DefaultConfig())
	want := DefaultConfig()
	want.MaxMsgs, want.MaxAge, want.DiscardPolicy = 0, 2*time.Millisecond, DiscardNew
	if got != want {
		t.Fatalf("apply %+v, want %+v", got, want)
	}
	if !(ConfigUpdate{}).IsZero() || u.IsZero() {
		t.Fatal("IsZero")
	}
	for _, bad := range []string{`{"max_msg":1}`, `{"max_msgs":1} {}`, `{"max_age":-9223372036854775807}`, `[]`, `{"max_msgs":"1"}`} {
		if _, err := ParseConfigUpdate([]byte(bad)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseConfigUpdate(%s) = %v, want bad-request", bad, err)
		}
	}
}

// Config field names are exact: encoding/json alone would apply
// {"MAX_MSGS":5} as max_msgs, though it refuses unknown fields.
func TestParseConfigUpdateExactNames(t *testing.T) {
	t.Parallel()
	for bad, field := range map[string]string{
		`{"MAX_MSGS":5}`:                 "MAX_MSGS",
		`{"Max_Msgs":5}`:                 "Max_Msgs",
		`{"max_msgs":1,"Desc":"x"}`:      "Desc",
		`{"max_msgs":1,"MAX_MSGS":2}`:    "MAX_MSGS",
		`{"max_\u004dsgs":5}`:            "max_Msgs", // an escape decodes before the names are compared
		`{"Allow_Msg_TTL":true}`:         "Allow_Msg_TTL",
		`{"DISCARD_POLICY":"new","x":1}`: "",
	} {
		_, err := ParseConfigUpdate([]byte(bad))
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseConfigUpdate(%s) = %v, want bad-request", bad, err)
			continue
		}
		if field != "" && !strings.Contains(err.Error(), strconv.Quote(field)) {
			t.Errorf("ParseConfigUpdate(%s) = %v, does not name %q", bad, err, field)
		}
	}
	for _, good := range []string{`{"max_msgs":5,"desc":"d","allow_msg_ttl":true}`, `{"max_\u006dsgs":5}`, `null`, `{}`} {
		if _, err := ParseConfigUpdate([]byte(good)); err != nil {
			t.Errorf("ParseConfigUpdate(%s) = %v", good, err)
		}
	}
	// Every field of Config's wire form is a field a request may set.
	b, err := json.Marshal(Config{Desc: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConfigUpdate(b); err != nil {
		t.Fatalf("ParseConfigUpdate(%s) = %v", b, err)
	}
	if _, err := ParseConfigUpdate([]byte("{\"desc\":\"\xff\"}")); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a desc that is not UTF-8: %v, want bad-request", err)
	}
}

func TestSetManyResultJSON(t *testing.T) {
	var rs []SetManyResult
	in := `[{"seq":3,"time":4},{"error":"limit","code":"reject"},{"error":"x","code":"from-the-future"}]`
	if err := json.Unmarshal([]byte(in), &rs); err != nil {
		t.Fatal(err)
	}
	if rs[0].Seq != 3 || rs[0].Time != 4 || rs[0].Err != nil {
		t.Fatalf("ok entry %+v", rs[0])
	}
	if rs[1].Err == nil || rs[1].Err.Code != CodeReject || rs[1].Err.Message != "limit" {
		t.Fatalf("error entry %+v", rs[1])
	}
	if CodeOf(rs[2].Err) != CodeInternal {
		t.Fatalf("unknown code became %v", rs[2].Err)
	}
	out, err := json.Marshal(rs[:2])
	if err != nil || string(out) != `[{"seq":3,"time":4},{"error":"limit","code":"reject"}]` {
		t.Fatalf("marshal %s, %v", out, err)
	}
}

// A frame keeps whole milliseconds; Message and Entry carry Durations.
func TestFrameMessageEntry(t *testing.T) {
	prev := uint64(9)
	e := Entry{Key: "k", Value: []byte("v"), TTL: 1500 * time.Microsecond, MsgID: "m", PrevSeq: &prev, Headers: map[string]string{"a": "b"}}
	f := e.frame()
	if f.TTL != 2 || f.Key != "k" || f.MsgID != "m" || f.PrevSeq != &prev || f.Headers["a"] != "b" || string(f.Value) != "v" {
		t.Fatalf("frame %+v", f)
	}
	f.Seq, f.Time = 5, 6
	m := f.Message()
	if m.TTL != 2*time.Millisecond || m.Seq != 5 || m.Time != 6 || m.Key != "k" || string(m.Value) != "v" || m.Headers["a"] != "b" {
		t.Fatalf("message %+v", m)
	}
}

func TestDeleteResultForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint64
	}{
		{`{"seqs":[1,2,5]}`, []uint64{1, 2, 5}},
		{`{"seqs":[]}`, []uint64{}},
		{`{"runs":[[1,3],[7,7],[9,10]]}`, []uint64{1, 2, 3, 7, 9, 10}},
		{`{"runs":[[18446744073709551614,18446744073709551615]]}`, []uint64{1<<64 - 2, 1<<64 - 1}},
	} {
		var r DeleteResult
		if err := json.Unmarshal([]byte(tc.in), &r); err != nil || len(r.Seqs) != len(tc.want) {
			t.Fatalf("%s: %v, %v", tc.in, r.Seqs, err)
		}
		for i := range tc.want {
			if r.Seqs[i] != tc.want[i] {
				t.Fatalf("%s: %v, want %v", tc.in, r.Seqs, tc.want)
			}
		}
	}
	for _, bad := range []string{`{"runs":[[5,3]]}`, `{"runs":[[1,18446744073709551615]]}`, `{"runs":[[1,67108864],[70000000,70000001]]}`} {
		var r DeleteResult
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("%s accepted (%d seqs)", bad, len(r.Seqs))
		}
	}
	// AppendDeleteRuns round-trips any ascending list.
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var seqs []uint64
		for q := uint64(1); q < 400; q++ {
			if r.IntN(4) > 0 {
				seqs = append(seqs, q)
			}
		}
		var back DeleteResult
		if err := json.Unmarshal(AppendDeleteRuns(nil, seqs), &back); err != nil || !slices.Equal(back.Seqs, seqs) && len(seqs) > 0 {
			t.Fatalf("round trip of %v: %v, %v", seqs, back.Seqs, err)
		}
	}
}

// (Was: a request that timed out or found no server read as internal, "a
// bug or a storage failure", to a watch's client and in an ended line.)
func TestCodeOfTimeoutsUnavailable(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	cases := []struct {
		err  error
		want Code
	}{
		{fmt.Errorf("get: %w", bus.ErrTimeout), CodeUnavailable},
		{fmt.Errorf("owner: %w", bus.ErrNoResponders), CodeUnavailable},
		{fmt.Errorf("watch: %w", ctx.Err()), CodeUnavailable},
		{Errorf(CodeForbidden, "no"), CodeForbidden},
		{fmt.Errorf("wrapped: %w", Errorf(CodeNotFound, "gone")), CodeNotFound},
		{errors.New("disk on fire"), CodeInternal},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
