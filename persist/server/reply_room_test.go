package server

import (
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// A write is refused (too-large) when the message could not travel back:
// a value so close to the NATS max payload that its getAll frame or get
// reply would not fit. Otherwise a success reply was followed by a stream
// that no getAll (and so no watcher) could ever read past.
func TestWriteMustFitItsAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	mp := int(h.nc.MaxPayload())

	wantCode(t, h.req(persist.CmdSet, "s", nil, make([]byte, mp-50)), persist.CodeTooLarge)
	body, err := persist.AppendFrame(nil, &persist.Frame{Value: make([]byte, mp-100)})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.req(persist.CmdSetMany, "s", nil, body), persist.CodeTooLarge)

	// A large value with room to spare is stored and reads back both ways.
	res := h.set("s", string(make([]byte, mp-4096)), map[string]string{persist.HdrKey: "k", "Note": "n"})
	if got := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil); len(got.Data) != mp-4096 {
		t.Fatalf("get: %d bytes, want %d", len(got.Data), mp-4096)
	}
	msgs, _, _ := h.getAll("s", nil)
	if len(msgs) != 1 || msgs[0].Seq != res.Seq || len(msgs[0].Value) != mp-4096 {
		t.Fatalf("getAll: %d messages", len(msgs))
	}
}
