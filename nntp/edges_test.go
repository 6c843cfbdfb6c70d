package nntp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// scriptedServer is a scripted NNTP server on a loopback listener: it
// greets every connection with 200, then hands each command line to
// handle, which writes the answer. handle returns false to end the session
// (the connection is then closed). Its goroutines are waited for at
// cleanup.
func scriptedServer(t *testing.T, handle func(cmd string, r *bufio.Reader, w *bufio.Writer) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[nc] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				r := bufio.NewReader(nc)
				w := bufio.NewWriter(nc)
				w.WriteString("200 scripted server ready\r\n")
				if w.Flush() != nil {
					return
				}
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					cont := handle(strings.TrimRight(line, "\r\n"), r, w)
					if w.Flush() != nil || !cont {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestOverSeqStopThenCut: OverSeq documents "Stopping the loop
// early reads the rest of the response and drops it". When the drain after
// the consumer's break fails (the connection is cut), Over returns an I/O
// error that is not the internal "stopped" sentinel, and OverSeq calls
// yield again after it returned false: the Go runtime panics with "range
// function continued iteration after function for loop body returned
// false". Expected: no yield after the consumer stopped (the error is only
// visible through c.Err()).
func TestOverSeqStopThenCut(t *testing.T) {
	s := startServer(t, nntptest.Config{}, 100)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	if _, err := c.Group(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	s.SetFaults(nntptest.Faults{CutAfter: 5})
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		for _, err := range c.OverSeq(ctx, 1, 100) {
			if err != nil {
				t.Errorf("unexpected error pair: %v", err)
			}
			break // stop after the first overview
		}
	}()
	if panicked != nil {
		t.Fatalf("OverSeq yielded after the loop body returned false: panic %v", panicked)
	}
}

// TestOverPipelinedOneRangeFallsBackToXOVER: Over/OverLines fall back
// to XOVER when a server answers OVER with 500 (an RFC 2980-only server),
// and OverPipelined "learns whether OVER is known" first, but only when it
// has more than one range (commands.go:233). With a single range it sends
// OVER in the pipeline and overResponse's 500 is returned as
// ErrNotSupported, although the same call with Over works. Expected: the
// overview via XOVER.
func TestOverPipelinedOneRangeFallsBackToXOVER(t *testing.T) {
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		verb, _, _ := strings.Cut(cmd, " ")
		switch strings.ToUpper(verb) {
		case "MODE":
			w.WriteString("200 reader\r\n")
		case "GROUP":
			w.WriteString("211 3 1 3 g\r\n")
		case "XOVER":
			w.WriteString("224 overview follows\r\n")
			for n := 1; n <= 3; n++ {
				fmt.Fprintf(w, "%d\tsubj %d\tfrom\tdate\t<%d@x>\t\t100\t10\r\n", n, n, n)
			}
			w.WriteString(".\r\n")
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default: // OVER included: an RFC 977/2980 server
			w.WriteString("500 unknown command\r\n")
		}
		return true
	})
	ctx := context.Background()
	c := dial(t, Config{Addr: addr})
	if _, err := c.Group(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	var got []int64
	err := c.OverPipelined(ctx, []Range{{1, 3}}, func(_ Range, ov Overview) error {
		got = append(got, ov.Number)
		return nil
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("OverPipelined of one range on an XOVER-only server: %d lines, err %v (want 3, nil)", len(got), err)
	}
}

// TestPostReaderErrorAborts: when the article reader
// fails mid-way, Post writes the terminating "." (commands.go:439) before
// breaking the connection. The server then receives a complete-looking but
// truncated article and posts it. The connection is closed right after
// anyway (c.fail), so "staying in step" buys nothing. Expected: the
// terminator is never sent; the connection is closed so the server drops
// the partial article (NNTP has no other way to abort a POST).
func TestPostReaderErrorAborts(t *testing.T) {
	result := make(chan string, 1)
	addr := scriptedServer(t, func(cmd string, r *bufio.Reader, w *bufio.Writer) bool {
		switch strings.ToUpper(cmd) {
		case "MODE READER":
			w.WriteString("200 reader\r\n")
		case "POST":
			w.WriteString("340 send article\r\n")
			if w.Flush() != nil {
				result <- "flush failed"
				return false
			}
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					result <- "aborted" // connection closed before the terminator
					return false
				}
				if strings.TrimRight(line, "\r\n") == "." {
					result <- "terminated" // a (truncated) article would be posted
					w.WriteString("240 article received\r\n")
					return true
				}
			}
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	c := dial(t, Config{Addr: addr})
	art := io.MultiReader(
		strings.NewReader("From: a@example.invalid\r\nNewsgroups: g\r\nSubject: s\r\n\r\nfirst half of the body\r\n"),
		iotest.ErrReader(errors.New("disk read failed")),
	)
	if err := c.Post(context.Background(), art); err == nil {
		t.Fatal("Post with a failing reader succeeded")
	}
	if got := <-result; got != "aborted" {
		t.Fatalf("server saw the article %s: a truncated article was submitted for posting", got)
	}
}

// TestOverPipelinedDeadlinePerCommand: Config.CommandTimeout
// "bounds one command, its whole response included", but OverPipelined
// arms one deadline (begin, commands.go:240) for the whole train of OVER
// commands. A long fetch whose every command answers well within the
// timeout fails with i/o timeout once the sum exceeds it (the CLI "nntp
// over" fetches a whole group in one call). Expected: each response gets
// its own CommandTimeout (re-arm the deadline per command/response).
func TestOverPipelinedDeadlinePerCommand(t *testing.T) {
	s := startServer(t, nntptest.Config{}, 200)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr(), CommandTimeout: time.Second})
	if _, err := c.Group(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	// Each response comes 150 ms after its command is read: the twelve
	// take about 1.8 s, each well within its second.
	s.SetFaults(nntptest.Faults{Delay: 150 * time.Millisecond})
	var ranges []Range
	for i := int64(0); i < 12; i++ {
		ranges = append(ranges, Range{i*10 + 1, i*10 + 10})
	}
	n := 0
	start := time.Now()
	err := c.OverPipelined(ctx, ranges, func(Range, Overview) error { n++; return nil })
	if err != nil {
		t.Fatalf("after %v and %d lines: %v (each command answered in ~150ms, CommandTimeout 1s)", time.Since(start).Round(time.Millisecond), n, err)
	}
}

// TestPanicInCallbackBreaksConn: when fn panics in the middle of
// a multi-line response (here inside an Over callback), Pool.Do's deferred
// Release (pool.go:415) puts the connection back in the idle list because
// c.Err() is nil, although the rest of the response is still unread. The
// next caller that gets it reads overview lines as status lines. Expected:
// a connection abandoned mid-response (panic in a callback) is marked
// broken and closed, not reused.
func TestPanicInCallbackBreaksConn(t *testing.T) {
	s := startServer(t, nntptest.Config{}, 500)
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 1, HealthEvery: -1})
	ctx := context.Background()
	func() {
		defer func() { recover() }()
		_ = p.Do(ctx, func(c *Conn) error {
			if _, err := c.Group(ctx, testGroup); err != nil {
				return err
			}
			return c.Over(ctx, 1, 500, func(Overview) error { panic("callback bug") })
		})
	}()
	err := p.Do(ctx, func(c *Conn) error {
		_, err := c.Group(ctx, testGroup)
		return err
	})
	if err != nil {
		t.Fatalf("next user of the pool got an out-of-step connection: %v", err)
	}
}

// TestTooManyAfterLoginDuringCompressAuto: RFC 3977 lets a server answer
// any command with 400 and close; providers that count connections per
// account after login say "400 Too many connections". Such an answer to
// XFEATURE COMPRESS GZIP (CompressAuto, no COMPRESS DEFLATE advertised)
// fails Dial with ErrTooManyConnections. (Was: CompressGzip took every
// refusal not matching ErrUnavailable for "not supported", and a 400 whose
// text says "too many" matches ErrTooManyConnections alone: Dial returned a
// connection already broken, with no error.)
func TestTooManyAfterLoginDuringCompressAuto(t *testing.T) {
	t.Parallel()
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		verb, _, _ := strings.Cut(strings.ToUpper(cmd), " ")
		switch verb {
		case "MODE":
			w.WriteString("200 reader\r\n")
		case "CAPABILITIES":
			w.WriteString("101 caps\r\nVERSION 2\r\nREADER\r\nOVER\r\n.\r\n")
		case "XFEATURE":
			w.WriteString("400 Too many connections for your account\r\n")
			return false
		case "DATE":
			w.WriteString("111 20240101000000\r\n")
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Addr: addr, Compress: CompressAuto})
	if err == nil {
		broken := c.Err()
		c.Close()
		t.Fatalf("Dial succeeded although the server refused the connection (400 too many connections); the returned Conn is already broken: Err() = %v", broken)
	}
	if !errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("Dial error %v does not match ErrTooManyConnections", err)
	}
}

// TestTooManyAfterLoginPoolGate: the same refusal through a pool: Acquire
// fails and trips the gate. (Was: it handed out the dead connection, and
// the gate never tripped.)
func TestTooManyAfterLoginPoolGate(t *testing.T) {
	t.Parallel()
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		verb, _, _ := strings.Cut(strings.ToUpper(cmd), " ")
		switch verb {
		case "MODE":
			w.WriteString("200 reader\r\n")
		case "CAPABILITIES":
			w.WriteString("101 caps\r\nVERSION 2\r\nREADER\r\n.\r\n")
		case "XFEATURE":
			w.WriteString("400 too many connections\r\n")
			return false
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	p := newPool(t, PoolConfig{Conn: Config{Addr: addr, Compress: CompressAuto}, Size: 2, HealthEvery: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.Acquire(ctx)
	if err == nil {
		broken := c.Err()
		p.Release(c)
		t.Fatalf("Acquire handed out a connection the server had refused (Err() = %v); gate tripped: %v", broken, p.Stats().Gated)
	}
	if st := p.Stats(); st.TooMany != 1 || !st.Gated {
		t.Fatalf("after a too-many refusal: TooMany=%d Gated=%v (want 1, true); err %v", st.TooMany, st.Gated, err)
	}
}

// TestOverNineteenDigitNumbers: the article numbers GROUP accepts (up to
// 2^63-1, 19 digits) are accepted in overview lines too. (Was: overview
// lines took at most 18 digits, so every line of such a group was "bad
// article number".)
func TestOverNineteenDigitNumbers(t *testing.T) {
	t.Parallel()
	const n = int64(5000000000000000001) // 19 digits, < 2^63
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		verb, _, _ := strings.Cut(strings.ToUpper(cmd), " ")
		switch verb {
		case "MODE":
			w.WriteString("200 reader\r\n")
		case "GROUP":
			fmt.Fprintf(w, "211 1 %d %d g\r\n", n, n)
		case "OVER":
			w.WriteString("224 overview follows\r\n")
			fmt.Fprintf(w, "%d\tsubject\tfrom\tdate\t<id@x>\t\t100\t10\r\n", n)
			w.WriteString(".\r\n")
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(t, Config{Addr: addr})
	g, err := c.Group(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	err = c.Over(ctx, g.Low, g.High, func(ov Overview) error {
		got = append(got, ov.Number)
		return nil
	})
	if err != nil || len(got) != 1 || got[0] != n {
		t.Fatalf("GROUP gave %d-%d; OVER of it: %v, err %v", g.Low, g.High, got, err)
	}
}

// TestAuthRequiredAfterReloginRetires: a command answered 480 again after
// a new login (the server wants more than this login) is tried twice in
// all, then fails with ErrAuth and retires the connection.
// (Was: the connection was kept, and every command on it got the 480.)
func TestAuthRequiredAfterReloginRetires(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var logins, groups int
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		mu.Lock()
		defer mu.Unlock()
		f := strings.Fields(strings.ToUpper(cmd))
		switch {
		case f[0] == "MODE":
			w.WriteString("200 reader\r\n")
		case f[0] == "AUTHINFO" && len(f) > 1 && f[1] == "USER":
			w.WriteString("381 password required\r\n")
		case f[0] == "AUTHINFO":
			logins++
			w.WriteString("281 ok\r\n")
		case f[0] == "GROUP":
			groups++
			w.WriteString("480 this group needs another account\r\n")
		case f[0] == "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(t, Config{Addr: addr, User: "u", Pass: "p"})
	_, err := c.Group(ctx, "alt.restricted")
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("GROUP: %v, want ErrAuth", err)
	}
	if c.Err() == nil {
		t.Fatal("the connection is still usable after a 480 that a new login did not cure")
	}
	mu.Lock()
	defer mu.Unlock()
	if groups != 2 || logins != 2 {
		t.Fatalf("%d GROUP commands and %d logins (Dial's included), want 2 and 2", groups, logins)
	}
}

// TestDateTrailingText: RFC 3977 section 3.2 lets a server add text after
// the last argument of a status line: "111 yyyymmddhhmmss text" is a valid
// answer to DATE, in UTC.
// (Was: the text after the timestamp made Date fail with "bad timestamp".)
func TestDateTrailingText(t *testing.T) {
	t.Parallel()
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		switch strings.ToUpper(cmd) {
		case "MODE READER":
			w.WriteString("200 reader\r\n")
		case "DATE":
			w.WriteString("111 20240229235958 Server date and time\r\n")
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(t, Config{Addr: addr})
	got, err := c.Date(ctx)
	if want := time.Date(2024, 2, 29, 23, 59, 58, 0, time.UTC); err != nil || !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("Date = %v, %v; want %v", got, err, want)
	}
}

// TestOverPipelinedReloginWithSeveralRefused: a login that expires with
// four OVER commands in flight gets each of them a 480; OverPipelined logs
// in again and goes on from the first refused range.
// (Was: the last 480, not the first, was taken as the latest refusal, so
// OverPipelined failed with ErrAuth without logging in again and left the
// connection in the pool.)
func TestOverPipelinedReloginWithSeveralRefused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var authed bool
	var logins, overs int
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		mu.Lock()
		defer mu.Unlock()
		f := strings.Fields(strings.ToUpper(cmd))
		switch {
		case f[0] == "MODE":
			w.WriteString("200 reader\r\n")
		case f[0] == "AUTHINFO" && len(f) > 1 && f[1] == "USER":
			w.WriteString("381 password required\r\n")
		case f[0] == "AUTHINFO":
			logins++
			authed = true
			w.WriteString("281 ok\r\n")
		case f[0] == "OVER" && len(f) > 1:
			if !authed {
				w.WriteString("480 authentication required\r\n")
				return true
			}
			var first, last int
			fmt.Sscanf(f[1], "%d-%d", &first, &last)
			w.WriteString("224 overview follows\r\n")
			for n := first; n <= last; n++ {
				fmt.Fprintf(w, "%d\tsubj %d\tfrom\tdate\t<%d@x>\t\t100\t10\r\n", n, n, n)
			}
			w.WriteString(".\r\n")
			// The login expires after the first command of the train
			// (the first range goes alone): the three behind it get 480.
			if overs++; overs == 2 {
				authed = false
			}
		case f[0] == "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(t, Config{Addr: addr, User: "u", Pass: "p", PipelineDepth: 4})
	var got []int64
	err := c.OverPipelined(ctx, []Range{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}}, func(_ Range, ov Overview) error {
		got = append(got, ov.Number)
		return nil
	})
	if err != nil {
		t.Fatalf("OverPipelined after the login expired mid-train: %v (lines %v, conn err %v)", err, got, c.Err())
	}
	for i, n := range got {
		if n != int64(i+1) {
			t.Fatalf("lines %v, want 1..10 once each in order", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 10 || logins != 2 {
		t.Fatalf("%d lines and %d logins (Dial's included), want 10 and 2", len(got), logins)
	}
}

// TestHeadManyContinuationLinesLinear: HEAD unfolds a field of many
// continuation lines in allocations linear in its size.
// (Was: each continuation line was appended to the field's value string,
// copying it every time: a 4 MB header of 20,000 folded lines kept a CPU
// busy for half a minute.)
func TestHeadManyContinuationLinesLinear(t *testing.T) {
	const lines = 20000
	var resp []byte // built before measuring: the server runs in this process
	resp = append(resp, "221 1 <a@b>\r\nSubject: start\r\n"...)
	for range lines {
		resp = append(resp, " yy\r\n"...)
	}
	resp = append(resp, "X-Next: after\r\n.\r\n"...)
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		verb, _, _ := strings.Cut(strings.ToUpper(cmd), " ")
		switch verb {
		case "MODE":
			w.WriteString("200 reader\r\n")
		case "HEAD":
			w.Write(resp)
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dial(t, Config{Addr: addr})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h, err := c.Head(ctx, "1")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if want := "start" + strings.Repeat(" yy", lines); h.Get("Subject") != want || h.Get("X-Next") != "after" {
		t.Fatalf("Subject of %d bytes, X-Next %q: not unfolded as sent", len(h.Get("Subject")), h.Get("X-Next"))
	}
	// Linear work allocates a small multiple of the 60 KB value (and the
	// connection's buffers); copying it per line allocates ~600 MB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("HEAD of a %d-byte header allocated %d MB: the unfolding is quadratic", len(resp), alloc>>20)
	}
}

// TestHeldResponsesBounded: the answers kept whole (CAPABILITIES, which
// Dial asks with CompressAuto, LIST OVERVIEW.FMT and HEAD) fail past 1 MiB
// with a ProtocolError and a broken connection.
// (Was: they were held however long: a server sending lines without end
// grew the client's memory at the speed of the link until the deadline.)
func TestHeldResponsesBounded(t *testing.T) {
	t.Parallel()
	// A header line too; 64 MiB of them, more than socket buffers hold, so
	// a client that stops reading early makes the server's writes fail.
	line := "X-Pad: " + strings.Repeat("x", 1000) + "\r\n"
	const lines = 64 << 10
	type result struct{ cmd, outcome string }
	results := make(chan result, 8)
	addr := scriptedServer(t, func(cmd string, _ *bufio.Reader, w *bufio.Writer) bool {
		verb, _, _ := strings.Cut(strings.ToUpper(cmd), " ")
		switch verb {
		case "MODE":
			w.WriteString("200 reader\r\n")
			return true
		case "CAPABILITIES":
			w.WriteString("101 capabilities\r\n")
		case "LIST":
			w.WriteString("215 overview format\r\n")
		case "HEAD":
			w.WriteString("221 1 <a@b>\r\nSubject: s\r\n")
		case "XFEATURE":
			w.WriteString("500 unknown\r\n")
			return true
		case "QUIT":
			w.WriteString("205 bye\r\n")
			return false
		default:
			w.WriteString("500 unknown\r\n")
			return true
		}
		for range lines {
			if _, err := w.WriteString(line); err != nil {
				results <- result{verb, "stopped"}
				return false
			}
		}
		w.WriteString(".\r\n")
		results <- result{verb, "sent all"}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name, verb string
		run        func() (*Conn, error)
	}{
		{"CAPABILITIES at Dial", "CAPABILITIES", func() (*Conn, error) {
			c, err := Dial(ctx, Config{Addr: addr, Compress: CompressAuto})
			if c != nil {
				t.Cleanup(func() { c.Close() })
			}
			return c, err
		}},
		{"LIST OVERVIEW.FMT", "LIST", func() (*Conn, error) {
			c := dial(t, Config{Addr: addr})
			_, err := c.OverviewFormat(ctx)
			return c, err
		}},
		{"HEAD", "HEAD", func() (*Conn, error) {
			c := dial(t, Config{Addr: addr})
			_, err := c.Head(ctx, "1")
			return c, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.run()
			var pe *ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, errTooLarge) {
				t.Fatalf("a %d MiB answer: %v, want a *ProtocolError for a response too large", lines>>10, err)
			}
			if c != nil && c.Err() == nil {
				t.Fatal("connection still usable after an answer past the bound")
			}
			if r := <-results; r.cmd != tc.verb || r.outcome != "stopped" {
				t.Fatalf("server: %s %s, want %s stopped (the client read on instead of closing)", r.cmd, r.outcome, tc.verb)
			}
		})
	}
}
