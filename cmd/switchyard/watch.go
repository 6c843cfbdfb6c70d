package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
)

// newWatchCmd builds switchyard watch.
func newWatchCmd() *cobra.Command {
	var natsOpts natsFlags
	var from uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "watch SCOPE STREAM",
		Short: "Print a stream's messages, then every change as it happens, until interrupted",
		Long: `Prints the messages of STREAM (from --from on), a caught-up line, then each
change as the persist server commits it: sets, deletes (including those limits,
TTL and age cause), and a resynced line whenever the watcher had to re-read the
stream to be sure it missed nothing (after a NATS reconnect, a server restart,
an owner change, or when output cannot keep up). Every set is printed once, in
seq order. A skipped line counts the messages written and removed again
(a key rewritten, a limit) while the watcher could not read them: those are
never printed. Ctrl-C ends it.

A server that cannot be reached is retried for ever, with a warning on stderr
saying why (no balancer or persist server answering, a timeout); an error retrying cannot
fix (an invalid scope, a persistent stream on a server without a data
directory, forbidden) prints an ended line and exits 1: the ended line gives
its code, the error itself is the one line on stderr.

Text lines are tab-separated:
  set        SEQ  TIME  KEY  VALUE
  delete     SEQ,SEQ,...
  resynced   REASON
  skipped    COUNT  FIRST-LAST
  caught-up
  ended      CODE   (bad-request, forbidden, too-large; closed: the NATS connection)
With --json each line is one object with "event" set to one of those words
(skipped: "count", "first", "last"; ended: "code" and "error", the error's
text); a value that is not UTF-8 is given in hex, with "enc":"hex".
--timeout bounds each request to the server, not the watch.`,
		Example: `  switchyard watch hub log
  switchyard watch project-42 settings --from 100 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			c, closeClient, err := natsOpts.followClient("switchyard-watch")
			if err != nil {
				return err
			}
			defer closeClient()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			p := &watchPrinter{w: stdout(cmd), json: asJSON, enc: json.NewEncoder(stdout(cmd)), cancel: cancel}
			w, err := c.Stream(args[0], args[1]).Watch(ctx, persist.WatchOptions{From: from}, p.print)
			if err != nil {
				return err
			}
			go noteWatchRetries(w, p.caughtUp.Load, args[0], args[1], time.Second)
			<-w.Done()
			if err := p.error(); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if err := w.Err(); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	natsOpts.registerClient(cmd)
	// A watch runs until interrupted; its --timeout bounds each request only.
	cmd.Flags().Lookup("timeout").Usage = "time limit of each request to the server (the watch itself runs until interrupted)"
	cmd.Flags().Uint64Var(&from, "from", 0, "first seq to print (default: the first)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

// watchLine is one event in --json output.
type watchLine struct {
	Event   string            `json:"event"`
	Seq     uint64            `json:"seq,omitempty"`
	Time    int64             `json:"time,omitempty"`
	Key     string            `json:"key,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Value   *string           `json:"value,omitempty"`
	Enc     string            `json:"enc,omitempty"`
	Seqs    []uint64          `json:"seqs,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	Count   uint64            `json:"count,omitempty"`
	First   uint64            `json:"first,omitempty"`
	Last    uint64            `json:"last,omitempty"`
	Code    string            `json:"code,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// watchPrinter writes events; the first write error ends the watch.
type watchPrinter struct {
	w      io.Writer
	json   bool
	enc    *json.Encoder
	cancel context.CancelFunc

	caughtUp atomic.Uint64 // caught-up events printed

	mu  sync.Mutex // protects err
	err error
}

func (p *watchPrinter) print(ev persist.Event) {
	if ev.Kind == persist.EventCaughtUp {
		p.caughtUp.Add(1)
	}
	if p.error() != nil {
		return
	}
	var err error
	if p.json {
		l := watchLine{Event: ev.Kind.String(), Seqs: ev.Seqs, Reason: ev.Reason}
		if ev.Kind == persist.EventSkipped {
			l.Count, l.First, l.Last = ev.Count, ev.First, ev.Last
		}
		if ev.Err != nil {
			l.Code, l.Error = endedCode(ev.Err), ev.Err.Error()
		}
		if m := ev.Msg; m != nil {
			v, enc := jsonValue(m.Value)
			l.Seq, l.Time, l.Key, l.Headers, l.Value, l.Enc = m.Seq, m.Time, m.Key, m.Headers, &v, enc
		}
		err = p.enc.Encode(l)
	} else {
		switch ev.Kind {
		case persist.EventSet:
			m := ev.Msg
			_, err = fmt.Fprintf(p.w, "set\t%d\t%s\t%s\t%s\n", m.Seq, time.UnixMilli(m.Time).UTC().Format(time.RFC3339Nano), escapeLine(m.Key), preview(m.Value))
		case persist.EventDelete:
			parts := make([]string, len(ev.Seqs))
			for i, q := range ev.Seqs {
				parts[i] = fmt.Sprint(q)
			}
			_, err = fmt.Fprintf(p.w, "delete\t%s\n", strings.Join(parts, ","))
		case persist.EventResynced:
			_, err = fmt.Fprintf(p.w, "resynced\t%s\n", escapeLine(ev.Reason))
		case persist.EventSkipped:
			_, err = fmt.Fprintf(p.w, "skipped\t%d\t%d-%d\n", ev.Count, ev.First, ev.Last)
		case persist.EventEnded:
			// The code only: the error's text is the command's error,
			// on stderr (in the text format it was here too, escaped).
			_, err = fmt.Fprintf(p.w, "ended\t%s\n", endedCode(ev.Err))
		default:
			_, err = fmt.Fprintln(p.w, ev.Kind.String())
		}
	}
	if err != nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		p.cancel()
	}
}

// endedCode is the word of an ended line for err, why a watcher ended:
// closed for a NATS connection closed for good, else the error's wire
// code (persist.CodeOf: bad-request, forbidden, too-large end a watcher).
func endedCode(err error) string {
	if errors.Is(err, persist.ErrWatchConnClosed) {
		return "closed"
	}
	return string(persist.CodeOf(err))
}

func (p *watchPrinter) error() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// noteWatchRetries logs a warning when the watcher retries, once per
// reason it gives until it next catches up (caughtUp counts its
// caught-up events), looking every period: a watch that cannot read its
// stream (nothing answers on the bus, a wrong --service) retries for ever
// by design, and without this it waited in silence.
func noteWatchRetries(w *persist.Watcher, caughtUp func() uint64, scope, stream string, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	var retries, caught uint64
	var said string
	for {
		select {
		case <-w.Done():
			return
		case <-tick.C:
		}
		if n := caughtUp(); n != caught {
			caught, said = n, "" // read the stream since: a new retry is news again
		}
		st := w.Stats()
		if st.Retries == retries || st.LastRetryErr == nil {
			continue
		}
		retries = st.Retries
		if st.LastRetryErr.Error() == said {
			continue
		}
		said = st.LastRetryErr.Error()
		slog.Warn("watch cannot read the stream yet, retrying until it can (Ctrl-C stops)",
			"scope", scope, "stream", stream, "retries", retries, "err", said)
	}
}

// followClient is the persist client of a command that follows changes
// until interrupted (watch, events tail): its connection outlives NATS
// restarts (reconnecting forever, with jitter), and --timeout bounds each
// request. close closes both.
func (o *natsFlags) followClient(name string) (c *persist.Client, close func(), err error) {
	if err := o.checkTimeout(); err != nil {
		return nil, nil, err
	}
	nc, err := o.connectRole(name, o.timeout)
	if err != nil {
		return nil, nil, err
	}
	c, err = persist.NewClient(persist.ClientConfig{Conn: nc, Service: o.service, Timeout: o.timeout})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); nc.Close() }, nil
}
