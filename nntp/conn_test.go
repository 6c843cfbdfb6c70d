package nntp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

func TestOverStreamsEveryLine(t *testing.T) {
	t.Parallel()
	const n = 3000
	s := startServer(t, nntptest.Config{}, n)
	noDeflate := startServer(t, nntptest.Config{NoDeflate: true}, n)
	noComp := startServer(t, nntptest.Config{NoCompress: true}, n)
	for _, tc := range []struct {
		name string
		srv  *nntptest.Server
		comp Compression
		want Compression
	}{
		{"plain", s, CompressOff, CompressOff},
		{"deflate", s, CompressDeflate, CompressDeflate},
		{"gzip", s, CompressGzip, CompressGzip},
		{"auto picks deflate", s, CompressAuto, CompressDeflate},
		{"auto falls back to gzip", noDeflate, CompressAuto, CompressGzip},
		{"auto stays plain", noComp, CompressAuto, CompressOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := dial(t, Config{Addr: tc.srv.Addr(), Compress: tc.comp})
			if got := c.Compression(); got != tc.want {
				t.Fatalf("compression %v, want %v", got, tc.want)
			}
			g, err := c.Group(ctx, testGroup)
			if err != nil {
				t.Fatal(err)
			}
			if g.Low != 1 || g.High != n || g.Count != n || g.Name != testGroup {
				t.Fatalf("group %+v", g)
			}
			next := int64(1)
			var sample Overview
			err = c.Over(ctx, 1, n, func(ov Overview) error {
				if ov.Number != next {
					return fmt.Errorf("got article %d, want %d", ov.Number, next)
				}
				if !strings.Contains(ov.Subject, `yEnc (`) || !strings.HasPrefix(ov.MessageID, "<") || ov.Bytes == 0 || ov.Lines == 0 {
					return fmt.Errorf("implausible overview %+v", ov)
				}
				if ov.Number == 77 {
					sample = ov
				}
				next++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != n+1 {
				t.Fatalf("saw %d lines, want %d", next-1, n)
			}
			// The overview must agree with the article itself: byte and
			// line counts, message-id by number and by id.
			var body bytes.Buffer
			info, err := c.Body(ctx, "77", &body)
			if err != nil {
				t.Fatal(err)
			}
			if info.Number != 77 || info.MessageID != sample.MessageID {
				t.Fatalf("BODY 77 answered %+v, overview says %s", info, sample.MessageID)
			}
			if lines := int64(bytes.Count(body.Bytes(), []byte("\r\n"))); lines != sample.Lines {
				t.Fatalf("body has %d lines, overview says %d", lines, sample.Lines)
			}
			var art bytes.Buffer
			if _, err := c.Article(ctx, sample.MessageID, &art); err != nil {
				t.Fatal(err)
			}
			if x := sample.Xref(); x != "nntptest "+testGroup+":77" {
				t.Fatalf("xref %q", x)
			}
			if int64(art.Len()) != sample.Bytes {
				t.Fatalf("article has %d bytes, overview says %d", art.Len(), sample.Bytes)
			}
		})
	}
}

func TestDotStuffingRoundTrip(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 1)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	body := ".leading dot\n..two dots\n.\nplain\n"
	art := "From: tester <t@example.invalid>\nNewsgroups: " + testGroup + "\nSubject: dots\nMessage-ID: <dots@example.invalid>\n\n" + body
	if err := c.Post(ctx, strings.NewReader(art)); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := c.Body(ctx, "<dots@example.invalid>", &got); err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(body, "\n", "\r\n"); got.String() != want {
		t.Fatalf("body %q, want %q", got.String(), want)
	}
	h, err := c.Head(ctx, "<dots@example.invalid>")
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("subject") != "dots" || h.Number != 2 {
		t.Fatalf("head %+v", h)
	}
	if _, err := c.Group(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	info, err := c.Stat(ctx, "2")
	if err != nil || info.MessageID != "<dots@example.invalid>" {
		t.Fatalf("stat %+v %v", info, err)
	}
	if _, err := c.Stat(ctx, "<nope@example.invalid>"); !errors.Is(err, ErrNoSuchArticle) {
		t.Fatalf("stat of a missing article: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("connection broken by a refusal: %v", c.Err())
	}
}

func TestListAndFormat(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 10)
	s.AddGroup("alt.binaries.other", 5)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	var names []string
	err := c.ListActive(ctx, "alt.binaries.*", func(g ActiveGroup) error {
		names = append(names, fmt.Sprintf("%s:%d-%d", g.Name, g.Low, g.High))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, ","); got != "alt.binaries.other:1-5,alt.binaries.test:1-10" {
		t.Fatalf("LIST ACTIVE: %s", got)
	}
	f, err := c.OverviewFormat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 8 || f[0] != "Subject:" || f[7] != "Xref:full" {
		t.Fatalf("OVERVIEW.FMT %q", f)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil || !hasCap(caps, "COMPRESS", "DEFLATE") || !hasCap(caps, "READER") {
		t.Fatalf("capabilities %q %v", caps, err)
	}
	if _, err := c.Group(ctx, "no.such.group"); !errors.Is(err, ErrNoSuchGroup) {
		t.Fatalf("missing group: %v", err)
	}
}

func TestGrowingGroup(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 100)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	if _, err := c.Group(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grow(testGroup, 50); err != nil {
		t.Fatal(err)
	}
	g, err := c.Group(ctx, testGroup)
	if err != nil || g.High != 150 {
		t.Fatalf("after growth %+v %v", g, err)
	}
	n := 0
	if err := c.Over(ctx, 101, 150, func(Overview) error { n++; return nil }); err != nil || n != 50 {
		t.Fatalf("new articles: %d %v", n, err)
	}
	// A range past the high mark is "no articles", not an error.
	if err := c.Over(ctx, 1000, 2000, func(Overview) error { t.Error("line past the end"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestPipelinedOver(t *testing.T) {
	t.Parallel()
	const n = 2500
	s := startServer(t, nntptest.Config{}, n)
	for _, comp := range []Compression{CompressOff, CompressDeflate, CompressGzip} {
		t.Run(comp.String(), func(t *testing.T) {
			ctx := context.Background()
			c := dial(t, Config{Addr: s.Addr(), Compress: comp, PipelineDepth: 3})
			if _, err := c.Group(ctx, testGroup); err != nil {
				t.Fatal(err)
			}
			var ranges []Range
			for first := int64(1); first <= n; first += 240 {
				ranges = append(ranges, Range{first, min(first+239, n)})
			}
			next := int64(1)
			err := c.OverPipelined(ctx, ranges, func(r Range, ov Overview) error {
				if ov.Number != next || ov.Number < r.First || ov.Number > r.Last {
					return fmt.Errorf("article %d in range %s, want %d", ov.Number, r, next)
				}
				next++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != n+1 {
				t.Fatalf("saw %d lines", next-1)
			}
			if _, err := c.Group(ctx, testGroup); err != nil {
				t.Fatalf("connection out of step after pipelining: %v", err)
			}
		})
	}
}

func TestPipelinedOverRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 100)
	ctx := context.Background()
	// Gzip makes XOVER the verb, so the whole train is pipelined at once.
	c := dial(t, Config{Addr: s.Addr(), Compress: CompressGzip, PipelineDepth: 3})
	var ranges []Range
	for i := int64(0); i < 10; i++ {
		ranges = append(ranges, Range{i*10 + 1, i*10 + 10})
	}
	// No GROUP yet: every command is refused with 412.
	err := c.OverPipelined(ctx, ranges, func(Range, Overview) error { return nil })
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 412 {
		t.Fatalf("got %v", err)
	}
	// Only the answers to commands sent were read: the connection is in step.
	if g, err := c.Group(ctx, testGroup); err != nil || g.High != 100 {
		t.Fatalf("after refusal: %+v %v", g, err)
	}
}

func TestOverSeqStopsEarly(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 500)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	if _, err := c.Group(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for ov, err := range c.OverSeq(ctx, 1, 500) {
		if err != nil {
			t.Fatal(err)
		}
		if seen++; ov.Number == 10 {
			break
		}
	}
	if seen != 10 {
		t.Fatalf("saw %d", seen)
	}
	// The rest of the response was drained: the next command is in step.
	if _, err := c.Stat(ctx, "499"); err != nil {
		t.Fatal(err)
	}
}

func TestGreetingRefusals(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{MaxConns: 1}, 1)
	ctx := context.Background()
	dial(t, Config{Addr: s.Addr()})
	_, err := Dial(ctx, Config{Addr: s.Addr()})
	var se *StatusError
	if !errors.Is(err, ErrTooManyConnections) || !errors.As(err, &se) || se.Code != 502 || se.Cmd != "greeting" {
		t.Fatalf("over the limit: %v", err)
	}
	s.SetFaults(nntptest.Faults{Greeting: 400})
	if _, err := Dial(ctx, Config{Addr: s.Addr()}); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("400 greeting: %v", err)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{Users: map[string]string{"alice": "secret"}}, 5)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	if _, err := c.Group(ctx, testGroup); !errors.Is(err, ErrAuth) {
		t.Fatalf("without login: %v", err)
	}
	if _, err := Dial(ctx, Config{Addr: s.Addr(), User: "alice", Pass: "wrong"}); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong password: %v", err)
	}
	c = dial(t, Config{Addr: s.Addr(), User: "alice", Pass: "secret", Compress: CompressAuto})
	if g, err := c.Group(ctx, testGroup); err != nil || g.High != 5 {
		t.Fatalf("after login: %+v %v", g, err)
	}
}

// TestModeReaderBeforeLogin: against a mode-switching server (INN's innd
// towards a peer), which starts a new session on MODE READER, Dial sends
// MODE READER first and logs in after it, so the connection it returns is
// logged in and in reader mode.
// (Was: Dial logged in before MODE READER, against RFC 4643 section 2.2; the server's hand-over forgot the login and every reader command got 480.)
func TestModeReaderBeforeLogin(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{Users: map[string]string{"alice": "secret"}, ModeSwitching: true}, 5)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr(), User: "alice", Pass: "secret"})
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 4643: a server lists no AUTHINFO once the client has logged in.
	if !hasCap(caps, "READER") || hasCap(caps, "AUTHINFO") {
		t.Fatalf("after Dial the server lists %q: want reader mode and logged in (no AUTHINFO)", caps)
	}
	if g, err := c.Group(ctx, testGroup); err != nil || g.High != 5 {
		t.Fatalf("GROUP after Dial: %+v %v", g, err)
	}
}

// TestModeReaderAfterLoginWhenAsked: a server that answers MODE READER
// with 480 gets the login first, then MODE READER again; without a login
// configured the 480 fails Dial.
func TestModeReaderAfterLoginWhenAsked(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{Users: map[string]string{"alice": "secret"}, ModeReaderNeedsAuth: true}, 5)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr(), User: "alice", Pass: "secret"})
	if g, err := c.Group(ctx, testGroup); err != nil || g.High != 5 {
		t.Fatalf("GROUP after Dial: %+v %v", g, err)
	}
	if _, err := Dial(ctx, Config{Addr: s.Addr()}); !errors.Is(err, ErrAuth) {
		t.Fatalf("Dial without a login: %v, want ErrAuth", err)
	}
}

// TestReloginAfterExpiry: when the server's login expires mid-session,
// each kind of command answered 480 logs in again and is run once more on
// the same connection.
// (Was: the 480 was returned and the connection kept as healthy, so every later command on it failed the same way.)
func TestReloginAfterExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{Users: map[string]string{"alice": "secret"}}, 30)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr(), User: "alice", Pass: "secret", PipelineDepth: 2})
	steps := []struct {
		name string
		run  func() error
	}{
		{"GROUP", func() error {
			g, err := c.Group(ctx, testGroup)
			if err == nil && g.High != 30 {
				err = fmt.Errorf("group %+v", g)
			}
			return err
		}},
		{"OVER", func() error {
			n := 0
			err := c.Over(ctx, 1, 10, func(Overview) error { n++; return nil })
			if err == nil && n != 10 {
				err = fmt.Errorf("%d overview lines, want 10", n)
			}
			return err
		}},
		{"pipelined OVER", func() error {
			// The first range goes alone (Over learns OVER is known), the
			// rest in a train; the login expires again mid-train: the
			// ranges behind are answered 480 and fetched after a new login.
			var got []int64
			err := c.OverPipelined(ctx, []Range{{1, 5}, {6, 10}, {11, 15}, {16, 20}}, func(_ Range, ov Overview) error {
				if ov.Number == 6 {
					s.ExpireLogins()
				}
				got = append(got, ov.Number)
				return nil
			})
			for i, n := range got {
				if n != int64(i+1) {
					return fmt.Errorf("lines %v, want 1..20 once each in order", got)
				}
			}
			if err == nil && len(got) != 20 {
				err = fmt.Errorf("lines %v, want 1..20", got)
			}
			return err
		}},
		{"HEAD", func() error { _, err := c.Head(ctx, "3"); return err }},
		{"LIST ACTIVE", func() error { return c.ListActive(ctx, "", func(ActiveGroup) error { return nil }) }},
		{"POST", func() error {
			return c.Post(ctx, strings.NewReader("From: a@b\r\nNewsgroups: "+testGroup+"\r\nSubject: s\r\n\r\nbody\r\n"))
		}},
	}
	for _, st := range steps {
		s.ExpireLogins()
		if err := st.run(); err != nil {
			t.Fatalf("%s after the login expired: %v", st.name, err)
		}
		if c.Err() != nil {
			t.Fatalf("%s: connection broken: %v", st.name, c.Err())
		}
	}
	if a := s.Stats().Accepted; a != 1 {
		t.Fatalf("%d connections accepted, want the one", a)
	}
}

// TestAuthRequiredWithoutLoginRetires: a 480 on a connection with no login
// configured fails the command with ErrAuth and retires the connection.
// (Was: the connection stayed usable, so a pool handed it out again and every request routed to it got the same 480.)
func TestAuthRequiredWithoutLoginRetires(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{Users: map[string]string{"alice": "secret"}}, 5)
	ctx := context.Background()
	c := dial(t, Config{Addr: s.Addr()})
	_, err := c.Group(ctx, testGroup)
	var se *StatusError
	if !errors.Is(err, ErrAuth) || !errors.As(err, &se) || se.Code != 480 {
		t.Fatalf("GROUP without a login: %v, want the 480", err)
	}
	if c.Err() == nil {
		t.Fatal("the connection is still usable after a 480 with no login to give")
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	srvTLS, roots, err := nntptest.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	for _, implicit := range []bool{true, false} {
		t.Run(fmt.Sprintf("implicit=%v", implicit), func(t *testing.T) {
			s := startServer(t, nntptest.Config{TLS: srvTLS, ImplicitTLS: implicit}, 20)
			ctx := context.Background()
			c := dial(t, Config{Addr: s.Addr(), TLS: &tls.Config{RootCAs: roots}, ImplicitTLS: implicit, Compress: CompressDeflate})
			if _, ok := c.nc.(*tls.Conn); !ok {
				t.Fatal("connection is not TLS")
			}
			n := 0
			if _, err := c.Group(ctx, testGroup); err != nil {
				t.Fatal(err)
			}
			if err := c.Over(ctx, 1, 20, func(Overview) error { n++; return nil }); err != nil || n != 20 {
				t.Fatalf("%d %v", n, err)
			}
		})
	}
}

func TestMalformedResponses(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 100)
	ctx := context.Background()

	t.Run("garbage overview line", func(t *testing.T) {
		s.SetFaults(nntptest.Faults{GarbageEvery: 30})
		defer s.SetFaults(nntptest.Faults{})
		c := dial(t, Config{Addr: s.Addr()})
		if _, err := c.Group(ctx, testGroup); err != nil {
			t.Fatal(err)
		}
		seen := 0
		err := c.Over(ctx, 1, 100, func(Overview) error { seen++; return nil })
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Cmd != "OVER" || !strings.Contains(pe.Line, "garbage") {
			t.Fatalf("got %v", err)
		}
		if seen != 29 {
			t.Fatalf("%d lines before the garbage, want 29", seen)
		}
		if _, err := c.Stat(ctx, "3"); err != nil {
			t.Fatalf("connection out of step after a bad line: %v", err)
		}
	})
	t.Run("garbage status line", func(t *testing.T) {
		c := dial(t, Config{Addr: s.Addr()})
		s.SetFaults(nntptest.Faults{GarbageStatus: true})
		defer s.SetFaults(nntptest.Faults{})
		_, err := c.Group(ctx, testGroup)
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Cmd != "GROUP" || !strings.HasPrefix(pe.Line, "2x0") {
			t.Fatalf("got %v", err)
		}
		if _, err := c.Group(ctx, testGroup); !errors.Is(err, ErrClosed) {
			t.Fatalf("broken connection reused: %v", err)
		}
	})
	t.Run("cut mid-response", func(t *testing.T) {
		c := dial(t, Config{Addr: s.Addr()})
		if _, err := c.Group(ctx, testGroup); err != nil {
			t.Fatal(err)
		}
		s.SetFaults(nntptest.Faults{CutAfter: 40})
		defer s.SetFaults(nntptest.Faults{})
		seen := 0
		err := c.Over(ctx, 1, 100, func(Overview) error { seen++; return nil })
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Cmd != "OVER" || c.Err() == nil {
			t.Fatalf("got %v (conn err %v)", err, c.Err())
		}
		// Lines arrived one by one before the cut: streamed, not buffered.
		if seen != 40 {
			t.Fatalf("%d lines before the cut, want 40", seen)
		}
	})
	t.Run("line too long", func(t *testing.T) {
		c := dial(t, Config{Addr: s.Addr(), MaxLine: 60})
		if _, err := c.Group(ctx, testGroup); err != nil {
			t.Fatal(err)
		}
		err := c.Over(ctx, 1, 10, func(Overview) error { return nil })
		var pe *ProtocolError
		if !errors.Is(err, ErrLineTooLong) || !errors.As(err, &pe) || pe.Cmd != "OVER" {
			t.Fatalf("got %v", err)
		}
	})
}

func TestDeadlines(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 10)
	t.Run("context", func(t *testing.T) {
		c := dial(t, Config{Addr: s.Addr()})
		s.SetFaults(nntptest.Faults{Delay: time.Hour})
		defer s.SetFaults(nntptest.Faults{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := c.Group(ctx, testGroup); done <- err }()
		testwait.For(t, "the command to reach the server", func() bool { return s.Stats().Commands >= 2 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		if c.Err() == nil {
			t.Fatal("connection still marked usable mid-response")
		}
	})
	t.Run("command timeout", func(t *testing.T) {
		c := dial(t, Config{Addr: s.Addr(), CommandTimeout: 20 * time.Millisecond})
		s.SetFaults(nntptest.Faults{Delay: time.Hour})
		defer s.SetFaults(nntptest.Faults{})
		_, err := c.Group(context.Background(), testGroup)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("got %v", err)
		}
	})
}
