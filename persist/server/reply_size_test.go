package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// A reply that does not fit the connection's max payload (here keys: enough
// keys of 4,000 bytes to pass it) must still be answered, with too-large,
// rather than dropped and left to time out.
func TestReplyOverMaxPayloadIsAnswered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	n := int(h.nc.MaxPayload())/4000 + 100
	for b := 0; b < n; b += 100 {
		var body []byte
		for i := b; i < b+100 && i < n; i++ {
			k := fmt.Sprintf("%06d", i) + strings.Repeat("k", 3994)
			var err error
			if body, err = persist.AppendFrame(body, &persist.Frame{Key: k, Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		h.ok(persist.CmdSetMany, "s", nil, body)
	}
	wantCode(t, h.req(persist.CmdKeys, "s", nil, nil), persist.CodeTooLarge)
	// The server still serves the stream afterwards.
	if inv := h.inventory("s"); inv.Count != int64(n) {
		t.Fatalf("count %d, want %d", inv.Count, n)
	}
}
