package nntp

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// heldCloseConn is a connection whose Close waits until release is closed,
// like a socket whose close is slow to reach the server.
type heldCloseConn struct {
	net.Conn
	closing chan struct{} // closed when Close starts
	release chan struct{}
}

func (c *heldCloseConn) Close() error {
	select {
	case <-c.closing:
	default:
		close(c.closing)
	}
	<-c.release
	return c.Conn.Close()
}

// TestPoolWaitOpenAfterShrink: after a shrink, WaitOpen returns only once
// the commands in flight have finished, their connections are released and
// closed; a connection whose Close has not returned still counts as open.
// The server's Peak saw every connection.
func TestPoolWaitOpenAfterShrink(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 100)
	release := make(chan struct{})
	var held []*heldCloseConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hc := &heldCloseConn{Conn: nc, closing: make(chan struct{}), release: release}
		held = append(held, hc) // dials are sequential below
		return hc, nil
	}
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr(), DialContext: dial}, Size: 3})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	ctx := context.Background()
	var cs []*Conn
	for range 3 {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if got := s.Stats().Peak; got != 3 {
		t.Fatalf("server peak %d, want 3", got)
	}

	p.Resize(1)
	waited := make(chan error, 1)
	go func() { waited <- p.WaitOpen(ctx, 1) }()
	// The commands in flight still run after the shrink.
	for _, c := range cs {
		if _, err := c.Group(ctx, testGroup); err != nil {
			t.Fatalf("in-flight command after shrink: %v", err)
		}
	}
	// Release closes the surplus connection, which the test holds open:
	// in goroutines, as Release returns only once it is closed.
	released := make(chan struct{}, 2)
	go func() { p.Release(cs[0]); released <- struct{}{} }()
	<-held[0].closing
	if st := p.Stats(); st.InUse != 2 || st.Closing != 1 || st.Open() != 3 {
		t.Fatalf("while closing: %+v", st)
	}
	go func() { p.Release(cs[1]); released <- struct{}{} }()
	<-held[1].closing
	select {
	case err := <-waited:
		t.Fatalf("WaitOpen returned %v with 2 connections still being closed", err)
	default:
	}
	close(release)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	<-released
	<-released
	if st := p.Stats(); st.Open() != 1 || st.Closing != 0 {
		t.Fatalf("after shrink: %+v", st)
	}

	// WaitOpen gives up with its context.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := p.WaitOpen(cctx, 0); err == nil {
		t.Fatal("WaitOpen(0) with a connection in use returned nil")
	}
	p.Release(cs[2])
	if err := p.WaitOpen(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// ResetPeak restarts the high-water mark from what is open now.
	testwait.For(t, "the server to see the closes", func() bool { return s.Stats().Active == 1 })
	s.ResetPeak()
	if got := s.Stats().Peak; got != 1 {
		t.Fatalf("peak after reset %d, want 1", got)
	}
}

// TestQuitWaitsForTheServer: Quit returns only once the server has let the
// connection go, even when the server is slow to answer, so a pool that
// shrank (WaitOpen) is already shrunk as the server counts.
func TestQuitWaitsForTheServer(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 10)
	ctx := context.Background()
	c, err := Dial(ctx, Config{Addr: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	s.SetFaults(nntptest.Faults{Delay: 30 * time.Millisecond})
	if err := c.Quit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Active; n != 0 {
		t.Fatalf("after Quit the server still has %d connections", n)
	}

	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 3})
	var cs []*Conn
	for range 3 {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	p.Resize(1)
	for _, c := range cs {
		go p.Release(c)
	}
	if err := p.WaitOpen(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Active; n > 1 {
		t.Fatalf("pool shrunk to 1, the server still has %d connections", n)
	}
}
