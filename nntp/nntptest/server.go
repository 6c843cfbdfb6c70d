// Package nntptest is a real NNTP server for tests, benchmarks and demos.
//
// It listens on a loopback TCP port and speaks enough of RFC 3977 for a
// header indexer: CAPABILITIES, MODE READER, AUTHINFO USER/PASS, STARTTLS,
// COMPRESS DEFLATE (RFC 8054), XFEATURE COMPRESS GZIP, GROUP, LIST ACTIVE,
// LIST OVERVIEW.FMT, OVER/XOVER, HEAD, BODY, ARTICLE, STAT, POST and DATE.
// Groups hold generated binary posts (yEnc rar volumes with realistic
// subjects, posters, dates, message-ids, byte and line counts) that cost no
// memory, plus whatever is posted; they can grow while clients read.
// Faults can be injected: refusing greetings, slow responses, connections
// cut mid-response and garbage lines. It can act as a mode-switching server
// (INN's innd towards a peer) and expire its sessions' logins.
package nntptest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Config configures a Server. The zero value serves plain NNTP without
// authentication or a connection limit.
type Config struct {
	// Addr to listen on. Empty means "127.0.0.1:0" (a random port).
	Addr string
	// Users, when non-empty, makes AUTHINFO USER/PASS mandatory.
	Users map[string]string
	// ModeSwitching makes the server mode-switching (RFC 3977 section
	// 5.3) as INN's innd is towards a peer: it greets in transit mode,
	// CAPABILITIES lists MODE-READER instead of READER, reader commands
	// are answered "401 MODE-READER", and MODE READER starts a new reader
	// session, as innd hands the connection to nnrpd: a login made before
	// it is forgotten.
	ModeSwitching bool
	// ModeReaderNeedsAuth answers MODE READER with 480 until the client
	// has logged in, as some providers do.
	ModeReaderNeedsAuth bool
	// MaxConns caps concurrent connections; a connection beyond it is
	// greeted with "502 too many connections" and closed. Zero means none.
	MaxConns int
	// TLS enables STARTTLS, or TLS from the first byte with ImplicitTLS.
	TLS         *tls.Config
	ImplicitTLS bool
	// NoCompress hides COMPRESS DEFLATE and XFEATURE COMPRESS GZIP.
	NoCompress bool
	// NoDeflate hides COMPRESS DEFLATE only (XFEATURE COMPRESS GZIP stays).
	NoDeflate bool
	// PartSize is the decoded size of a generated article. Zero means
	// PartSizeDefault.
	PartSize int
	// GrowEvery and GrowBy make every group grow by GrowBy generated
	// articles each GrowEvery while the server runs. Zero means no growth.
	GrowEvery time.Duration
	GrowBy    int64
}

// Faults are injected into the server's answers; set them with SetFaults.
// The zero value injects nothing.
type Faults struct {
	// Greeting, when 400 or 502, refuses new connections with that code.
	Greeting int
	// Delay is waited before each response.
	Delay time.Duration
	// HoldOver makes OVER and XOVER wait, unanswered, until the faults
	// change: a test freezes fetches in flight at a moment of its choosing.
	HoldOver bool
	// CutAfter, when positive, closes the connection after that many lines
	// of a multi-line response.
	CutAfter int
	// GarbageEvery, when positive, replaces every n-th OVER line with a
	// line that is not an overview line.
	GarbageEvery int
	// GarbageStatus answers every command with a malformed status line.
	GarbageStatus bool
}

// Stats counts what the server saw.
type Stats struct {
	Accepted int64 // connections greeted with 200
	Refused  int64 // connections refused (limit or injected greeting)
	Active   int64 // connections open now
	// Peak is the most connections open at once (Active's high-water
	// mark, refused ones included while they are refused), since Start or
	// the last ResetPeak.
	Peak     int64
	Commands int64
}

type group struct {
	name   string
	seed   uint64
	low    int64
	high   int64 // generated articles are 1..high, except posted numbers
	posted map[int64]*storedArticle
}

// Server is an in-process NNTP server. Start it, use Addr, Stop it.
type Server struct {
	cfg Config

	mu     sync.RWMutex // protects groups, byID, faults
	groups map[string]*group
	byID   map[string]*storedArticle
	faults Faults
	// faultsSet is closed and replaced by every SetFaults (under mu).
	faultsSet chan struct{}

	base   lifecycle.Base
	ln     net.Listener
	done   <-chan struct{} // the run context's: closed by Stop, ends loops and delays
	wg     sync.WaitGroup
	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	active atomic.Int64
	// logins counts ExpireLogins: a session's login holds while it is the
	// value the session logged in under.
	logins atomic.Int64
	peakMu sync.Mutex // orders peak updates with ResetPeak
	peak   int64
	st     struct{ accepted, refused, commands atomic.Int64 }
}

// New returns a server with no groups; add some with AddGroup.
func New(cfg Config) *Server {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.PartSize <= 0 {
		cfg.PartSize = PartSizeDefault
	}
	return &Server{
		cfg:    cfg,
		groups: map[string]*group{},
		byID:   map[string]*storedArticle{},
		conns:  map[net.Conn]struct{}{},
	}
}

// AddGroup creates (or resets) a group holding articles 1..count.
func (s *Server) AddGroup(name string, count int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[name] = &group{name: name, seed: groupSeed(name), low: 1, high: count, posted: map[int64]*storedArticle{}}
}

// Grow adds n generated articles to a group and returns its new high mark.
func (s *Server) Grow(name string, n int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return 0, fmt.Errorf("nntptest: no group %q", name)
	}
	g.high += n
	return g.high, nil
}

// SetFaults replaces the injected faults; they apply from the next command
// (or connection, for Greeting).
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults = f
	if s.faultsSet != nil {
		close(s.faultsSet)
	}
	s.faultsSet = make(chan struct{})
	s.mu.Unlock()
}

// holdOver waits while HoldOver is set, or until the server stops.
func (s *Server) holdOver() {
	for {
		s.mu.RLock()
		hold, changed := s.faults.HoldOver, s.faultsSet
		s.mu.RUnlock()
		if !hold {
			return
		}
		select {
		case <-changed:
		case <-s.done:
			return
		}
	}
}

func (s *Server) getFaults() Faults {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.faults
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Accepted: s.st.accepted.Load(),
		Refused:  s.st.refused.Load(),
		Active:   s.active.Load(),
		Peak:     s.loadPeak(),
		Commands: s.st.commands.Load(),
	}
}

func (s *Server) loadPeak() int64 {
	s.peakMu.Lock()
	defer s.peakMu.Unlock()
	return s.peak
}

// ResetPeak restarts Stats.Peak from the connections open now.
func (s *Server) ResetPeak() {
	s.peakMu.Lock()
	s.peak = s.active.Load()
	s.peakMu.Unlock()
}

// notePeak raises the peak to n, a count of open connections just taken.
// Under peakMu, so a ResetPeak racing it cannot lower the peak below a
// connection already counted in active.
func (s *Server) notePeak(n int64) {
	s.peakMu.Lock()
	s.peak = max(s.peak, n)
	s.peakMu.Unlock()
}

// Start listens and serves until Stop (the lifecycle package's rules:
// a second Start fails, a stopped server does not start again).
func (s *Server) Start(ctx context.Context) error {
	return s.base.Start(ctx, "nntptest", func(ctx context.Context) error {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("nntptest: listen: %w", err)
		}
		if s.cfg.TLS != nil && s.cfg.ImplicitTLS {
			ln = tls.NewListener(ln, s.cfg.TLS)
		}
		s.ln = ln
		s.done = s.base.Run().Done()
		s.wg.Add(1)
		go s.acceptLoop()
		if s.cfg.GrowEvery > 0 && s.cfg.GrowBy > 0 {
			s.wg.Add(1)
			go s.growLoop()
		}
		return nil
	})
}

// Addr is the host:port the server listens on (after Start).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Stop closes the listener and every connection and waits for the
// server's goroutines. Idempotent; safe without Start.
func (s *Server) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, func(ctx context.Context) error {
		s.ln.Close()
		s.connMu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.connMu.Unlock()
		waited := make(chan struct{})
		go func() { s.wg.Wait(); close(waited) }()
		select {
		case <-waited:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("nntptest: stop: %w", ctx.Err())
		}
	})
}

func (s *Server) growLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.GrowEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.mu.Lock()
			for _, g := range s.groups {
				g.high += s.cfg.GrowBy
			}
			s.mu.Unlock()
		}
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return // closed by Stop
		}
		s.connMu.Lock()
		if s.base.Stopped() {
			s.connMu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.connMu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.connMu.Lock()
				delete(s.conns, nc)
				s.connMu.Unlock()
				nc.Close()
			}()
			s.serve(nc)
		}()
	}
}

func (s *Server) serve(nc net.Conn) {
	n := s.active.Add(1)
	defer s.active.Add(-1)
	s.notePeak(n)
	f := s.getFaults()
	switch {
	case f.Greeting == 400:
		s.st.refused.Add(1)
		fmt.Fprint(nc, "400 Service temporarily unavailable\r\n")
		return
	case f.Greeting == 502:
		s.st.refused.Add(1)
		fmt.Fprint(nc, "502 Too many connections\r\n")
		return
	case s.cfg.MaxConns > 0 && n > int64(s.cfg.MaxConns):
		s.st.refused.Add(1)
		fmt.Fprint(nc, "502 Too many connections from your account\r\n")
		return
	}
	s.st.accepted.Add(1)
	sess := newSession(s, nc)
	if s.cfg.ModeSwitching {
		sess.printf("200 nntptest ready (transit mode)")
	} else {
		sess.printf("200 nntptest ready (posting ok)")
	}
	if sess.flush() != nil {
		return
	}
	sess.loop()
}

// sortedGroups returns the groups by name (for LIST ACTIVE).
func (s *Server) sortedGroups() []group {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]group, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// wait sleeps d unless the server stops first; it simulates a slow server.
func (s *Server) wait(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.done:
	}
}

// ExpireLogins forgets the login of every session open now, as a provider
// whose authentication expired: their next command that needs a login is
// answered 480 until they log in again.
func (s *Server) ExpireLogins() { s.logins.Add(1) }

// CloseConns cuts every client connection now, as a server restart or a
// network failure would; the server keeps accepting new ones.
func (s *Server) CloseConns() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}
