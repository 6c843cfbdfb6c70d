package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testws"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/web"
)

// testMsg is any message the gateway sends.
type testMsg struct {
	Type    string            `json:"type"`
	Seq     uint64            `json:"seq"`
	Key     string            `json:"key"`
	Time    int64             `json:"time"`
	Value   string            `json:"value"`
	Enc     string            `json:"enc"`
	Headers map[string]string `json:"headers"`
	From    uint64            `json:"from"`
	Seqs    []uint64          `json:"seqs"`
	Reason  string            `json:"reason"`
	Code    string            `json:"code"`
	Message string            `json:"message"`
}

// gateway starts a gateway on an httptest server; both stop when the test
// ends (the gateway first: it closes the hijacked connections).
func gateway(t *testing.T, c *persist.Client, mod func(*Config, *httptest.Server)) (*Gateway, *httptest.Server) {
	t.Helper()
	cfg := Config{Client: c, Authorizer: web.Open()}
	ts := httptest.NewUnstartedServer(nil)
	if mod != nil {
		mod(&cfg, ts)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	g.Mount(mux)
	ts.Config.Handler = mux
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		if err := g.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return g, ts
}

func watchURL(ts *httptest.Server, q url.Values) string {
	return "ws" + strings.TrimPrefix(ts.URL, "http") + "/ws/watch?" + q.Encode()
}

func params(scope, stream string, from uint64) url.Values {
	q := url.Values{"scope": {scope}, "stream": {stream}}
	if from > 0 {
		q.Set("from", strconv.FormatUint(from, 10))
	}
	return q
}

// dial opens a watch; the connection is dropped when the test ends.
func dial(t *testing.T, ts *httptest.Server, q url.Values, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, watchURL(ts, q), opts)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %v: %v (HTTP %d)", q, err, status)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// read returns the next message, or the error that ended the connection.
func read(c *websocket.Conn) (testMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	typ, b, err := c.Read(ctx)
	if err != nil {
		return testMsg{}, err
	}
	var m testMsg
	if typ != websocket.MessageText {
		return m, fmt.Errorf("got a %v message, want text", typ)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode %q: %w", b, err)
	}
	return m, nil
}

// mustRead is read for messages that must come.
func mustRead(t *testing.T, c *websocket.Conn) testMsg {
	t.Helper()
	m, err := read(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return m
}

// writeN writes n values "v1".."vn" (plain stream: value i lands at seq i).
func writeN(t *testing.T, s *persist.Stream, from, n int, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := s.Set(context.Background(), value(i, size), persist.SetOptions{}); err != nil {
			t.Errorf("set %d: %v", i, err)
			return
		}
	}
}

func value(i, size int) []byte {
	v := []byte("v" + strconv.Itoa(i))
	for len(v) < size {
		v = append(v, '.')
	}
	return v
}

// seqLog checks what one browser received across connections: each seq
// once, in order, and the value written at it.
type seqLog struct {
	t    *testing.T
	last uint64
	size int
}

func (l *seqLog) add(m testMsg) {
	l.t.Helper()
	if m.Seq != l.last+1 {
		l.t.Fatalf("got seq %d after %d: want %d (in order, none twice, none lost)", m.Seq, l.last, l.last+1)
	}
	if want := string(value(int(m.Seq), l.size)); m.Value != want {
		l.t.Fatalf("seq %d: value %.20q, want %.20q", m.Seq, m.Value, want)
	}
	l.last = m.Seq
}

// rawDial opens a watch with a client that never answers a ping by
// itself (testws); the connection is dropped when the test ends.
func rawDial(t *testing.T, ts *httptest.Server, q url.Values) *testws.Conn {
	return testws.Dial(t, ts.URL, "/ws/watch?"+q.Encode())
}
