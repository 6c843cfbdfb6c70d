package main

import (
	"context"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestEventsSubsChecksUser: events subs refuses a USER that cannot name a
// user's rows (persist.ValidStreamName) as a usage error naming the user,
// before it connects, as events presence does. Before, subs did not check
// it, so an empty USER failed as "cannot reach NATS" or as not found.
func TestEventsSubsChecksUser(t *testing.T) {
	t.Parallel()
	for _, user := range []string{"", " alice"} {
		for _, sub := range []string{"subs", "presence"} {
			args := []string{"events", sub, user, "--nats", deadNATS(t)}
			_, stderr, code := execute(t, args...)
			want := "user"
			if user == "" {
				want = "USER is empty"
			}
			wantUsage(t, args, stderr, code, want)
		}
	}
}

// TestEventsEmptyUserSaysSo: an empty USER is refused in the words kv and
// stream use for an empty argument, naming the argument.
// (Was: "user "": bad-request: missing stream name (Sy-Stream)", the wire's
// header name, which names nothing the user typed.)
func TestEventsEmptyUserSaysSo(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"subs", "presence"} {
		args := []string{"events", sub, "", "--nats", deadNATS(t)}
		_, stderr, code := execute(t, args...)
		if want := "switchyard: USER is empty\n"; code != exitUsage || stderr != want {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", args, code, stderr, exitUsage, want)
		}
	}
}

// TestEventsPresenceEscapes: events presence and events subs escape the
// fields of the rows they print (terminalSafe), which are persist data any
// writer of the scope can fill: a presence row's app and region holding a
// terminal escape, a newline and a bidi override print as one escaped row,
// and so does a subscription row's mode (List does not check it). (Was:
// presence printed the app and region raw, so a row could clear the
// screen and forge a line of its own; subs printed the mode raw.)
func TestEventsPresenceEscapes(t *testing.T) {
	t.Parallel()
	e, nc := startFleet(t, t.TempDir())
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	row := `{"connectedAt":1700000000000,"app":"\u001b[2Jnotes\nFAKE  eu  2020-01-01T00:00:00Z","region":"eu\u202eusw"}`
	if _, err := c.KV("presence", "alice").Set(ctx, "notes/eu", []byte(row), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	sub := `{"user":"alice","id":"s1","anchor":"hub/demo","mode":"broadcast\u001b[2J\nFAKE"}`
	if _, err := c.KV(events.DurableScopeDefault, events.DurableStreamDefault).Set(ctx, "alice/s1", []byte(sub), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"presence", "subs"} {
		out, stderr, code := testproc.Run(t, cli(t, "events", cmd, "alice", "--nats", e.ClientURL()))
		if code != 0 {
			t.Fatalf("events %s: exit %d: %s", cmd, code, stderr)
		}
		noControl(t, "events "+cmd, out)
		if n := strings.Count(strings.TrimRight(out, "\n"), "\n"); n != 1 {
			t.Errorf("events %s prints %d lines for one row (a newline in a field became a line of its own):\n%s", cmd, n+1, out)
		}
	}
}

// (Was: with two regions, events tail's help said it subscribes "as a /ws/events socket would" and events presence's that the last close removes a row, so a tail in one region silently missed the other's writes and a row a restarted region kept read as a live connection.)
func TestEventsHelpSaysWhatARegionShows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  []string
		want []string
	}{
		{[]string{"events", "tail", "--help"}, []string{"no peer regions", "only the writes made in the region whose bus it connects to"}},
		{[]string{"events", "presence", "--help"}, []string{"A region that stops keeps its rows", "48 h", "no connection is open"}},
	} {
		out, stderr, code := execute(t, tc.cmd...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.cmd, code, stderr)
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, w := range tc.want {
			if !strings.Contains(flat, w) {
				t.Errorf("%v does not say %q:\n%s", tc.cmd, w, out)
			}
		}
	}
}
