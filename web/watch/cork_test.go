package watch

import (
	"net"
	"testing"
)

// countConn counts the writes that reach the socket.
type countConn struct {
	net.Conn
	writes [][]byte
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

// TestCorkConnOneWritePerBatch: corked writes reach the socket as one
// write, in order, at uncork; uncorked writes go straight through.
func TestCorkConnOneWritePerBatch(t *testing.T) {
	cc := &countConn{}
	c := &corkConn{Conn: cc}
	c.cork()
	for _, s := range []string{"a", "bc", "d"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if len(cc.writes) != 0 {
		t.Fatalf("corked: %d writes reached the socket", len(cc.writes))
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	if len(cc.writes) != 2 || string(cc.writes[0]) != "abcd" || string(cc.writes[1]) != "e" {
		t.Fatalf("writes %q, want [abcd e]", cc.writes)
	}
	if err := c.uncork(); err != nil || len(cc.writes) != 2 {
		t.Fatalf("an empty uncork wrote: %q, %v", cc.writes, err)
	}
}
