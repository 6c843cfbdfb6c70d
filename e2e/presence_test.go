//go:build unix

package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestPresenceOnTheRealClock runs up's presence with its real delays, as
// the unit tests run it on a fake clock: a reload (the last socket closed,
// another opened before the leave) calls the leave off and writes
// nothing; once the last socket is closed for good, a subscriber of
// presence/USER hears the leave 30-60 s later (events.LeaveMinDefault,
// LeaveMaxDefault), and the row is gone.
func TestPresenceOnTheRealClock(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	up := cli(t, "up", "--no-work", "--servers", "1", "--data", filepath.Join(t.TempDir(), "data"),
		"--nats-port", strconv.Itoa(testproc.FreePort(t)), "--http", addr)
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })

	ctx, cancel := context.WithTimeout(context.Background(), events.LeaveMaxDefault+2*testwait.Timeout)
	defer cancel()
	dial := func(query string) *websocket.Conn {
		t.Helper()
		ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws/events"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ws.CloseNow() })
		if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), `"type":"ready"`) {
			t.Fatalf("first message %s (%v), want ready", b, err)
		}
		return ws
	}
	watcher := dial("?app=watcher")
	heard := messages(watcher)
	if err := watcher.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"p","anchor":"presence/anonymous"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-heard:
		if m["type"] != "subscribed" {
			t.Fatalf("subscribe presence/anonymous: %v", m)
		}
	case <-ctx.Done():
		t.Fatal("no answer to the subscribe")
	}
	// next is the next presence message about app leaver.
	next := func(what string) map[string]any {
		t.Helper()
		for {
			select {
			case m, ok := <-heard:
				if !ok {
					t.Fatalf("the watcher's socket ended before %s", what)
				}
				if m["type"] == "presence" && m["app"] == "leaver" {
					return m
				}
			case <-ctx.Done():
				t.Fatalf("no %s", what)
			}
		}
	}
	first := dial("?app=leaver")
	if m := next("the join"); m["op"] != "join" {
		t.Fatalf("presence %v, want leaver's join", m)
	}
	_ = first.CloseNow()
	// The server has counted the close (the watcher alone is connected)
	// before the reload comes, so that the reload finds the leave pending.
	testwait.For(t, "the first socket's close counted", func() bool { return metric(t, addr, "events_presence_connections") == "1" })
	second := dial("?app=leaver")
	testwait.For(t, "the reload counted", func() bool { return metric(t, addr, "events_presence_reloads_total") == "1" })
	_ = second.CloseNow()
	closed := time.Now()
	m := next("the leave")
	took := time.Since(closed)
	if m["op"] != "leave" || m["region"] != "local" {
		t.Fatalf("presence %v after the last close, want leaver's leave (the reload wrote nothing)", m)
	}
	// The leave's delay starts when the server sees the close, after
	// closed: it cannot come sooner than the minimum; the slack above
	// the maximum is the removal's write and its delivery on a busy machine.
	if took < events.LeaveMinDefault || took > events.LeaveMaxDefault+20*time.Second {
		t.Fatalf("the leave came %v after the last close, want %v-%v", took, events.LeaveMinDefault, events.LeaveMaxDefault)
	}
	t.Logf("the leave came %v after the last close", took.Round(time.Millisecond))
	if w, r := metric(t, addr, "events_presence_writes_total"), metric(t, addr, "events_presence_removes_total"); w != "2" || r != "1" {
		t.Fatalf("presence rows written %s (want 2: the watcher's and the leaver's, none for the reload), removed %s (want 1)", w, r)
	}
}
