package server

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestExpiryWhileClosedIsReported: what aged out while its stream was
// closed (evicted, idle or Sy-Cold) is removed when the stream opens, and
// that delete is reported as the timer's are: in OnChange, the change
// feed and Stats.Expired. The open threw its changes away, so a watcher
// kept the expired message for good (a presence row, written cold with a
// 48 h TTL, always expires so).
func TestExpiryWhileClosedIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.IdleClose = time.Hour; c.ExpireEvery = time.Hour })
	h.config("s", `{"allow_msg_ttl":true}`)
	// Close s at once (Sy-Cold), holding one message that lives 1 ms.
	h.ok(persist.CmdConfig, "s", map[string]string{persist.HdrCold: "true"}, nil)
	testwait.For(t, "s to be closed", func() bool { return h.srv.Stats().OpenStorage == 0 })
	res := h.set("s", "v", map[string]string{persist.HdrTTL: "1", persist.HdrCold: "true"})
	testwait.For(t, "s to be closed again", func() bool { return h.srv.Stats().OpenStorage == 0 && len(cached(h)) == 0 })
	testwait.For(t, "the TTL to pass", func() bool { return time.Now().UnixMilli() > res.Time+2 })
	// The next request opens s, which expires the message.
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: strconv.FormatUint(res.Seq, 10)}, nil), persist.CodeNotFound)
	if got := h.deletedSeqs(); !slices.Contains(got, res.Seq) {
		t.Fatalf("seq %d expired while its stream was closed and is gone, but no delete change reported it (deletes seen: %v)", res.Seq, got)
	}
}
