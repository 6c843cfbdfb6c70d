package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
	"github.com/switchyard-dev/switchyard/events"
)

// newBenchEventsCmd builds switchyard bench events.
func newBenchEventsCmd() *cobra.Command {
	var cfg bench.EventsConfig
	var asJSON bool
	var only string
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Events WebSocket API (a switchyard up process) vs Centrifugo without and with history",
		Long: `Runs the same load on three servers, one after the other, each in its own process on
loopback: switchyard up --no-work --servers 1 (its /ws/events), Centrifugo ` + bench.CentrifugoVersion + `
with its memory engine, and Centrifugo with channel history. --subscribers WebSocket
subscribers, read by one minimal reader loop for both (one goroutine per connection,
reading only the publish time embedded in each payload), subscribe to their own
channel each (an anchor bench/own/cN on ours) or, with --shared, all to one (bench/shared).
A publisher then publishes --rate payloads/s of --payload bytes for --duration, round the
channels: on ours a keyed set of a new key through a persist client on up's NATS (durable
in SQLite), on Centrifugo a publish through its HTTP server API.

It prints, per server: deliveries/s, p50 and p99 from publish to receive, the server
process's CPU time per delivery and its peak RSS during the fan-out (both from /proc),
the RSS growth per idle subscriber before it, and the ratios ours/theirs (targets: CPU
per delivery, p99 and idle RSS <= 1.0x Centrifugo with history).

--cross-region adds a run of ours across two regions on loopback: two up --region
processes, each with its own NATS and data, joined by signed forward batches; the
subscribers are on one, the publishes go through the other's persist, and its CPU figure
is both processes' (its RSS the subscribers' region's).

--publish-cost has each server, after its fan-out and with its subscribers gone, take the
same publishes again: it prints the CPU per publish alone (on ours the durable write and
its change feed, on Centrifugo the HTTP API call and its history) and what delivering adds
per delivery (the fan-out's CPU less those publishes, over the deliveries), with ratios.

--rounds N measures each server N times, the servers taking turns (each round starting
one server further along, each server on data of its own), and prints each server's
median figures (counts summed) and the ratios of every round: one run's CPU and p99 move
by a quarter and more between runs on a small shared machine. --cpuprofile FILE then
holds the first round's profile, FILE.round2 the second's, and so on.

Every delivery of ours waits for the end of its coalescing window (250 ms, the seed
system's), so ours' p50 and p99 are above it. --window 0 runs our up with no window
(up --events-window 0): what is left is the latency of the machinery.

One event reaches at most ` + strconv.Itoa(events.MaxMatchedPerOwner) + ` subscriptions of one user, so with --shared past that
many subscribers our up runs with --auth and a bus user per subscriber (tenants of the
scope bench, made with auth init; --users chooses how many); Centrifugo's are anonymous.

Centrifugo is built with go install into a temp directory unless --centrifugo names a
binary. The events layer delivers at most 600 events per subscription a minute (the
rest become gap markers), so --rate × --duration (per channel) must stay under it.

At those loads every server is expected to deliver every publish: when one (in any
round) delivered fewer than its publishes called for, beyond what its gap markers
name, the figures are still printed, then the command says which server lost how
many and exits 1.`,
		Example: `  switchyard bench events --subscribers 1000 --rate 1000 --duration 5s
  switchyard bench events --subscribers 1000 --shared --rate 100 --duration 5s
  switchyard bench events --only ours --subscribers 200 --shared --users 4
  switchyard bench events --only ours --subscribers 1000 --rate 1000 --cross-region
  switchyard bench events --subscribers 1000 --rate 1000 --window 0
  switchyard bench events --subscribers 1000 --rate 1000 --window 0 --publish-cost --rounds 3
  switchyard bench events --only ours --subscribers 10 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Window, err = coalesceWindow("--window", window); err != nil {
				return err
			}
			if err := refuseNonPositive(cmd, "subscribers", "rate", "duration", "payload", "publishers"); err != nil {
				return err
			}
			if err := cfg.Check(); err != nil {
				return usagef("%v", err)
			}
			if err := checkPacks(cfg.Packs, ""); err != nil {
				return err
			}
			if only != "" && only != "ours" && only != "centrifugo" {
				return usagef("--only is ours or centrifugo")
			}
			if cfg.CrossRegion && only == "centrifugo" {
				return usagef("--cross-region runs ours: not with --only centrifugo")
			}
			if only != "centrifugo" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.UpCmd = []string{self}
			}
			cleanup, err := centrifugoFor(cmd, only, &cfg.Centrifugo)
			if err != nil {
				return err
			}
			defer cleanup()
			res, err := bench.RunEvents(cmd.Context(), cfg, benchProgress(cmd), stdout(cmd))
			if err != nil {
				return err
			}
			return reportEvents(stdout(cmd), res, asJSON)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Subscribers, "subscribers", 1000, "WebSocket subscribers on each server")
	f.IntVar(&cfg.Rate, "rate", 100, "publishes per second, across all channels")
	f.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long the publisher publishes (at most 1m)")
	f.IntVar(&cfg.Payload, "payload", 128, "bytes per published value")
	f.BoolVar(&cfg.Shared, "shared", false, "all subscribers on one channel (default: each on its own)")
	f.IntVar(&cfg.Publishers, "publishers", 16, "publishes in flight at most")
	f.IntVar(&cfg.Users, "users", 0, fmt.Sprintf("log our subscribers in as this many bus users, round robin, under up --auth (0: one per subscriber with --shared past %d, the events layer's fan-out per user; else none, anonymous)", events.MaxMatchedPerOwner))
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.StringVar(&only, "only", "", "run one side: ours or centrifugo")
	f.StringVar(&cfg.Centrifugo, "centrifugo", "", "Centrifugo binary to run (default: go install it into a temp directory)")
	f.StringVar(&cfg.UpProfile, "cpuprofile", "", "have our up write a CPU profile of its whole life to this `FILE` (read it with go tool pprof BINARY FILE); with --rounds, round N past the first writes FILE.roundN")
	f.BoolVar(&cfg.CrossRegion, "cross-region", false, "also run ours across two regions on loopback (two up --region): subscribers on one, publishes through the other")
	f.BoolVar(&cfg.PublishCost, "publish-cost", false, "after each fan-out, publish the same load again with no subscriber: prints CPU per publish alone and what delivering adds per delivery")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the servers' data, configs and logs (default: a temp dir)")
	f.IntVar(&cfg.Rounds, "rounds", 1, "measure each server this many times, the servers taking turns, and print each figure's median (and the ratios round by round)")
	f.DurationVar(&window, "window", events.CoalesceWindowDefault, "our up's coalescing window (its --events-window); 0: none, so that ours' latency is its machinery's alone")
	f.IntVar(&cfg.Packs, "packs", 0, "run our up with --packs `N`: its streams in N shared files (0: a file each)")
	return cmd
}

// reportEvents prints res (see bench.PrintEventsResult), then fails when
// a server lost deliveries: printed first, since the figures of such a
// run are still what it measured.
func reportEvents(w io.Writer, res bench.EventsResult, asJSON bool) error {
	if err := bench.PrintEventsResult(w, res, asJSON); err != nil {
		return err
	}
	return res.Lost()
}

// centrifugoFor settles the Centrifugo binary of bench events and bench
// ws: none with --only ours, else bin if given, else one built with go
// install into a temp directory that cleanup removes.
func centrifugoFor(cmd *cobra.Command, only string, bin *string) (cleanup func(), err error) {
	cleanup = func() {}
	if only == "ours" {
		*bin = ""
		return cleanup, nil
	}
	if *bin != "" {
		return cleanup, nil
	}
	dir, err := os.MkdirTemp("", "switchyard-centrifugo-")
	if err != nil {
		return cleanup, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: go install centrifugo %s...\n", cmd.CommandPath(), bench.CentrifugoVersion)
	if *bin, err = bench.InstallCentrifugo(cmd.Context(), dir); err != nil {
		os.RemoveAll(dir)
		return cleanup, fmt.Errorf("%w (give a binary with --centrifugo, or --only ours)", err)
	}
	return func() { os.RemoveAll(dir) }, nil
}
