package forward

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// bogusSig is a well-formed signature (and body hash) that matches
// nothing: an attacker without the secret writes it, and is refused from
// the headers alone.
var bogusSig = strings.Repeat("0", 64)

// wireHead is a request's head as an attacker writes it. length < 0 sends
// the body chunked; an empty field leaves its header out.
type wireHead struct {
	version, peer, to, ts, nonce, bodySum, sig string
	length                                     int64
}

// unsignedHead is a well-formed head claiming peer, for the receiver us,
// signed with nothing.
func unsignedHead(peer string, ts int64, nonce uint64, length int64) wireHead {
	return wireHead{ProtocolVersion, peer, "us", strconv.FormatInt(ts, 10), strconv.FormatUint(nonce, 10), bogusSig, bogusSig, length}
}

// signedHead is the head a sender writes to us for a body of length bytes
// whose SHA-256 is bodySum (hex).
func signedHead(secret []byte, peer string, ts int64, nonce uint64, length int64, bodySum string) wireHead {
	return signedHeadTo(secret, peer, "us", ts, nonce, length, bodySum)
}

// signedHeadTo is signedHead for a request to the peer to.
func signedHeadTo(secret []byte, peer, to string, ts int64, nonce uint64, length int64, bodySum string) wireHead {
	h := unsignedHead(peer, ts, nonce, length)
	h.to = to
	var sig [32]byte
	newSigner(secret).sum(&sig, peer, to, h.ts, h.nonce, length, bodySum)
	h.bodySum, h.sig = bodySum, hex.EncodeToString(sig[:])
	return h
}

// with returns h changed by f.
func with(h wireHead, f func(*wireHead)) wireHead {
	f(&h)
	return h
}

func hexSHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func (h wireHead) bytes() []byte {
	var b bytes.Buffer
	b.WriteString("POST / HTTP/1.1\r\nHost: forward\r\nContent-Type: application/json\r\n")
	for _, f := range [][2]string{{HeaderVersion, h.version}, {HeaderPeer, h.peer}, {HeaderTo, h.to}, {HeaderTimestamp, h.ts}, {HeaderNonce, h.nonce},
		{HeaderBodySHA256, h.bodySum}, {HeaderSignature, h.sig}} {
		if f[1] != "" {
			fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
		}
	}
	if h.length < 0 {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", h.length)
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
// Everything short of a request signed by the peer is refused so: a
// signature that matches nothing, another peer's, one over another length,
// a replayed header set.
func TestReceiverRefusesBeforeReading(t *testing.T) {
	tr := newTestReceiver(t, nil)
	addr := tr.srv.Listener.Addr().String()
	now := tr.clk.Now().Unix()
	body := batchBody("eu", del("s1", "a"))
	n, sum := int64(len(body)), hexSHA256(body)
	genuine := signedHead(secretEU, "eu", now, 77, n, sum)
	conn, br := sendHead(t, addr, append(genuine.bytes(), body...))
	if resp := readAnswer(t, br); resp.StatusCode != 200 {
		t.Fatalf("genuine batch: %d", resp.StatusCode)
	}
	conn.Close()
	for _, tc := range []struct {
		name string
		head wireHead
		want int
	}{
		{"unknown peer", signedHead([]byte("guess"), "mallory", now, 1, n, sum), 403},
		{"missing peer", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.peer = "" }), 403},
		{"no version (a version 1 request)", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.version = "" }), 400},
		{"another version", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.version = "4" }), 400},
		{"version 2 (no destination signed)", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.version, h.to = "2", "" }), 400},
		{"missing destination", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.to = "" }), 400},
		{"malformed timestamp", with(unsignedHead("eu", now, 1, n), func(h *wireHead) { h.ts = "-5" }), 400},
		{"timestamp with a leading zero", with(unsignedHead("eu", now, 1, n), func(h *wireHead) { h.ts = "0" + h.ts }), 400},
		{"malformed nonce", with(unsignedHead("eu", now, 1, n), func(h *wireHead) { h.nonce = "12a" }), 400},
		{"nonce over 2^64-1", with(unsignedHead("eu", now, 1, n), func(h *wireHead) { h.nonce = "18446744073709551616" }), 400},
		{"missing body hash", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.bodySum = "" }), 400},
		{"uppercase body hash", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.bodySum = strings.ToUpper(sum) }), 400},
		{"missing signature", with(unsignedHead("eu", now, 1, n), func(h *wireHead) { h.sig = "" }), 403},
		{"malformed signature", with(unsignedHead("eu", now, 1, n), func(h *wireHead) { h.sig = "zz" }), 403},
		{"signature matching nothing", unsignedHead("eu", now, 1, n), 403},
		{"signed by another peer", signedHead(secretAP, "eu", now, 1, n, sum), 403},
		{"signed for another length", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.length = n + 1 }), 403},
		{"signed for another body", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.bodySum = hexSHA256(nil) }), 403},
		{"signed as another peer", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.peer = "ap" }), 403},
		{"signed for another destination", signedHeadTo(secretEU, "eu", "ap", now, 1, n, sum), 403},
		{"destination changed after signing", with(signedHead(secretEU, "eu", now, 1, n, sum), func(h *wireHead) { h.to = "ap" }), 403},
		{"stale timestamp", signedHead(secretEU, "eu", now-301, 1, n, sum), 400},
		{"future timestamp", signedHead(secretEU, "eu", now+61, 1, n, sum), 400},
		{"chunked", signedHead(secretEU, "eu", now, 1, -1, sum), 411},
		{"one byte over MaxBodyBytes", signedHead(secretEU, "eu", now, 1, MaxBodyBytesDefault+1, sum), 413},
		{"8 MiB", unsignedHead("eu", now, 1, 8<<20), 413},
		{"replayed header set", genuine, 403},
		{"own id", unsignedHead("us", now, 1, n), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, br := sendHead(t, addr, tc.head.bytes())
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
	if st.ReadTimeout != 0 || st.Reading != 0 || st.TooLarge != 2 || st.LengthRequired != 1 || st.Replayed != 1 || st.Accepted != 1 ||
		st.Forbidden != 11 || st.BadRequest != 12 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestReceiverReadingLimits holds bodies open (a signed head, no body)
// and checks the per-peer and total limits refuse the next ones with 503
// and Retry-After. Only requests the peer signed take its slots: heads
// claiming its id without its signature are refused at once, full slots
// or not, and take none.
func TestReceiverReadingLimits(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) {
		c.MaxReadingPerPeer = 2
		c.MaxReading = 3
		c.BodyReadTimeout = time.Minute // held until the test lets go
	})
	addr := tr.srv.Listener.Addr().String()
	now := tr.clk.Now().Unix()
	nonce := uint64(100)
	held := hexSHA256(bytes.Repeat([]byte("x"), 1000))
	secrets := map[string][]byte{"eu": secretEU, "ap": secretAP}
	hold := func(peer string) (net.Conn, *bufio.Reader) {
		nonce++
		return sendHead(t, addr, signedHead(secrets[peer], peer, now, nonce, 1000, held).bytes())
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
	unsigned := func() {
		t.Helper()
		for range 5 {
			nonce++
			_, br := sendHead(t, addr, unsignedHead("eu", now, nonce, 1000).bytes())
			if resp := readAnswer(t, br); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("unsigned head claiming eu: %d", resp.StatusCode)
			}
		}
	}
	unsigned()
	if st := tr.recv.Stats(); st.Reading != 0 || st.Forbidden != 5 {
		t.Fatalf("unsigned heads took slots: %+v", st)
	}
	eu1, _ := hold("eu")
	eu2, _ := hold("eu")
	reading(2)
	busy("eu")
	unsigned() // 403, not 503: refused before the slots are looked at
	body := batchBody("eu", del("s1", "a"))
	if code, out := tr.do(t, signedReq{peer: "eu", secret: secretEU, ts: now, nonce: 1, body: body}); code != http.StatusServiceUnavailable {
		t.Fatalf("eu's own batch with its slots taken: %d %s", code, out)
	}
	ap1, _ := hold("ap")
	reading(3)
	busy("ap") // ap has a slot left, the total has not
	if st := tr.recv.Stats(); st.BusyPeer != 2 || st.BusyTotal != 1 || st.Forbidden != 10 {
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

// TestReceiverBodyReadTimeout: a signed body that stops coming is cut off
// after BodyReadTimeout with 408, and its connection closed. Proving the
// headers earns a slot for BodyReadTimeout, no longer.
func TestReceiverBodyReadTimeout(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.BodyReadTimeout = 100 * time.Millisecond })
	now := tr.clk.Now().Unix()
	full := batchBody("eu", del("s1", "a"))
	head := signedHead(secretEU, "eu", now, 5, int64(len(full)), hexSHA256(full))
	conn, br := sendHead(t, tr.srv.Listener.Addr().String(), append(head.bytes(), full[:len(full)/2]...))
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

// TestReceiverFlood is issue 18's attack on top of issue 11's: 68
// connections at once. 28 trickle unsigned bodies claiming the real peer
// eu (the largest allowed length, one byte per 5 ms): before version 2
// they took eu's reading slots until BodyReadTimeout, and eu's batches
// got 503. Beside them, oversized bodies are poured as fast as loopback
// takes them (8 MiB with a length naming eu, chunked naming eu, under an
// unknown peer), and 28 slow bodies signed by the known peer ap (a peer on
// a slow link, or its secret in the wrong hands) hold more than ap's 25
// slots. Each attacker starts over as soon as it is refused. Meanwhile eu
// sends 1,000 items through a queue with a gap policy and a Sender: every
// batch of eu must be accepted (no 503, no lost batch, no gap marker), and
// the heap must stay within 64 MiB of where it started.
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
	var delivered, markers atomic.Int64
	recv, err := NewReceiver(ReceiverConfig{
		Self:  "us",
		Peers: map[string][]byte{"eu": secretEU, "ap": secretAP},
		Sink: SinkFuncs{DeliverFunc: func(_ context.Context, _ string, d *Delivery) bool {
			if IsGapMarker(d) {
				markers.Add(1)
			} else {
				delivered.Add(1)
			}
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
	unsigned := func(peer string, length int64) func() []byte {
		return func() []byte { return unsignedHead(peer, time.Now().Unix(), nonce.Add(1), length).bytes() }
	}
	// ap signs a head for the largest allowed body, which never comes.
	slowSum := hexSHA256(bytes.Repeat([]byte("x"), MaxBodyBytesDefault))
	signedAP := func() []byte {
		return signedHead(secretAP, "ap", time.Now().Unix(), nonce.Add(1), MaxBodyBytesDefault, slowSum).bytes()
	}
	type kind struct {
		name  string
		count int
		a     attacker
	}
	kinds := []kind{
		{"eu unsigned slow", 28, attacker{addr, unsigned("eu", MaxBodyBytesDefault), trickle}},
		{"eu 8 MiB", 6, attacker{addr, unsigned("eu", 8<<20), pour(false)}},
		{"eu chunked", 3, attacker{addr, unsigned("eu", -1), pour(true)}},
		{"mallory 8 MiB", 3, attacker{addr, unsigned("mallory", 8<<20), pour(false)}},
		{"ap signed slow", 28, attacker{addr, signedAP, trickle}}, // more than ap's 25 slots
	}
	var mu sync.Mutex
	answers := map[string]map[int]int{}
	flood, stopFlood := context.WithCancel(context.Background())
	var floodWG sync.WaitGroup
	for _, k := range kinds {
		answers[k.name] = map[int]int{} // all before any attacker runs
	}
	for _, k := range kinds {
		tally := func(code int) {
			mu.Lock()
			answers[k.name][code]++
			mu.Unlock()
		}
		for range k.count {
			floodWG.Go(func() { k.a.run(flood, tally) })
		}
	}
	answered := func(kind string) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range answers[kind] {
			n += c
		}
		return n
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
		return st.Reading >= 20 && st.TooLarge > 0 && st.LengthRequired > 0 && st.Forbidden > 0 && st.BusyPeer > 0 &&
			answered("eu unsigned slow") >= 28
	})

	quiet := slog.New(slog.DiscardHandler)
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": "http://" + addr + "/"}})
	gaps := NewGapPolicy(GapConfig{Logger: quiet})
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, OnOverflow: gaps.Overflow, OnTaken: gaps.Taken, OnLost: gaps.Lost, Logger: quiet})
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
	// ap's slow bodies were cut off by the read deadline at least once.
	testwait.For(t, "a slow body timed out", func() bool { return recv.Stats().ReadTimeout > 0 })
	during := recv.Stats()
	stop()
	peak := heap.finish()

	qs, gs := q.Stats(), gaps.Stats()
	if qs.LostBatches != 0 || qs.SentItems != n || delivered.Load() != n || gs.Markers != 0 || markers.Load() != 0 {
		t.Fatalf("real peer during the flood: queue %+v, gaps %+v, %d delivered, %d markers", qs, gs, delivered.Load(), markers.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	growth := int64(peak) - int64(base)
	t.Logf("heap objects: base %.1f MiB, peak %.1f MiB, growth %.1f MiB (bound %d MiB)",
		float64(base)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20), heapBound>>20)
	t.Logf("receiver during the flood: %+v", during)
	t.Logf("attackers' answers (0: cut off, -1: could not send): %v", answers)
	for name, codes := range answers {
		if codes[http.StatusOK] != 0 {
			t.Fatalf("attacker %q was answered 200: %v", name, codes)
		}
	}
	// Unsigned bodies claiming eu are refused from their headers: never a
	// slot (503), never read (408, or 400 for a body cut short).
	for code := range answers["eu unsigned slow"] {
		if code != http.StatusForbidden && code != 0 && code != -1 {
			t.Fatalf("unsigned slow bodies claiming eu: %v", answers["eu unsigned slow"])
		}
	}
	if growth > heapBound {
		t.Fatalf("heap grew %d bytes under the flood, bound %d", growth, heapBound)
	}
	if during.Accepted < qs.Batches || during.Forbidden == 0 || during.TooLarge == 0 || during.LengthRequired == 0 ||
		during.BusyPeer == 0 || during.ReadTimeout == 0 {
		t.Fatalf("receiver stats = %+v", during)
	}
}

// (Was: a signed body of tiny items took some 500 times its size to decode,
// after its reading slot was released.)
func TestReceiverDecodeMemoryBoundedByBody(t *testing.T) {
	tr := newTestReceiver(t, nil)
	now := tr.clk.Now().Unix()
	// As many `{}` items (an unknown kind, skipped) as the default cap
	// takes; the second body ends in an item of a newer kind whose field
	// clashes in type with a known kind's, which decodes the items one by
	// one, as a bad item does.
	fill := func(last string) []byte {
		b := []byte(`{"from":"eu","items":[`)
		for len(b)+len(last)+5 < MaxBodyBytesDefault {
			b = append(b, "{},"...)
		}
		return append(append(b, last...), "]}"...)
	}
	allocs := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	for i, body := range [][]byte{fill("{}"), fill(`{"kind":"future","userId":"not a number"}`)} {
		req := signedReq{peer: "eu", secret: secretEU, ts: now, nonce: uint64(i + 1), body: body}
		before := allocs()
		code, out := tr.do(t, req)
		used := allocs() - before
		if code != 200 {
			t.Fatalf("body %d: %d %s", i, code, out)
		}
		// The body itself, read into one buffer, and the request's and
		// answer's own bytes on both ends; decoding keeps what the items
		// make, here nothing.
		if limit := uint64(4 * len(body)); used > limit {
			t.Fatalf("body %d: handling a %d-byte body of %d tiny items allocated %d bytes (%.0f times the body), want at most %d",
				i, len(body), tr.recv.Stats().Items, used, float64(used)/float64(len(body)), limit)
		}
	}
}
