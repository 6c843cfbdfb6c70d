package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestWatchSaysWhyItWaits: a watch on a bus where nothing answers for its
// stream (no balancer, no persist server) keeps retrying, as documented,
// and says so on stderr with the reason.
// (Was: it printed nothing at all, so a wrong --nats or --service looked
// like a stream with no changes.)
func TestWatchSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	c := saysWhyItWaits(t, "watch", "hub", "log")
	if out := c.stdout(); out != "" {
		t.Errorf("watch printed %q on stdout before it could read the stream", out)
	}
}

// saysWhyItWaits runs the command args on a bus where nothing answers (no
// balancer, no persist server) and waits for its warning on stderr: still
// running, retrying, with the reason.
func saysWhyItWaits(t *testing.T, args ...string) *watchedChild {
	t.Helper()
	e, _ := testnats.Start(t)
	c := startWatched(t, cli(t, append(args, "--nats", e.ClientURL())...))
	testwait.For(t, "a warning saying why "+args[0]+" waits", func() bool {
		select {
		case <-c.exited:
			t.Fatalf("%s exited (%d): %s", args[0], c.code, c.stderr.String())
		default:
		}
		s := c.stderr.String()
		return strings.Contains(s, "retrying until it can") && strings.Contains(s, "no responders")
	})
	return c
}

// TestWatchCommand runs `switchyard watch --json` as a child process against
// an in-test persist server: it prints the history, caught-up, live changes,
// and exits 0 on interrupt.
func TestWatchCommand(t *testing.T) {
	t.Parallel()
	e, nc := startFleet(t, t.TempDir())
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := c.Stream("hub", "events")
	if _, err := s.Set(ctx, []byte("old"), persist.SetOptions{Key: "a"}); err != nil {
		t.Fatal(err)
	}

	cmd := cli(t, "watch", "hub", "events", "--json", "--nats", e.ClientURL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan watchLine, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l watchLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = watchLine{Event: "bad line: " + sc.Text()}
			}
			lines <- l
		}
	}()
	next := func() watchLine {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("watch exited early")
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("no output from watch")
		}
		return watchLine{}
	}
	if l := next(); l.Event != "set" || l.Seq != 1 || l.Key != "a" || l.Value == nil || *l.Value != "old" {
		t.Fatalf("first line %+v", l)
	}
	if l := next(); l.Event != "caught-up" {
		t.Fatalf("second line %+v, want caught-up", l)
	}
	if _, err := s.Set(ctx, []byte("new"), persist.SetOptions{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	// A keyed replace is one commit: the set, then the older row's delete
	// (the feed's order, also when the watcher reads it from the server,
	// as it does the first change after it caught up).
	if l := next(); l.Event != "set" || l.Seq != 2 || *l.Value != "new" {
		t.Fatalf("live line %+v", l)
	}
	if l := next(); l.Event != "delete" || len(l.Seqs) != 1 || l.Seqs[0] != 1 {
		t.Fatalf("replace should delete seq 1, got %+v", l)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, cmd); code != 0 {
		t.Fatalf("exit %d after interrupt, want 0", code)
	}
}

func TestWatchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"watch", "hub"},
		{"watch", "Bad.Scope", "s"},
		{"watch", "hub", "s", "--from", "x"},
	} {
		_, stderr, code := execute(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, strings.TrimSpace(stderr))
		}
	}
}

// TestWatchCommandPermanentError: a watch that can never succeed (a
// persistent stream on a server without a data directory) prints an ended
// line and exits 1 instead of retrying for ever. In text the ended line is
// its code alone and the error is said once, on stderr, as written; before,
// stdout carried the error again with its quotes backslash-escaped
// (ended\twatch \"hub\"/\"events\": ...).
func TestWatchCommandPermanentError(t *testing.T) {
	e, _ := startFleet(t, "") // no data directory

	stdout, stderr, code := testproc.Run(t, cli(t, "watch", "hub", "events", "--json", "--nats", e.ClientURL()))
	if code != 1 {
		t.Fatalf("exit %d, want 1 (stderr %q)", code, stderr)
	}
	var l watchLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &l); err != nil || l.Event != "ended" || l.Code != "bad-request" || !strings.Contains(l.Error, "bad-request") {
		t.Errorf("stdout %q: want one ended line with the bad-request code and error (%v)", stdout, err)
	}
	if !strings.Contains(stderr, "data directory") {
		t.Errorf("stderr %q does not say why", stderr)
	}

	stdout, stderr, code = testproc.Run(t, cli(t, "watch", "hub", "events", "--nats", e.ClientURL()))
	if code != 1 || stdout != "ended\tbad-request\n" {
		t.Errorf("text: exit %d, stdout %q; want exit 1, %q", code, stdout, "ended\tbad-request\n")
	}
	if !strings.HasPrefix(stderr, `switchyard: watch "hub"/"events": `) || !strings.Contains(stderr, "data directory") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("text: stderr %q; want the error once, on one line", stderr)
	}
}

// TestWatchPrinterNewEvents: skipped and ended lines, in text and JSON.
func TestWatchPrinterNewEvents(t *testing.T) {
	t.Parallel()
	evs := []persist.Event{
		{Kind: persist.EventSkipped, Count: 3, First: 10, Last: 14},
		{Kind: persist.EventEnded, Err: persist.Errorf(persist.CodeForbidden, "no\taccess")},
	}
	for _, tc := range []struct {
		name string
		json bool
		want string
	}{
		{"text", false, "skipped\t3\t10-14\nended\tforbidden\n"},
		{"json", true, `{"event":"skipped","count":3,"first":10,"last":14}` + "\n" + `{"event":"ended","code":"forbidden","error":"forbidden: no\taccess"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			p := &watchPrinter{w: &b, json: tc.json, enc: json.NewEncoder(&b), cancel: func() {}}
			for _, ev := range evs {
				p.print(ev)
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

// TestWatchJSONBinaryValue: watch --json prints a value that is not UTF-8
// in hex with "enc":"hex", as events tail --json does, and a UTF-8 value
// as itself without "enc". Before, a binary value was put in the JSON
// string as it was, so its bytes became U+FFFD unnoticed.
func TestWatchJSONBinaryValue(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := &watchPrinter{w: &b, json: true, enc: json.NewEncoder(&b), cancel: func() {}}
	p.print(persist.Event{Kind: persist.EventSet, Msg: &persist.Message{Seq: 1, Value: []byte{0xff, 0xfe, 'x', 0x80}}})
	p.print(persist.Event{Kind: persist.EventSet, Msg: &persist.Message{Seq: 2, Value: []byte("grüße")}})
	want := `{"event":"set","seq":1,"value":"fffe7880","enc":"hex"}` + "\n" + `{"event":"set","seq":2,"value":"grüße"}` + "\n"
	if b.String() != want {
		t.Errorf("watch --json printed %q, want %q", b.String(), want)
	}
}
