package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/forward"
)

// newForwardCmd builds switchyard forward and its demo.
func newForwardCmd() *cobra.Command {
	forwardCmd := &cobra.Command{
		Use:   "forward",
		Short: "Per-peer batching between regions (bounded, signed)",
		Long: `forward moves items between regions in signed batches: one batch per peer per
flush window, each peer's backlog bounded in items and bytes, every shed
delivery reported by a gap marker. See docs/forward.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	forwardCmd.AddCommand(newForwardDemoCmd())
	return forwardCmd
}

// newForwardDemoCmd builds switchyard forward demo.
func newForwardDemoCmd() *cobra.Command {
	var d demoConfig
	demo := &cobra.Command{
		Use:   "demo",
		Short: "Two regions on loopback: watch batches, stalls, sheds and gap markers live",
		Long: `Starts region "us" (a signed receiver) and region "eu" (a queue and sender) on
127.0.0.1, pushes a steady stream of deliveries from eu to us, and stalls the
receiver in timed phases: --stall-after of normal running, then --stall-for
during which us holds every request open, over and over. One line per
--interval shows what the queue did: batches sent, items held (count and
bytes) against the bounds, items shed, gap markers made, lost batches, and
what us received. Stops on Ctrl-C or after --duration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if d.rate < 1 || d.interval <= 0 || d.stallAfter <= 0 || d.stallFor < 0 || d.duration < 0 || d.maxQueued < 1 || d.subs < 1 || d.maxInFlight < 1 {
				return usagef("--rate, --interval, --stall-after, --max-queued and --subs must be positive; --stall-for and --duration not negative")
			}
			return runForwardDemo(cmd.Context(), cmd.OutOrStdout(), d)
		},
	}
	demo.Flags().IntVar(&d.rate, "rate", 20000, "deliveries per second pushed from eu to us")
	demo.Flags().DurationVar(&d.stallAfter, "stall-after", 3*time.Second, "normal running before each stall")
	demo.Flags().DurationVar(&d.stallFor, "stall-for", 4*time.Second, "how long each stall holds the receiver (0: never stall)")
	demo.Flags().DurationVar(&d.duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	demo.Flags().DurationVar(&d.interval, "interval", 500*time.Millisecond, "time between status lines")
	demo.Flags().IntVar(&d.maxQueued, "max-queued", forward.MaxQueuedDefault, "items held for the peer before the oldest are shed")
	demo.Flags().IntVar(&d.maxInFlight, "max-in-flight", forward.MaxInFlightDefault, "batches sent to the peer and not yet answered")
	demo.Flags().IntVar(&d.subs, "subs", 16, "distinct subscriptions the deliveries belong to")
	return demo
}

type demoConfig struct {
	rate                 int
	stallAfter, stallFor time.Duration
	duration, interval   time.Duration
	maxQueued, subs      int
	maxInFlight          int
}

// stallGate holds requests while closed; opening releases them all.
type stallGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the receiver runs normally
}

func newStallGate() *stallGate {
	g := &stallGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *stallGate) set(stalled bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		if stalled {
			g.open = make(chan struct{})
		}
	default:
		if !stalled {
			close(g.open)
		}
	}
}

func (g *stallGate) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

func runForwardDemo(ctx context.Context, out io.Writer, d demoConfig) error {
	if d.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.duration)
		defer cancel()
	}
	secret := []byte("demo-secret-of-eu")
	var delivered, gaps atomic.Int64
	recv, err := forward.NewReceiver(forward.ReceiverConfig{
		Self:  "us",
		Peers: map[string][]byte{"eu": secret},
		Sink: forward.SinkFuncs{DeliverFunc: func(_ context.Context, _ string, dl *forward.Delivery) bool {
			if forward.IsGapMarker(dl) {
				gaps.Add(1)
			} else {
				delivered.Add(1)
			}
			return false
		}},
		Logger: quietLogger(),
	})
	if err != nil {
		return fmt.Errorf("forward demo: %w", err)
	}
	gate := newStallGate()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("forward demo: listen: %w", err)
	}
	srv := forward.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate.wait(r.Context()) // a stalled region: requests hang
		recv.ServeHTTP(w, r)
	}), forward.ServerConfig{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		gate.set(false)
		_ = srv.Close()
		wg.Wait()
	}()

	sender, err := forward.NewSender(forward.SenderConfig{
		Self: "eu", Secret: secret,
		Peers: map[string]string{"us": "http://" + ln.Addr().String() + "/"},
	})
	if err != nil {
		return fmt.Errorf("forward demo: %w", err)
	}
	defer sender.Close()
	gap := forward.NewGapPolicy(forward.GapConfig{Logger: quietLogger()})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From: "eu", Send: sender.Send, MaxQueued: d.maxQueued, MaxInFlight: d.maxInFlight,
		OnOverflow: gap.Overflow, OnTaken: gap.Taken, OnLost: gap.Lost, Logger: quietLogger(),
	})
	if err != nil {
		return fmt.Errorf("forward demo: %w", err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = q.Stop(stop)
	}()

	fmt.Fprintf(out, "forward demo: eu -> us at %d deliveries/s over %s; receiver stalls for %s every %s (Ctrl-C stops)\n",
		d.rate, ln.Addr(), d.stallFor, d.stallAfter+d.stallFor)

	// Producer: pushes in 10 ms ticks so the stream is steady.
	var stalled atomic.Bool
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		payload := `"hello from eu"`
		start, pushed := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				want := int(now.Sub(start).Seconds() * float64(d.rate))
				for ; pushed < want; pushed++ {
					ev := `{"id":"ev-` + strconv.Itoa(pushed) + `","subject":"demo:write","op":"write","ts":` +
						strconv.FormatInt(now.UnixMilli(), 10) + `,"data":` + payload + `}`
					q.Push("us", &forward.Delivery{UserID: int64(pushed % 100), SubID: "sub-" + strconv.Itoa(pushed%d.subs), Event: []byte(ev)})
				}
			}
		}
	})
	// Stall phases.
	if d.stallFor > 0 {
		wg.Go(func() {
			for {
				for _, phase := range []struct {
					stall bool
					dur   time.Duration
				}{{false, d.stallAfter}, {true, d.stallFor}} {
					t := time.NewTimer(phase.dur)
					select {
					case <-ctx.Done():
						t.Stop()
						return
					case <-t.C:
					}
					stalled.Store(!phase.stall)
					gate.set(!phase.stall)
				}
			}
		})
	}

	start := time.Now()
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	var lastBatches uint64
	for {
		select {
		case <-ctx.Done():
			st := q.PeerStats("us")
			fmt.Fprintf(out, "stopped: %d pushed, %d batches, %d items sent, %d shed, %d gap markers made, %d lost batches; us received %d deliveries and %d markers\n",
				st.Pushed, st.Batches, st.SentItems, st.Shed, gap.Stats().Markers, st.LostBatches, delivered.Load(), gaps.Load())
			return nil
		case <-tick.C:
			st := q.PeerStats("us")
			phase := "running"
			if stalled.Load() {
				phase = "STALLED"
			}
			fmt.Fprintf(out, "%6.1fs %-7s batches %6d (+%4d)  held %5d items %8s  in-flight %4d  shed %8d  markers %4d  lost %3d | us: %9d delivered, %5d gap markers\n",
				time.Since(start).Seconds(), phase, st.Batches, st.Batches-lastBatches, st.HeldItems, humanBytes(st.HeldBytes),
				st.InFlight, st.Shed, gap.Stats().Markers, st.LostBatches, delivered.Load(), gaps.Load())
			lastBatches = st.Batches
		}
	}
}

// humanBytes is n in B, KiB, MiB or GiB, for tables and status lines.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
