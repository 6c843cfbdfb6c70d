package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/events"
)

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
