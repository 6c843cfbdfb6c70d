package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// eventsSocket is a client of up's /ws/events.
type eventsSocket struct {
	t  *testing.T
	ws *websocket.Conn
}

// dialEvents opens /ws/events on base and subscribes to anchor, waiting
// for the gateway's answer.
func dialEvents(t *testing.T, base, anchor string) *eventsSocket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/events", nil)
	if err != nil {
		t.Fatalf("dial /ws/events: %v", err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	s := &eventsSocket{t: t, ws: ws}
	if m := s.read(); m["type"] != "ready" {
		t.Fatalf("first message %v, want ready", m)
	}
	s.send(map[string]string{"type": "subscribe", "id": "1", "anchor": anchor})
	if m := s.read(); m["type"] != "subscribed" {
		t.Fatalf("subscribe %s: %v", anchor, m)
	}
	return s
}

func (s *eventsSocket) send(m map[string]string) {
	s.t.Helper()
	b, _ := json.Marshal(m)
	if err := s.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		s.t.Fatal(err)
	}
}

func (s *eventsSocket) read() map[string]any {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, b, err := s.ws.Read(ctx)
	if err != nil {
		s.t.Fatalf("read /ws/events: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		s.t.Fatalf("message %s: %v", b, err)
	}
	return m
}

// waitSubjects reads until a set event has come for each subject.
func (s *eventsSocket) waitSubjects(subjects ...string) {
	s.t.Helper()
	left := slices.Clone(subjects)
	for len(left) > 0 {
		m := s.read()
		if m["type"] != "event" {
			s.t.Fatalf("message %v, want the events of %v", m, left)
		}
		if i := slices.Index(left, m["subject"].(string)); i >= 0 && m["op"] == "set" {
			left = slices.Delete(left, i, i+1)
		}
	}
}

// tailLines runs a following command (events tail), waits for its first
// line, runs write, and waits for a line of its output matching want.
func tailLines(t *testing.T, cmd *exec.Cmd, write func(), want *regexp.Regexp) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%v ended before %s", cmd.Args, what)
			}
			return l
		case <-time.After(testwait.Timeout):
			t.Fatalf("%v: no %s", cmd.Args, what)
		}
		return ""
	}
	if l := next("first line"); !strings.HasPrefix(l, "following ") {
		t.Fatalf("%v first printed %q", cmd.Args, l)
	}
	write()
	var seen []string
	for {
		l := next("line matching " + want.String() + " (saw " + strings.Join(seen, " | ") + ")")
		if want.MatchString(l) {
			return
		}
		seen = append(seen, l)
	}
}
