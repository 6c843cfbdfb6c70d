package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestSharedDataDir: two servers on one data directory that both believe
// they own a scope (a placement disagreement, or an old owner paused while
// its scope moved). A set retried at the second server with the msgID the
// first one stored is answered with the first one's seq and time, and
// stores nothing; and each server's inventory shows what the other wrote,
// which a watcher's resync relies on.
func TestSharedDataDir(t *testing.T) {
	t.Parallel()
	a := newHarness(t, nil)
	b := newHarness(t, func(c *Config) { c.DataDir = a.dir })
	// Both have the stream open, its msgID window loaded, before a writes.
	b.set("s", "from b", nil)
	if inv := a.inventory("s"); inv.Count != 1 {
		t.Fatalf("a's inventory after b's write: %+v", inv)
	}
	first := a.set("s", "v", map[string]string{persist.HdrMsgID: "id-1"})
	r := b.ok(persist.CmdSet, "s", map[string]string{persist.HdrMsgID: "id-1"}, []byte("v"))
	var dup persist.SetResult
	mustJSON(t, r.Data, &dup)
	if dup != first || r.Header.Get(persist.HdrDup) != "true" {
		t.Fatalf("retry at the second server answered %+v %v, want %+v with %s", dup, r.Header, first, persist.HdrDup)
	}
	if inv := b.inventory("s"); inv.Count != 2 || inv.Seq != first.Seq {
		t.Fatalf("b's inventory after the retry: %+v, want count 2, seq %d", inv, first.Seq)
	}
	// A delete and a set at a: b's inventory follows.
	a.ok(persist.CmdDelete, "s", map[string]string{persist.HdrSeq: "1"}, nil)
	last := a.set("s", "w", nil)
	if inv := b.inventory("s"); inv.Count != 2 || inv.Seq != last.Seq {
		t.Fatalf("b's inventory after a's writes: %+v, want count 2, seq %d", inv, last.Seq)
	}
	if inv := a.inventory("s"); inv.Count != 2 || inv.Seq != last.Seq {
		t.Fatalf("a's inventory: %+v, want count 2, seq %d", inv, last.Seq)
	}
}

// TestSharedReaderExpiresForeignTTL: a server that only reads a stream
// whose rows another server on the same data directory wrote with a TTL
// expires them once their TTL has passed, also when the writer has
// stopped: its gets stop answering them.
// (Was: the reading server never learned of the other's TTL rows (only its own writes reloaded them), so its expiry timer never visited the stream and its gets answered the expired row for good.)
func TestSharedReaderExpiresForeignTTL(t *testing.T) {
	t.Parallel()
	// a's own timer must not expire the row before it stops.
	a := newHarness(t, func(c *Config) { c.ExpireEvery = time.Hour })
	b := newHarness(t, func(c *Config) { c.DataDir = a.dir; c.ExpireEvery = 10 * time.Millisecond; c.IdleClose = time.Hour })
	a.config("s", `{"allow_msg_ttl":true}`)
	// b has the stream open before a writes the TTL row.
	if inv := b.inventory("s"); inv.Count != 0 {
		t.Fatalf("b's inventory before a's write: %+v", inv)
	}
	res := a.set("s", "v", map[string]string{persist.HdrKey: "k", persist.HdrTTL: "1"})
	a.node.Stop()
	testwait.For(t, "the TTL to pass", func() bool { return time.Now().UnixMilli() > res.Time+2 })
	testwait.Until(t, "b's get of the expired key to answer not-found", func() (bool, string) {
		r := b.req(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil)
		code := r.Header.Get(persist.HdrError)
		return code == string(persist.CodeNotFound), fmt.Sprintf("error %q, value %q", code, r.Data)
	})
	if got := b.srv.Stats().Expired; got != 1 {
		t.Fatalf("b's Stats.Expired = %d, want 1", got)
	}
}
