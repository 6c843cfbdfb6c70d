package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// TestEventsTailSaysWhyItWaits: events tail on a bus where nothing answers
// for the anchor's stream (no balancer, no persist server) keeps waiting,
// and says why on stderr.
// (Was: it printed nothing at all until interrupted, not even its
// "following" line, so a wrong --nats or --service looked like a hang.)
func TestEventsTailSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	saysWhyItWaits(t, "events", "tail", "hub/demo")
}

// TestTailFeedGapInOrder: deliveries dropped while events tail's queue is
// full print as one queue_overflow gap where they came, after what was
// queued before them, and a gap after the last delivery prints once the
// queue is drained. (Was: the count printed before the next delivery
// taken from the queue, ahead of deliveries that came before the drops,
// and never when no delivery followed.)
func TestTailFeedGapInOrder(t *testing.T) {
	t.Parallel()
	ev := func(key string) events.Delivery {
		return events.Delivery{Event: &events.Event{Subject: events.Subject{Scope: "p", Stream: "s", Key: key}}}
	}
	f := newTailFeed(2)
	var printed []string
	take := func() {
		t.Helper()
		select {
		case d := <-f.q:
			printed = append(printed, tailName(d))
		default:
			t.Fatal("nothing queued")
		}
		if g, ok := f.drained(); ok {
			printed = append(printed, tailName(g))
		}
	}
	f.push(ev("a"))
	f.push(ev("b"))
	f.push(ev("c")) // dropped
	f.push(ev("d")) // dropped
	take()
	f.push(ev("e")) // the gap for c and d takes the free slot; e is dropped
	take()
	take()
	want := []string{"a", "b", "gap 2", "gap 1"}
	if !slices.Equal(printed, want) {
		t.Fatalf("printed %v, want %v", printed, want)
	}
	f.push(ev("f"))
	take()
	if !slices.Equal(printed, append(want, "f")) {
		t.Fatalf("printed %v, want f after the gaps", printed)
	}
}

func tailName(d events.Delivery) string {
	if d.Gap != nil {
		return fmt.Sprintf("gap %d", d.Gap.Count)
	}
	return d.Event.Subject.Key
}

// TestTailInterruptWhileSubscribingExitsZero: events tail runs until
// interrupted, and Ctrl-C is how it ends, also while it still waits for
// the persist servers to answer (a restart, a slow start): exit 0, as watch
// in the same state and runFleet on a signal while starting. (Was: a
// Ctrl-C while Start or Subscribe waited exited 1 with "context canceled".)
func TestTailInterruptWhileSubscribingExitsZero(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t) // a bus with no persist server answering
	asked := make(chan struct{}, 1)
	sub, err := nc.Subscribe("persist.>", func(m *nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := startWatched(t, cli(t, "events", "tail", "hub/demo", "--timeout", "1s", "--nats", e.ClientURL()))
	select {
	case <-asked: // the tail is past connecting, waiting for a persist answer
	case <-c.exited:
		t.Fatalf("events tail exited %d before asking persist: %s", c.code, c.stderr.String())
	case <-time.After(testproc.Timeout):
		t.Fatal("events tail never asked persist anything")
	}
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := c.waitExit(t); code != 0 {
		t.Errorf("events tail interrupted while subscribing: exit %d, want 0; stderr %q", code, c.stderr.String())
	}
}

// TestTailJSONEmptyValue: events tail --json prints a set's value even
// when it is empty ("value":"", as watch --json does), and no value for a
// delete. (Was: an empty value was left out, a set read as one without a
// value.)
func TestTailJSONEmptyValue(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := tailPrinter{w: &b, json: true}
	subj := events.Subject{Scope: "p", Stream: "s", Key: "k"}
	for _, ev := range []*events.Event{
		{Subject: subj, Op: events.OpSet, Seq: 1, Value: []byte{}},
		{Subject: subj, Op: events.OpDelete, Seq: 1},
	} {
		if err := p.print(events.Delivery{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"value":""`) || strings.Contains(lines[1], `"value"`) {
		t.Fatalf("tail --json printed\n%s\nwant the set's empty value and none for the delete", b.String())
	}
}
