package forward

import (
	"strconv"
	"testing"
	"time"
)

// TestReplayAfterReceiverRestart: a batch captured on the wire is refused
// as a replay by the receiver that took it, and by a receiver restarted
// since (its nonce window empty) within MaxAge: it was signed before that
// receiver started. The restarted one took it and handed its items to the
// sink a second time (found by an audit).
func TestReplayAfterReceiverRestart(t *testing.T) {
	first := newTestReceiver(t, nil)
	now := first.clk.Now()
	// A numbered batch, as a PeerQueue builds it.
	epoch := now.Add(-time.Minute).UnixNano()
	body := []byte(`{"from":"eu","epoch":` + strconv.FormatInt(epoch, 10) + `,"seq":1,"base":1,"items":[`)
	body = AppendJSON(body, del("s1", "a"))
	body = append(body, ']', '}')
	captured := signedReq{peer: "eu", secret: secretEU, ts: now.Unix(), nonce: uint64(now.UnixNano()), body: body}

	if code, out := first.do(t, captured); code != 200 {
		t.Fatalf("genuine batch: %d %s", code, out)
	}
	if code, _ := first.do(t, captured); code != 403 {
		t.Fatalf("replay to the same receiver: %d, want 403", code)
	}

	// The receiving region restarts 30 s later (well within MaxAge); the
	// attacker sends the captured request again, byte for byte.
	later := newFakeClock()
	later.Advance(30 * time.Second)
	second := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = later })
	code, out := second.do(t, captured)
	calls, _ := second.log.snapshot()
	if code == 200 || len(calls) != 0 {
		t.Fatalf("a captured batch replayed to the restarted receiver was accepted: %d %s; sink got %v again (ReceiverStats %+v)",
			code, out, calls, second.recv.Stats())
	}
}
