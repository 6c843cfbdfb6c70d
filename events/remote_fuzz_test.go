package events

import (
	"bytes"
	"testing"

	"github.com/switchyard-dev/switchyard/forward"
)

// FuzzDecodeRemote: a peer region's event items are outside input (signed,
// but from another process and version). Whatever the key, op and value,
// decodeRemote returns without panicking, and what it accepts says the
// same once encoded again: a change decodes to the event it was, a gap to
// a reason of the closed set with a positive count.
func FuzzDecodeRemote(f *testing.F) {
	f.Add("project-1/files/a/b.txt", "set", []byte(`{"seq":3,"value":"text"}`), int64(5))
	f.Add("p/s/k", "set", []byte(`{"seq":4,"value":"/wA=","enc":"base64"}`), int64(6))
	f.Add("p/s/k", "set", []byte(`{"seq":4,"omitted":true}`), int64(6))
	f.Add("p/s", "del", []byte(`{"seq":5}`), int64(7))
	f.Add("p/s", "gap", []byte(`{"reason":"backlog_overflow","count":3}`), int64(8))
	f.Add("p/s", "gap", []byte(`{"reason":"made_up","count":1}`), int64(8))
	f.Add("no-stream", "set", []byte(`{}`), int64(0))
	f.Add("p/s/k", "set", []byte(`{"value":"!!","enc":"base64"}`), int64(-1))
	f.Add("p/s/dir/", "set", []byte(`{"seq":6,"value":"v"}`), int64(9)) // a key no anchor can name
	f.Add("p/s/a//b", "del", []byte(`{"seq":7}`), int64(9))
	f.Fuzz(func(t *testing.T, key, op string, value []byte, ts int64) {
		in := &forward.Event{Family: "kv", ID: "p/s#1", TS: ts, KV: &forward.KVChange{KVKey: key, Op: op, Value: value}}
		ev, gap, ok := decodeRemote(in)
		if !ok {
			if gap != nil {
				t.Fatalf("refused, yet a gap: %+v", gap)
			}
			return
		}
		// Any subject persist can hold crosses, not only one an anchor
		// could name: it reads back as itself.
		if back, err := ParseSubject(ev.Subject.String()); err != nil || back != ev.Subject {
			t.Fatalf("accepted a subject that does not read back: %q: %+v, %v", ev.Subject.String(), back, err)
		}
		if gap != nil {
			if op != remoteGap || gap.Count < 1 || !validReason(gap.Reason) {
				t.Fatalf("gap %+v from op %q", gap, op)
			}
			return
		}
		if op != remoteSet && op != remoteDel {
			t.Fatalf("op %q accepted as a change", op)
		}
		again, gap2, ok2 := decodeRemote(encodeRemote(&ev))
		if !ok2 || gap2 != nil {
			t.Fatalf("%+v, encoded again, is refused", ev)
		}
		if again.Subject != ev.Subject || again.Op != ev.Op || again.Seq != ev.Seq || again.TS != ev.TS || again.ID != ev.ID {
			t.Fatalf("%+v came back as %+v", ev, again)
		}
		if _, _, omitted := crossingValue(ev.Value); !omitted && !bytes.Equal(again.Value, ev.Value) {
			t.Fatalf("value %q came back as %q", ev.Value, again.Value)
		}
	})
}

func validReason(r Reason) bool {
	for _, x := range Reasons {
		if r == x {
			return true
		}
	}
	return false
}
