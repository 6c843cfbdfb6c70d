package nntptest

import (
	"io"
	"net"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
)

// TestServerLifecycle: the server follows the lifecycle rules, and Stop
// closes its port.
func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	lifecycletest.Start(t, s)
	addr := s.Addr()
	lifecycletest.Stop(t, s)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the stopped server's port still accepts")
	}

	lifecycletest.Stop(t, New(Config{})) // before Start
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
