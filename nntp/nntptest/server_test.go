package nntptest

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// TestServerLifecycle: the server follows the lifecycle rules, and Stop
// closes its port.
func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(Config{})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Start(ctx); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want lifecycle.ErrStarted", err)
	}
	for range 2 {
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start(ctx); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want lifecycle.ErrStopped", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the stopped server's port still accepts")
	}

	idle := New(Config{})
	if err := idle.Stop(ctx); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
}

// TestStartServes: the test helper's server is listening when it returns.
func TestStartServes(t *testing.T) {
	t.Parallel()
	s := Start(t)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 3)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "200" {
		t.Fatalf("greeting %q, %v; want 200", buf, err)
	}
}
