package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
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
	b, _ := json.Marshal(map[string]string{"type": "subscribe", "id": "1", "anchor": anchor})
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	if m := s.read(); m["type"] != "subscribed" {
		t.Fatalf("subscribe %s: %v", anchor, m)
	}
	return s
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
