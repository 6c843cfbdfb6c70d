package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testnet"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/internal/testws"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// TestWatchInOrderAcrossReconnect: 1,000 writes, made while the browser
// watches, arrive in order and once each, across the gateway stopping
// mid-way (close 1001) and the browser resuming on a new gateway from
// its last seq + 1.
func TestWatchInOrderAcrossReconnect(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	c := env.Client()
	writer := env.Client().Stream("hub", "log")
	g1, ts1 := gateway(t, c, nil)
	_, ts2 := gateway(t, c, nil)

	const n = 1000
	log := &seqLog{t: t, size: 8}
	ws := dial(t, ts1, params("hub", "log", 1), nil)
	if m := mustRead(t, ws); m.Type != TypeReady || m.From != 1 {
		t.Fatalf("first message %+v, want ready from 1", m)
	}
	wrote := make(chan struct{})
	go func() { defer close(wrote); writeN(t, writer, 1, n, 8) }()

	for log.last < n/2 {
		if m := mustRead(t, ws); m.Type == TypeMsg {
			log.add(m)
		}
	}
	if err := g1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// What the first gateway wrote before it went away still counts.
	var err error
	for {
		var m testMsg
		if m, err = read(ws); err != nil {
			break
		}
		if m.Type == TypeMsg {
			log.add(m)
		}
	}
	if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
		t.Fatalf("first connection ended with %v (status %d), want 1001 going away", err, got)
	}
	ws = dial(t, ts2, params("hub", "log", log.last+1), nil)
	if m := mustRead(t, ws); m.Type != TypeReady || m.From != log.last+1 {
		t.Fatalf("first message %+v, want ready from %d", m, log.last+1)
	}
	for log.last < n {
		if m := mustRead(t, ws); m.Type == TypeMsg {
			log.add(m)
		}
	}
	<-wrote
}

// TestWatchResyncNamesFirstMissingSeq: a live browser that does not read
// while the queue fills gets what was queued, then a resync naming the
// first seq it did not get and close 4001; resuming from that seq loses
// nothing (and the catch-up from there goes at the browser's pace).
func TestWatchResyncNamesFirstMissingSeq(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	const n, queue = 300, 50
	var gate atomic.Bool
	release := make(chan struct{})
	g, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) { cfg.QueueMessages = queue })
	// With the gate on the writer waits: the browser reads nothing.
	g.beforeWrite = func(ctx context.Context) {
		if !gate.Load() {
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	ws := dial(t, ts, params("hub", "log", 1), nil)
	for _, want := range []string{TypeReady, TypeCaughtUp} {
		if m := mustRead(t, ws); m.Type != want {
			t.Fatalf("got %+v, want %s", m, want)
		}
	}
	gate.Store(true)
	writeN(t, env.Client().Stream("hub", "log"), 1, n, 8)
	testwait.For(t, "the resync", func() bool { return g.Stats().Resyncs == 1 })
	if st := g.Stats(); st.QueueHighMessages > queue {
		t.Errorf("queue held %d messages, bound %d", st.QueueHighMessages, queue)
	}
	close(release)

	log := &seqLog{t: t, size: 8}
	var resync testMsg
	for resync.Type == "" {
		switch m := mustRead(t, ws); m.Type {
		case TypeMsg:
			log.add(m)
		case TypeResync:
			resync = m
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
	if resync.From != log.last+1 || log.last == 0 {
		t.Fatalf("resync from %d after seq %d, want %d", resync.From, log.last, log.last+1)
	}
	if _, err := read(ws); websocket.CloseStatus(err) != CloseResync {
		t.Fatalf("after the resync: %v, want close %d", err, CloseResync)
	}
	ws = dial(t, ts, params("hub", "log", resync.From), nil)
	for log.last < n {
		if m := mustRead(t, ws); m.Type == TypeMsg {
			log.add(m)
		}
	}
	if got := g.Stats().Resyncs; got != 1 {
		t.Errorf("%d resyncs, want 1: the catch-up must wait for the browser", got)
	}
}

// TestWatchNeverReadingBrowserIsCutOff: a live browser that stops reading
// fills its socket, then the gateway's bounded queue: the watch stops (a
// resync is queued), the write deadline cuts the connection, and the queue
// never held more than its bound. Resuming from the last seq it did get
// loses nothing.
func TestWatchNeverReadingBrowserIsCutOff(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	const n, size, bound = 400, 16 << 10, 128 << 10
	g, ts := gateway(t, env.Client(), func(cfg *Config, ts *httptest.Server) {
		cfg.QueueBytes = bound
		// Shorter than the default, so the test does not wait it out, and
		// long enough for the writer's next 128 KiB of changes to fill the
		// queue once the socket is full (the resync below); at 100 ms a
		// loaded machine let the deadline cut the connection first. No
		// timing is asserted.
		cfg.WriteTimeout = 2 * time.Second
		ts.Listener = testnet.SmallSendBuffers(ts.Listener)
	})
	dialer := &net.Dialer{}
	opts := &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		},
	}}}
	ws := dial(t, ts, params("hub", "log", 1), opts)
	for _, want := range []string{TypeReady, TypeCaughtUp} {
		if m := mustRead(t, ws); m.Type != want {
			t.Fatalf("got %+v, want %s", m, want)
		}
	}
	writeN(t, env.Client().Stream("hub", "log"), 1, n, size)
	testwait.For(t, "the connection to be cut off", func() bool { st := g.Stats(); return st.Accepted == 1 && st.Open == 0 })
	st := g.Stats()
	if st.Resyncs != 1 || st.WriteFailures != 1 {
		t.Errorf("stats %+v: want one resync (queue full) and one write failure (deadline)", st)
	}
	if st.QueueHighBytes > bound {
		t.Errorf("queue held %d bytes, bound %d", st.QueueHighBytes, bound)
	}
	// The browser wakes up: it reads what reached it, then resumes.
	log := &seqLog{t: t, size: size}
	for {
		m, err := read(ws)
		if err != nil {
			break
		}
		switch m.Type {
		case TypeMsg:
			log.add(m)
		case TypeResync:
			if m.From != log.last+1 {
				t.Fatalf("resync from %d after seq %d", m.From, log.last)
			}
		}
	}
	if log.last >= n {
		t.Fatalf("the browser got all %d messages: the test did not fill the queue", n)
	}
	// Resume as the JS client does: from the last seq + 1, again if the
	// catch-up is cut off too (its socket has the same small buffer and
	// short write deadline, which a loaded machine's reader can miss).
	for attempt := 0; log.last < n; attempt++ {
		if attempt == 20 {
			t.Fatalf("20 resumes and still at seq %d of %d", log.last, n)
		}
		ws = dial(t, ts, params("hub", "log", log.last+1), nil)
		for log.last < n {
			m, err := read(ws)
			if err != nil {
				break
			}
			if m.Type == TypeMsg {
				log.add(m)
			}
		}
	}
}

// TestWatchMessageShapes: values as text or base64, keys, headers, the
// delete of a replaced key's row, and "from" absent meaning only new
// changes.
func TestWatchMessageShapes(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	s := env.Client().Stream("hub", "kv")
	ctx := context.Background()
	if _, err := s.Set(ctx, []byte("old"), persist.SetOptions{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	_, ts := gateway(t, env.Client(), nil)
	ws := dial(t, ts, params("hub", "kv", 0), nil)
	if m := mustRead(t, ws); m.Type != TypeReady || m.From != 2 {
		t.Fatalf("first message %+v, want ready from 2 (only new changes)", m)
	}
	if _, err := s.Set(ctx, []byte("héllo"), persist.SetOptions{Key: "a", Headers: map[string]string{"kind": "greeting"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, []byte{0xff, 0x00, 0xfe}, persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []testMsg
	for len(got) < 2 {
		if m := mustRead(t, ws); m.Type == TypeMsg {
			got = append(got, m)
		}
	}
	if m := got[0]; m.Seq != 2 || m.Key != "a" || m.Value != "héllo" || m.Enc != "" || m.Headers["kind"] != "greeting" || m.Time == 0 {
		t.Errorf("text message %+v", m)
	}
	if m := got[1]; m.Seq != 3 || m.Value != "/wD+" || m.Enc != "base64" {
		t.Errorf("binary message %+v, want base64 /wD+", m)
	}

	// A connection that saw seq 1 hears of its delete when key a moves on.
	ws = dial(t, ts, params("hub", "kv", 1), nil)
	seen := map[uint64]bool{}
	for !seen[3] {
		if m := mustRead(t, ws); m.Type == TypeMsg {
			seen[m.Seq] = true
		}
	}
	if seen[1] {
		t.Fatal("seq 1 was replaced before the watch began, yet delivered")
	}
	if _, err := s.Set(ctx, []byte("newer"), persist.SetOptions{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	for {
		m := mustRead(t, ws)
		if m.Type == TypeDelete {
			if len(m.Seqs) != 1 || m.Seqs[0] != 2 {
				t.Fatalf("delete %v, want [2]", m.Seqs)
			}
			break
		}
	}
}

// TestWatchBadParams: bad parameters are a 400 before any upgrade.
func TestWatchBadParams(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	_, ts := gateway(t, env.Client(), nil)
	for _, c := range []struct{ name, query string }{
		{"no scope", "stream=log"},
		{"bad scope", "scope=Hub!&stream=log"},
		{"no stream", "scope=hub"},
		{"control char in stream", "scope=hub&stream=a%01b"},
		{"from not a number", "scope=hub&stream=log&from=x"},
		{"negative from", "scope=hub&stream=log&from=-1"},
		{"from past uint64", "scope=hub&stream=log&from=18446744073709551616"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Get(ts.URL + "/ws/watch?" + c.query)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(body), CodeBadRequest+": ") {
				t.Errorf("HTTP %d %q, want 400 starting with %q", resp.StatusCode, body, CodeBadRequest+": ")
			}
		})
	}
}

// TestWatchStaticFiles: the client and the page are served.
func TestWatchStaticFiles(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	_, ts := gateway(t, env.Client(), nil)
	for path, ctype := range map[string]string{"/ws/watch.js": "text/javascript; charset=utf-8", "/watch": "text/html; charset=utf-8"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestWatchEndedSaysWhy: a watch that ends under the gateway (here its
// persist client closing) ends the connection with an error message that
// carries a code, and the close code for "try again later".
func TestWatchEndedSaysWhy(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	c := env.Client()
	g, ts := gateway(t, c, nil)
	ws := dial(t, ts, params("hub", "log", 1), nil)
	mustRead(t, ws) // ready
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var last testMsg
	var err error
	for {
		var m testMsg
		if m, err = read(ws); err != nil {
			break
		}
		last = m
	}
	if last.Type != TypeError || last.Code != CodeUnavailable {
		t.Errorf("last message %+v, want an error with code %s", last, CodeUnavailable)
	}
	if st := websocket.CloseStatus(err); st != CloseUnavailable {
		t.Errorf("ended with %v, want close %d", err, CloseUnavailable)
	}
	testwait.For(t, "the connection to end", func() bool { return g.Stats().Open == 0 })
}

// TestWatchUnreachableServerSaysUnavailable: a request without from whose
// stream's server cannot be reached is refused 503 with a body that starts
// with unavailable, as every refusal's body starts with its code. (Was: the
// body started with internal, the code of a bug, for a server that is
// merely down.)
func TestWatchUnreachableServerSaysUnavailable(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	_, ts := gateway(t, env.Client(), nil)
	env.StopServer("0")
	resp, err := http.Get(ts.URL + "/ws/watch?scope=hub&stream=log")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), CodeUnavailable+": ") {
		t.Fatalf("HTTP %d %q, want 503 starting with %q", resp.StatusCode, body, CodeUnavailable+": ")
	}
}

// TestWatchOnClosedClientSaysUnavailable: a connection made after the
// gateway's persist client closed ends as one open at that moment does:
// error unavailable, close 1013; a request without from is 503
// unavailable. (Was: the error's code was internal, a bug's, for the same
// cause that mid-watch is unavailable.)
func TestWatchOnClosedClientSaysUnavailable(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	c := env.Client()
	_, ts := gateway(t, c, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ws := dial(t, ts, params("hub", "log", 1), nil)
	if m := mustRead(t, ws); m.Type != TypeReady {
		t.Fatalf("first message %+v, want ready", m)
	}
	m := mustRead(t, ws)
	if m.Type != TypeError || m.Code != CodeUnavailable {
		t.Errorf("got %+v, want an error with code %s", m, CodeUnavailable)
	}
	if _, err := read(ws); websocket.CloseStatus(err) != CloseUnavailable {
		t.Errorf("ended with %v, want close %d", err, CloseUnavailable)
	}

	resp, err := http.Get(ts.URL + "/ws/watch?scope=hub&stream=log")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), CodeUnavailable+": ") {
		t.Errorf("without from: HTTP %d %q, want 503 starting with %q", resp.StatusCode, body, CodeUnavailable+": ")
	}
}

// TestWatchFromPastTheEnd: a from beyond the stream's next seq is taken as
// asked: ready names it, the history is empty, and the first message is
// that seq once it is written; the seqs before it are not reported.
func TestWatchFromPastTheEnd(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	s := env.Client().Stream("hub", "log")
	writeN(t, s, 1, 3, 4)
	_, ts := gateway(t, env.Client(), nil)
	ws := dial(t, ts, params("hub", "log", 10), nil)
	for _, want := range []string{TypeReady, TypeCaughtUp} {
		if m := mustRead(t, ws); m.Type != want || (want == TypeReady && m.From != 10) {
			t.Fatalf("got %+v, want %s (from 10)", m, want)
		}
	}
	writeN(t, s, 4, 9, 4)
	if m := mustRead(t, ws); m.Type != TypeMsg || m.Seq != 10 {
		t.Fatalf("got %+v, want msg 10", m)
	}
}

// TestWatchFromDeletedRange: resuming from a seq whose rows are gone
// passes over them to the first row that exists (they are history to the
// new connection, not skipped), and a stream emptied altogether is just
// ready and caught-up.
func TestWatchFromDeletedRange(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	s := env.Client().Stream("hub", "log")
	writeN(t, s, 1, 10, 4)
	ctx := context.Background()
	if _, err := s.Delete(ctx, persist.Delete{Seqs: []uint64{3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	_, ts := gateway(t, env.Client(), nil)
	ws := dial(t, ts, params("hub", "log", 3), nil)
	var got []string
	for {
		m := mustRead(t, ws)
		if m.Type == TypeMsg {
			got = append(got, m.Value)
		} else {
			got = append(got, m.Type)
		}
		if m.Type == TypeCaughtUp {
			break
		}
	}
	if want := "ready v7.. v8.. v9.. v10. caught-up"; strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := s.Delete(ctx, persist.Delete{UpTo: 10}); err != nil {
		t.Fatal(err)
	}
	ws = dial(t, ts, params("hub", "log", 3), nil)
	for _, want := range []string{TypeReady, TypeCaughtUp} {
		if m := mustRead(t, ws); m.Type != want {
			t.Fatalf("emptied stream: got %+v, want %s", m, want)
		}
	}
}

// TestWatchMissingStream: a stream that does not exist yet is watched as an
// empty one, with or without from, and its first write arrives.
func TestWatchMissingStream(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	_, ts := gateway(t, env.Client(), nil)
	for _, from := range []uint64{0, 1} {
		name := fmt.Sprintf("new%d", from)
		ws := dial(t, ts, params("hub", name, from), nil)
		if m := mustRead(t, ws); m.Type != TypeReady || m.From != 1 {
			t.Fatalf("from %d: first message %+v, want ready from 1", from, m)
		}
		if m := mustRead(t, ws); m.Type != TypeCaughtUp {
			t.Fatalf("from %d: got %+v, want caught-up", from, m)
		}
		writeN(t, env.Client().Stream("hub", name), 1, 1, 4)
		if m := mustRead(t, ws); m.Type != TypeMsg || m.Seq != 1 {
			t.Fatalf("from %d: got %+v, want msg 1", from, m)
		}
	}
}

// TestWatchPermanentErrorEndsForGood: a watch the stream's server refuses
// for good (a persistent stream on a server without a data directory) ends
// with an error message carrying its code, then close 4002; asked without
// from, the same refusal is a 400 before the upgrade.
func TestWatchPermanentErrorEndsForGood(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1, persistenv.Tune(func(cfg *server.Config) { cfg.DataDir = "" }))
	_, ts := gateway(t, env.Client(), nil)
	ws := dial(t, ts, params("hub", "log", 1), nil)
	if m := mustRead(t, ws); m.Type != TypeReady {
		t.Fatalf("first message %+v, want ready", m)
	}
	if m := mustRead(t, ws); m.Type != TypeError || m.Code != CodeBadRequest || m.Message == "" {
		t.Fatalf("got %+v, want an error with code %s and a message", m, CodeBadRequest)
	}
	if _, err := read(ws); websocket.CloseStatus(err) != CloseEnded {
		t.Fatalf("ended with %v, want close %d", err, CloseEnded)
	}
	resp, err := http.Get(ts.URL + "/ws/watch?scope=hub&stream=log")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(body), CodeBadRequest+": ") {
		t.Fatalf("without from: HTTP %d %q, want 400 starting with %q", resp.StatusCode, body, CodeBadRequest+": ")
	}
}

// TestWatchUnansweredPingCutsOff: a client that stops reading answers no
// ping; once a ping has waited WriteTimeout for its pong the connection is
// dropped without a close message, counted as a write failure.
func TestWatchUnansweredPingCutsOff(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	g, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) {
		// Short, so the test does not wait out the defaults; no timing
		// is asserted.
		cfg.PingInterval = 20 * time.Millisecond
		cfg.WriteTimeout = time.Second
	})
	ws := dial(t, ts, params("hub", "log", 1), nil)
	for _, want := range []string{TypeReady, TypeCaughtUp} {
		if m := mustRead(t, ws); m.Type != want {
			t.Fatalf("got %+v, want %s", m, want)
		}
	}
	// The coder/websocket client answers pings only while it reads.
	testwait.For(t, "the connection to be dropped", func() bool { return g.Stats().Open == 0 })
	if st := g.Stats(); st.WriteFailures != 1 || st.Resyncs != 0 {
		t.Errorf("stats %+v: want one write failure (the ping), no resync", st)
	}
	if _, err := read(ws); err == nil || websocket.CloseStatus(err) != -1 {
		t.Errorf("after the drop: %v, want the connection cut without a close message", err)
	}
}

// TestWatchChangeNotHeldBehindPing: a change written while a ping waits
// for its pong reaches the browser at once; a peer that never answers is
// still dropped once the pong is WriteTimeout late, without a close
// message, counted as a write failure.
// (Was: the writer sent each ping and waited for its pong before writing anything else.)
func TestWatchChangeNotHeldBehindPing(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	g, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) {
		// A ping soon after the connection, and a pong deadline long
		// enough for a loaded machine to write and deliver one change
		// before it passes. No timing is asserted.
		cfg.PingInterval = 20 * time.Millisecond
		cfg.WriteTimeout = 5 * time.Second
	})
	c := rawDial(t, ts, params("hub", "log", 1))
	var pinged, caughtUp, wrote bool
change:
	for {
		op, p, err := c.Frame(time.Minute)
		if err != nil {
			t.Fatalf("the connection ended (%v) before the change written while a ping waited for its pong (pinged %v, caught up %v, change written %v); stats %+v", err, pinged, caughtUp, wrote, g.Stats())
		}
		switch op {
		case testws.OpPing:
			pinged = true
		case testws.OpText:
			var m testMsg
			if err := json.Unmarshal(p, &m); err != nil {
				t.Fatal(err)
			}
			caughtUp = caughtUp || m.Type == TypeCaughtUp
			if m.Type == TypeMsg && m.Seq == 1 {
				break change
			}
		case testws.OpClose:
			t.Fatalf("close frame %q before the change", p)
		}
		if pinged && caughtUp && !wrote {
			// The ping is out and will never be answered.
			writeN(t, env.Client().Stream("hub", "log"), 1, 1, 4)
			wrote = true
		}
	}
	for {
		op, _, err := c.Frame(time.Minute)
		if err != nil {
			break
		}
		if op == testws.OpClose {
			t.Fatal("a peer that answers no ping got a close message, want the connection cut")
		}
	}
	testwait.For(t, "the connection to end", func() bool { return g.Stats().Open == 0 })
	if st := g.Stats(); st.WriteFailures != 1 || st.Resyncs != 0 {
		t.Errorf("stats %+v: want one write failure (the unanswered ping), no resync", st)
	}
}
