package server

import (
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestEmptyTextHeaderIsBadRequest: Sy-Key and Sy-Msg-Id sent empty are
// bad-request, as the number and boolean headers are, and nothing is
// written.
// (Was: "Sy-Key:" from a script's unset variable wrote the value unkeyed,
// beside the key's row instead of replacing it, and "Sy-Msg-Id:" wrote it
// without de-duplication.)
func TestEmptyTextHeaderIsBadRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	first := h.set("s", "v1", map[string]string{persist.HdrKey: "k"})
	for _, tt := range []struct {
		name  string
		cmd   string
		hdr   map[string]string
		empty string
	}{
		{"set key", persist.CmdSet, nil, persist.HdrKey},
		{"set msg id", persist.CmdSet, map[string]string{persist.HdrKey: "k"}, persist.HdrMsgID},
		{"get key", persist.CmdGet, map[string]string{persist.HdrSeq: itoa(first.Seq)}, persist.HdrKey},
		{"delete msg id", persist.CmdDelete, map[string]string{persist.HdrAll: "true"}, persist.HdrMsgID},
	} {
		for _, value := range []string{"", "  "} { // nats.go sends "  " as ""
			m := h.msg(tt.cmd, "s", tt.hdr, []byte("v2"))
			m.Header.Set(tt.empty, value)
			r := h.do(m)
			if got := persist.Code(r.Header.Get(persist.HdrError)); got != persist.CodeBadRequest {
				t.Fatalf("%s: %q: answered %q %q, want %s", tt.name, tt.empty+":"+value, got, r.Data, persist.CodeBadRequest)
			}
		}
	}
	if inv := h.inventory("s"); inv.Count != 1 || inv.Seq != first.Seq {
		t.Fatalf("stream s: %+v, want its one message, unchanged", inv)
	}
}
