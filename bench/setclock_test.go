package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

func TestLoneSetSplitsASetsTime(t *testing.T) {
	var c setClock
	c.Served(persist.CmdSet, time.Hour) // before the run: left out
	c.Committed(1, time.Hour)
	a := c.snapshot()
	for range 4 {
		c.Served(persist.CmdSet, 60*time.Microsecond)
		c.Committed(1, 30*time.Microsecond)
	}
	c.Served(persist.CmdGet, time.Hour)              // not a set
	l, ok := loneSetBetween(a, c.snapshot(), 10_000) // 100 µs a set
	if !ok {
		t.Fatal("no lone set from 4 sets")
	}
	if l.perSet != 100*time.Microsecond || l.server != 60*time.Microsecond || l.commit != 30*time.Microsecond {
		t.Fatalf("lone set %+v, want 100 µs a set, 60 µs in the server, 30 µs committing", l)
	}
	var out strings.Builder
	l.print(&out, 25_000) // a 40 µs round trip
	if want := "a lone set (1 client): 100 µs = 60 µs in the persist server, from its decoded arrival to its answer (30 µs of it the commit), + 40 µs on the bus and in the clients (the floor's bare round trip: 40 µs)\n"; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
	if _, ok := loneSetBetween(c.snapshot(), c.snapshot(), 10_000); ok {
		t.Fatal("a lone set from a run the server never reported")
	}
}
