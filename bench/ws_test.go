package bench

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// watchStub is a WebSocket server that sends each watcher the watch
// gateway's messages msgs (the JSON of websocket.md's message table),
// then closes with code, as /ws/watch ends a watch.
func watchStub(t *testing.T, code websocket.StatusCode, msgs ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for _, m := range msgs {
			if err := c.Write(r.Context(), websocket.MessageText, []byte(m)); err != nil {
				return
			}
		}
		_ = c.Close(code, "")
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// watchMsg is a watch gateway msg of seq carrying a payload of bench
// events' (a write time the reader finds).
func watchMsg(seq int) string {
	return `{"type":"msg","seq":` + strconv.Itoa(seq) + `,"key":"m` + strconv.Itoa(seq) + `","time":1767225600000,"value":"` + string(eventsPayload(64, time.Now())) + `"}`
}

// readWatch has bench events' reader loop read one watcher of url to the
// end of its connection and returns its figures as a run of ours in which
// the writer wrote published sets.
func readWatch(t *testing.T, url string, published int64) EventsRun {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	s := &subscriber{c: c}
	var delivered atomic.Int64
	s.read(&delivered) // returns when the server closes
	lat, gaps, gapped := s.take()
	return EventsRun{Server: ServerOurs, Subscribers: 1, Channels: 1, Published: published, Expected: published, Delivered: int64(len(lat)), Gaps: gaps, GapEvents: gapped}
}

// TestWSResyncLosesTheRest: a watcher of the watch gateway that got a
// resync has lost, bench ws not reconnecting, every write from the
// resync's from on, the one it names included; a skipped message
// accounts for the seqs it counts. Both go through bench events' reader
// loop on a real WebSocket connection. (Was: a resync stood for one
// event, so a resync at the last write left a run with a lost delivery
// that WSLost, and the exit code, called full.)
func TestWSResyncLosesTheRest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		code      websocket.StatusCode
		msgs      []string
		published int64
		want      string // in WSLost's error; empty: no error
	}{
		{"every write", websocket.StatusNormalClosure,
			[]string{`{"type":"ready","from":2}`, watchMsg(2), watchMsg(3), watchMsg(4)}, 3, ""},
		{"skipped names the rest", websocket.StatusNormalClosure,
			[]string{`{"type":"ready","from":2}`, watchMsg(2), `{"type":"skipped","count":2,"first":3,"last":4}`}, 3, ""},
		{"resync at the last write", 4001,
			[]string{`{"type":"ready","from":2}`, watchMsg(2), watchMsg(3), `{"type":"resync","from":4,"reason":"slow consumer: 1024 messages, 40960 bytes waiting"}`}, 3,
			"switchyard lost 1 of 3 deliveries (2 delivered, 0 named by skipped messages; resync and skipped messages: 1)"},
		{"resync before two writes", 4001,
			[]string{`{"type":"ready","from":2}`, watchMsg(2), `{"type":"resync","from":3,"reason":"slow consumer"}`}, 3,
			"switchyard lost 2 of 3 deliveries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := readWatch(t, watchStub(t, tc.code, tc.msgs...), tc.published)
			err := WSLost(EventsResult{Subscribers: 1, Shared: true, Runs: []EventsRun{run}})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v, want no error (run %+v)", err, run)
			case tc.want != "" && err == nil:
				t.Errorf("no error, want one saying %q (run %+v)", tc.want, run)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("%q does not say %q", err, tc.want)
			}
		})
	}
}

// TestWSLost: a bench ws result in which a server (ours or either
// Centrifugo, in any round) delivered fewer than its writes called for,
// beyond what skipped messages name, is an error naming the server and
// how many; a full run is not.
func TestWSLost(t *testing.T) {
	t.Parallel()
	run := func(server string, delivered, gapEvents int64) EventsRun {
		return EventsRun{Server: server, Published: 10, Expected: 30, Delivered: delivered, GapEvents: gapEvents, Gaps: min(gapEvents, 1)}
	}
	for _, tc := range []struct {
		name string
		res  EventsResult
		want string // in the error; empty: no error
	}{
		{"every server full", EventsResult{Runs: []EventsRun{run(ServerOurs, 30, 0), run(ServerCentrifugo, 30, 0), run(ServerCentrifugoHistory, 30, 0)}}, ""},
		{"shortfall named by skipped", EventsResult{Runs: []EventsRun{run(ServerOurs, 26, 4)}}, ""},
		{"ours short", EventsResult{Runs: []EventsRun{run(ServerOurs, 27, 0), run(ServerCentrifugo, 30, 0)}},
			"ws: deliveries lost (the figures printed are what was measured): switchyard lost 3 of 30 deliveries"},
		{"beyond skipped", EventsResult{Runs: []EventsRun{run(ServerOurs, 20, 4)}},
			"switchyard lost 6 of 30 deliveries (20 delivered, 4 named by skipped messages"},
		{"centrifugo+history short", EventsResult{Runs: []EventsRun{run(ServerOurs, 30, 0), run(ServerCentrifugo, 30, 0), run(ServerCentrifugoHistory, 0, 0)}},
			"centrifugo+history lost 30 of 30"},
		{"one round of two short", EventsResult{Rounds: 2,
			Runs: []EventsRun{medianRun([]EventsRun{run(ServerOurs, 30, 0), run(ServerOurs, 25, 0)})},
			Each: [][]EventsRun{{run(ServerOurs, 30, 0), run(ServerOurs, 25, 0)}}},
			"switchyard round 2 lost 5 of 30"},
	} {
		err := WSLost(tc.res)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: no error, want one saying %q", tc.name, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.want)
		}
	}
}
