package forward

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// bogusSig is a well-formed signature that matches nothing: an attacker
// without the secret gets past the header checks with it, never further.
var bogusSig = strings.Repeat("0", 64)

// rawHead is a request's head as an attacker writes it. length < 0 sends
// the body chunked; an empty peer, ts, nonce or sig leaves the header out.
func rawHead(peer, ts, nonce, sig string, length int64) []byte {
	var b bytes.Buffer
	b.WriteString("POST / HTTP/1.1\r\nHost: forward\r\nContent-Type: application/json\r\n")
	for _, h := range [][2]string{{HeaderPeer, peer}, {HeaderTimestamp, ts}, {HeaderNonce, nonce}, {HeaderSignature, sig}} {
		if h[1] != "" {
			fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
		}
	}
	if length < 0 {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", length)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// sendHead writes a request head and no body byte, and returns the
// connection and a reader of its answer.
func sendHead(t *testing.T, addr string, head []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write(head); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

func readAnswer(t *testing.T, br *bufio.Reader) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestReceiverRefusesBeforeReading sends request heads and never a body
// byte: each must be answered at once, and the connection closed. A
// receiver that read first would wait BodyReadTimeout and answer 408.
func TestReceiverRefusesBeforeReading(t *testing.T) {
	tr := newTestReceiver(t, nil)
	addr := tr.srv.Listener.Addr().String()
	now := tr.clk.Now().Unix()
	nowText := strconv.FormatInt(now, 10)
	body := batchBody("eu", del("s1", "a"))
	if code, out := tr.do(t, signedReq{peer: "eu", secret: secretEU, ts: now, nonce: 77, body: body}); code != 200 {
		t.Fatalf("genuine batch: %d %s", code, out)
	}
	for _, tc := range []struct {
		name                 string
		peer, ts, nonce, sig string
		length               int64
		want                 int
	}{
		{"unknown peer", "mallory", nowText, "1", bogusSig, 100, 403},
		{"missing peer", "", nowText, "1", bogusSig, 100, 403},
		{"malformed timestamp", "eu", "-5", "1", bogusSig, 100, 400},
		{"malformed nonce", "eu", nowText, "12a", bogusSig, 100, 400},
		{"missing signature", "eu", nowText, "1", "", 100, 403},
		{"malformed signature", "eu", nowText, "1", "zz", 100, 403},
		{"stale timestamp", "eu", strconv.FormatInt(now-301, 10), "1", bogusSig, 100, 400},
		{"future timestamp", "eu", strconv.FormatInt(now+61, 10), "1", bogusSig, 100, 400},
		{"chunked", "eu", nowText, "1", bogusSig, -1, 411},
		{"one byte over MaxBodyBytes", "eu", nowText, "1", bogusSig, MaxBodyBytesDefault + 1, 413},
		{"8 MiB", "eu", nowText, "1", bogusSig, 8 << 20, 413},
		{"replayed nonce", "eu", nowText, "77", bogusSig, 100, 403},
		{"own id", "us", nowText, "1", bogusSig, 100, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, br := sendHead(t, addr, rawHead(tc.peer, tc.ts, tc.nonce, tc.sig, tc.length))
			resp := readAnswer(t, br)
			if resp.StatusCode != tc.want || !resp.Close {
				t.Fatalf("status %d, close %v; want %d and the connection closed", resp.StatusCode, resp.Close, tc.want)
			}
			// Closed, not drained: nothing more comes.
			if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("connection still open after the answer: %d, %v", n, err)
			}
			conn.Close()
		})
	}
	st := tr.recv.Stats()
	if st.ReadTimeout != 0 || st.Reading != 0 || st.TooLarge != 2 || st.LengthRequired != 1 || st.Replayed != 1 || st.Accepted != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestReceiverReadingLimits holds bodies open (a head, no body) and checks
// the per-peer and total limits refuse the next ones with 503 and
// Retry-After. Bodies naming a peer take that peer's slots whoever sent
// them: until the signature is read, the name is only a claim. So a
// flood naming eu delays eu's own batches (by at most BodyReadTimeout per
// held slot), and no one else's.
func TestReceiverReadingLimits(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) {
		c.MaxReadingPerPeer = 2
		c.MaxReading = 3
		c.BodyReadTimeout = time.Minute // held until the test lets go
	})
	addr := tr.srv.Listener.Addr().String()
	now := tr.clk.Now().Unix()
	nowText := strconv.FormatInt(now, 10)
	nonce := uint64(100)
	hold := func(peer string) (net.Conn, *bufio.Reader) {
		nonce++
		return sendHead(t, addr, rawHead(peer, nowText, strconv.FormatUint(nonce, 10), bogusSig, 1000))
	}
	reading := func(n int64) {
		t.Helper()
		testwait.For(t, fmt.Sprintf("%d bodies being read", n), func() bool { return tr.recv.Stats().Reading == n })
	}
	busy := func(peer string) {
		t.Helper()
		_, br := hold(peer)
		resp := readAnswer(t, br)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s over a limit: %d, Retry-After %q", peer, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	eu1, _ := hold("eu")
	eu2, _ := hold("eu")
	reading(2)
	busy("eu")
	body := batchBody("eu", del("s1", "a"))
	if code, out := tr.do(t, signedReq{peer: "eu", secret: secretEU, ts: now, nonce: 1, body: body}); code != http.StatusServiceUnavailable {
		t.Fatalf("eu's own batch with its slots taken: %d %s", code, out)
	}
	ap1, _ := hold("ap")
	reading(3)
	busy("ap") // ap has a slot left, the total has not
	if st := tr.recv.Stats(); st.BusyPeer != 2 || st.BusyTotal != 1 {
		t.Fatalf("stats = %+v", st)
	}

	// A held body whose client goes away frees its slots at once.
	eu1.Close()
	reading(2)
	if code, out := tr.do(t, signedReq{peer: "eu", secret: secretEU, ts: now, nonce: 2, body: body}); code != 200 {
		t.Fatalf("eu's batch with a slot free: %d %s", code, out)
	}
	eu2.Close()
	ap1.Close()
	reading(0)
	if st := tr.recv.Stats(); st.Accepted != 1 || st.BadRequest != 3 || st.ReadTimeout != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestReceiverBodyReadTimeout: a body that stops coming is cut off after
// BodyReadTimeout with 408, and its connection closed.
func TestReceiverBodyReadTimeout(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.BodyReadTimeout = 100 * time.Millisecond })
	now := tr.clk.Now().Unix()
	head := rawHead("eu", strconv.FormatInt(now, 10), "5", bogusSig, 1000)
	conn, br := sendHead(t, tr.srv.Listener.Addr().String(), append(head, `{"from":"eu","items":[`...))
	resp := readAnswer(t, br)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("connection still open after the answer: %d, %v", n, err)
	}
	conn.Close()
	testwait.For(t, "slot freed", func() bool { return tr.recv.Stats().Reading == 0 })
	if st := tr.recv.Stats(); st.ReadTimeout != 1 {
		t.Fatalf("stats = %+v", st)
	}
	body := batchBody("eu", del("s1", "a"))
	if code, out := tr.do(t, signedReq{peer: "eu", secret: secretEU, ts: now, nonce: 6, body: body}); code != 200 {
		t.Fatalf("genuine batch after the timeout: %d %s", code, out)
	}
}

// heapSampler tracks the peak of the heap's object bytes (live and not yet
// swept) from a goroutine of its own. runtime/metrics reads it without
// stopping the world, so sampling every millisecond is cheap.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := heapNow(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-tick.C:
			case <-h.stop:
				return
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

// attacker sends one kind of unsigned request over and over, each on a
// fresh connection, until ctx ends, and tallies the answers it got.
type attacker struct {
	addr string
	head func() []byte
	// feed writes the body until it fails or answered is closed; it
	// returns when the server stops taking bytes or cuts the connection.
	feed func(conn net.Conn, answered <-chan struct{}) error
}

func (a attacker) run(ctx context.Context, tally func(code int)) {
	for ctx.Err() == nil {
		a.once(ctx, tally)
	}
}

func (a attacker) once(ctx context.Context, tally func(code int)) {
	conn, err := net.Dial("tcp", a.addr)
	if err != nil {
		tally(-1)
		return
	}
	defer conn.Close()
	// Ending the flood unblocks every read and write at once.
	unhook := context.AfterFunc(ctx, func() { conn.Close() })
	defer unhook()
	if _, err := conn.Write(a.head()); err != nil {
		tally(-1)
		return
	}
	answered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(answered)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			tally(0) // cut off without an answer
			return
		}
		resp.Body.Close()
		tally(resp.StatusCode)
	})
	_ = a.feed(conn, answered)
	<-answered
	wg.Wait()
}

// pour writes a large body as fast as the connection takes it, until the
// server cuts the connection: an oversized body really sent.
func pour(chunked bool) func(net.Conn, <-chan struct{}) error {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	if chunked {
		chunk = append(append([]byte("10000\r\n"), chunk...), "\r\n"...)
	}
	return func(conn net.Conn, _ <-chan struct{}) error {
		for {
			if _, err := conn.Write(chunk); err != nil {
				return err
			}
		}
	}
}

// trickle writes one byte every few milliseconds until answered.
func trickle(conn net.Conn, answered <-chan struct{}) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-answered:
			return nil
		case <-tick.C:
			if _, err := conn.Write([]byte("x")); err != nil {
				return err
			}
		}
	}
}

// TestReceiverFlood is issue 11's attack: 40 connections at once send
// unsigned bodies, oversized (8 MiB, poured as fast as loopback takes them,
// with a length, chunked, or under an unknown peer) and slow (the largest
// allowed length, one byte per 5 ms, naming the known peer ap), each
// starting over as soon as it is refused. Meanwhile the real peer eu sends
// 1,000 items through a queue and a Sender. The heap must stay within
// 64 MiB of where it started, and every batch of eu must be accepted.
//
// The bound is a resource bound, not a timing one. By construction the
// bodies being read hold at most MaxReading x MaxBodyBytes (about 24 MiB;
// ap can take 25 slots, 9.4 MiB); the old receiver read each 8 MiB body
// whole, 6 x 8 MiB at once from the pourers alone, the slow ones on top.
// The heap is sampled every millisecond (runtime/metrics, no stop of the
// world); it counts garbage not yet swept too, which is why the bound is
// well above the live bodies.
func TestReceiverFlood(t *testing.T) {
	const heapBound = 64 << 20
	var delivered atomic.Int64
	recv, err := NewReceiver(ReceiverConfig{
		Self:  "us",
		Peers: map[string][]byte{"eu": secretEU, "ap": secretAP},
		Sink: SinkFuncs{DeliverFunc: func(context.Context, string, *Delivery) bool {
			delivered.Add(1)
			return false
		}},
		Logger: slog.New(slog.DiscardHandler),
		// Short, so slow bodies cycle several times within the test.
		BodyReadTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(recv, ServerConfig{})
	var serving sync.WaitGroup
	serving.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		_ = srv.Close()
		serving.Wait()
	}()
	addr := ln.Addr().String()

	runtime.GC()
	base := heapNow()
	heap := startHeapSampler()

	var nonce atomic.Uint64
	head := func(peer string, length int64) func() []byte {
		return func() []byte {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			return rawHead(peer, ts, strconv.FormatUint(nonce.Add(1), 10), bogusSig, length)
		}
	}
	var attackers []attacker
	for range 6 {
		attackers = append(attackers, attacker{addr, head("eu", 8<<20), pour(false)})
	}
	for range 3 {
		attackers = append(attackers, attacker{addr, head("eu", -1), pour(true)})
	}
	for range 3 {
		attackers = append(attackers, attacker{addr, head("mallory", 8<<20), pour(false)})
	}
	for range 28 { // more than ap's 25 slots
		attackers = append(attackers, attacker{addr, head("ap", MaxBodyBytesDefault), trickle})
	}
	var mu sync.Mutex
	answers := map[int]int{}
	tally := func(code int) {
		mu.Lock()
		answers[code]++
		mu.Unlock()
	}
	flood, stopFlood := context.WithCancel(context.Background())
	var floodWG sync.WaitGroup
	for _, a := range attackers {
		floodWG.Go(func() { a.run(flood, tally) })
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopFlood()
			floodWG.Wait()
		}
	}
	defer stop()

	// Every kind of attack is under way before the real peer starts.
	testwait.For(t, "the flood under way", func() bool {
		st := recv.Stats()
		return st.Reading >= 20 && st.TooLarge > 0 && st.LengthRequired > 0 && st.Forbidden > 0 && st.BusyPeer > 0
	})

	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": "http://" + addr + "/"}})
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, Logger: slog.New(slog.DiscardHandler)})
	defer q.Stop(context.Background())
	const n = 1000
	for range n {
		q.Push("us", del("s1", "a"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	// Slow bodies were cut off by the read deadline at least once.
	testwait.For(t, "a slow body timed out", func() bool { return recv.Stats().ReadTimeout > 0 })
	during := recv.Stats()
	stop()
	peak := heap.finish()

	qs := q.Stats()
	if qs.LostBatches != 0 || qs.SentItems != n || delivered.Load() != n {
		t.Fatalf("real peer during the flood: queue %+v, %d delivered", qs, delivered.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if answers[http.StatusOK] != 0 {
		t.Fatalf("an attacker was answered 200: %v", answers)
	}
	growth := int64(peak) - int64(base)
	t.Logf("heap objects: base %.1f MiB, peak %.1f MiB, growth %.1f MiB (bound %d MiB)",
		float64(base)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20), heapBound>>20)
	t.Logf("receiver during the flood: %+v", during)
	t.Logf("attackers' answers (0: cut off, -1: could not send): %v", answers)
	if growth > heapBound {
		t.Fatalf("heap grew %d bytes under the flood, bound %d", growth, heapBound)
	}
	if during.Accepted < qs.Batches || during.Forbidden == 0 || during.TooLarge == 0 || during.LengthRequired == 0 ||
		during.BusyPeer == 0 || during.ReadTimeout == 0 {
		t.Fatalf("receiver stats = %+v", during)
	}
}
