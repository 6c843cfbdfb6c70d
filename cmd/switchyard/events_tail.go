package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/persist"
)

// tailQueue bounds the deliveries events tail holds while it writes; past
// it they are counted into one gap line.
const tailQueue = 4096

// tailFeed hands the router's deliveries to the printer without ever
// blocking the router: while the printer is behind and the queue full,
// deliveries are dropped and counted, and one queue_overflow gap takes
// their place in the order they came, after what was queued before them.
type tailFeed struct {
	q       chan events.Delivery
	mu      sync.Mutex // orders push against drained
	dropped int        // dropped since the last gap queued
}

func newTailFeed(size int) *tailFeed { return &tailFeed{q: make(chan events.Delivery, size)} }

// push queues d, or counts it dropped. A count waiting goes in first, as
// a gap: what follows it came after the drops.
func (f *tailFeed) push(d events.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropped > 0 {
		select {
		case f.q <- tailGap(f.dropped):
			f.dropped = 0
		default:
			f.dropped++
			return
		}
	}
	select {
	case f.q <- d:
	default:
		f.dropped++
	}
}

// drained returns the gap for the deliveries dropped after everything
// queued, once the printer has taken all of that (the queue is empty):
// without it a gap after the last delivery would wait for the next one,
// which may never come.
func (f *tailFeed) drained() (events.Delivery, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropped == 0 || len(f.q) > 0 {
		return events.Delivery{}, false
	}
	g := tailGap(f.dropped)
	f.dropped = 0
	return g, true
}

func tailGap(n int) events.Delivery {
	return events.Delivery{Gap: &events.Gap{Reason: events.ReasonQueueOverflow, Count: n}}
}

// newEventsTailCmd builds switchyard events tail.
func newEventsTailCmd() *cobra.Command {
	var natsOpts natsFlags
	var ops []string
	var glob string
	var asJSON bool
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "tail ANCHOR",
		Short: "Print the events at ANCHOR and below it as they happen, until interrupted",
		Long: `Subscribes to ANCHOR (scope/stream or scope/stream/path) as a /ws/events socket would,
with a router of its own reading the persist change feeds, and prints one line per
delivery: the events at the anchor and at every key below it (coalesced per --window per
key, 250 ms as a socket's are by default: "(N coalesced)"; --window 0 prints every
change), and a gap line, with its reason, wherever events were not delivered. What the
stream held before is not printed: see switchyard watch for that. Until the anchor's
stream can be read it waits (the "following" line comes once it can), with a warning
on stderr saying why (no balancer or persist server answering, a timeout). Its router
has no peer regions: in a region joined to others (--peer), it prints only the writes
made in the region whose bus it connects to, not those the region's /ws/events sockets
hear from its peers.`,
		Example: `  switchyard events tail project-1/files/a
  set   project-1/files/a/b/c.txt  #42  = hello
  switchyard events tail project-1/files --ops delete --glob '**/*.tmp' --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			anchor, err := events.ParseAnchor(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			filter, err := events.ParseFilter(ops, glob)
			if err != nil {
				return usagef("%v", err)
			}
			coalesce, err := coalesceWindow("--window", window)
			if err != nil {
				return err
			}
			c, closeClient, err := natsOpts.followClient("switchyard-events-tail")
			if err != nil {
				return err
			}
			defer closeClient()
			r, err := events.NewRouter(events.RouterConfig{Client: c, Coalesce: coalesce})
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// The context ends only on a signal, so a Start or Subscribe
			// that fails with it ended was cut short by Ctrl-C or SIGTERM
			// while waiting for persist: that is how a tail stops (exit 0),
			// as watch and runFleet treat it, not a failure.
			if err := r.Start(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = r.Stop(sctx)
			}()
			feed := newTailFeed(tailQueue)
			s := r.Open("events-tail", feed.push)
			defer s.Close()
			subscribed := make(chan struct{})
			go noteTailWaits(ctx, c, anchor, subscribed, time.Second)
			err = s.Subscribe(ctx, "tail", anchor, filter)
			close(subscribed)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			p := tailPrinter{w: stdout(cmd), json: asJSON}
			if !asJSON {
				fmt.Fprintf(stdout(cmd), "following %s (Ctrl-C stops)\n", anchor)
			}
			for {
				select {
				case <-ctx.Done():
					return nil
				case d := <-feed.q:
					if err := p.print(d); err != nil {
						return err
					}
					if g, ok := feed.drained(); ok {
						if err := p.print(g); err != nil {
							return err
						}
					}
				}
			}
		},
	}
	natsOpts.registerClient(cmd)
	cmd.Flags().Lookup("timeout").Usage = "time limit of each request to the server (the tail itself runs until interrupted)"
	cmd.Flags().StringSliceVar(&ops, "ops", nil, "only these families: set, delete (default both)")
	cmd.Flags().StringVar(&glob, "glob", "", "only keys below the anchor matching this glob (*, ?, [..] within a segment, ** for any segments)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	cmd.Flags().DurationVar(&window, "window", events.CoalesceWindowDefault, "coalescing window: one line per key per window, with its newest value (0: every change)")
	return cmd
}

// noteTailWaits logs a warning, once per reason, while a subscribe has
// not returned (subscribed not closed) and the anchor's stream cannot be
// read, looking every period: the router retries its read for ever and
// says nothing, so a tail on a bus where nothing answers (a wrong --nats
// or --service) waited in silence. It asks the stream's inventory, a
// request the router's own read needs the same servers for.
func noteTailWaits(ctx context.Context, c *persist.Client, anchor events.Anchor, subscribed <-chan struct{}, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	var said string
	for {
		select {
		case <-ctx.Done():
			return
		case <-subscribed:
			return
		case <-tick.C:
		}
		_, err := c.Stream(anchor.Scope, anchor.Stream).Inventory(ctx)
		if err == nil || errors.Is(err, persist.ErrNotFound) || ctx.Err() != nil || err.Error() == said {
			continue
		}
		select {
		case <-subscribed: // it got through meanwhile
			return
		default:
		}
		said = err.Error()
		slog.Warn("events tail cannot read the anchor's stream yet, retrying until it can (Ctrl-C stops)",
			"anchor", anchor.String(), "err", said)
	}
}

// tailLine is one delivery in --json output.
type tailLine struct {
	Type      string  `json:"type"` // event or gap
	Subject   string  `json:"subject,omitempty"`
	Op        string  `json:"op,omitempty"`
	Seq       uint64  `json:"seq,omitempty"`
	TS        int64   `json:"ts,omitempty"`
	Value     *string `json:"value,omitempty"` // a set's, "" included (as watch --json prints it)
	Enc       string  `json:"enc,omitempty"`
	Coalesced int     `json:"coalesced,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	Count     int     `json:"count,omitempty"`
}

type tailPrinter struct {
	w    io.Writer
	json bool
}

func (p tailPrinter) print(d events.Delivery) error {
	if p.json {
		l := tailLine{Type: "event"}
		if g := d.Gap; g != nil {
			l = tailLine{Type: "gap", Reason: string(g.Reason), Count: g.Count}
			if g.Subject.Scope != "" {
				l.Subject = g.Subject.String()
			}
		} else {
			ev := d.Event
			l.Subject, l.Op, l.Seq, l.TS, l.Coalesced = ev.Subject.String(), string(ev.Op), ev.Seq, ev.TS, ev.Coalesced
			if ev.Op == events.OpSet {
				v, enc := jsonValue(ev.Value)
				l.Value, l.Enc = &v, enc
			}
		}
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	var line string
	if g := d.Gap; g != nil {
		where := "-"
		if g.Subject.Scope != "" {
			where = terminalSafe(g.Subject.String())
		}
		line = fmt.Sprintf("%-6s %s  %d event(s) not delivered (%s)", "gap", where, g.Count, g.Reason)
	} else {
		ev := d.Event
		line = fmt.Sprintf("%-6s %s  #%d", ev.Op, terminalSafe(ev.Subject.String()), ev.Seq)
		if ev.Op == events.OpSet {
			v := "[binary]"
			if utf8.Valid(ev.Value) {
				v = terminalSafe(string(ev.Value))
			}
			line += "  = " + v
		}
		if ev.Coalesced > 1 {
			line += fmt.Sprintf("  (%d coalesced)", ev.Coalesced)
		}
	}
	_, err := fmt.Fprintln(p.w, line)
	return err
}
