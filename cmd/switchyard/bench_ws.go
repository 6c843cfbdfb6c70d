package main

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchWSCmd builds switchyard bench ws.
func newBenchWSCmd() *cobra.Command {
	var cfg bench.WSConfig
	var asJSON, quick bool
	var only string
	cmd := &cobra.Command{
		Use:   "ws",
		Short: "Watch gateway (a switchyard up process) vs Centrifugo without and with history",
		Long: `Runs the same load on three servers, one after the other, each in its own process on
loopback: switchyard up --no-work --servers 1 (its watch gateway, /ws/watch), Centrifugo
` + bench.CentrifugoVersion + ` with its memory engine, and Centrifugo with channel history. --watchers
WebSocket watchers of one stream (bench/shared on ours; on Centrifugo subscribers of the
channel shared) are read by bench events' minimal reader loop (one goroutine per connection,
reading only the write time embedded in each value). One warm-up write reaches every watcher
first. A writer then sets --rate values/s of --value-size bytes for --duration: on ours a
keyed set of a new key through a persist client on up's NATS (durable in SQLite before a
watcher sees it), on Centrifugo a publish through its HTTP server API.

It prints, per server: deliveries/s, p50 and p99 from the write to the watcher receiving it,
the server process's CPU time per delivery and its peak RSS during the fan-out (both from
/proc), the RSS growth per idle watcher before it, and the ratios ours/theirs (targets: CPU
per delivery, p99 and idle RSS <= 1.0x Centrifugo with history).

Centrifugo is built with go install into a temp directory unless --centrifugo names a
binary; --only ours leaves it out.

Every server is expected to deliver every write to every watcher: when one delivered fewer
than the writes called for, beyond the seqs the watch gateway's skipped messages name, the
figures are still printed, then the command says which server lost how many and exits 1.
A resync names none: it ends its watcher's watch, and bench ws does not reconnect, so the
writes after it are lost to that watcher.`,
		Example: `  switchyard bench ws
  switchyard bench ws --quick --only ours
  switchyard bench ws --watchers 10000 --rate 10 --centrifugo ./centrifugo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseNonPositive(cmd, "watchers", "rate", "duration", "value-size", "publishers"); err != nil {
				return err
			}
			// --quick sets what the command line does not.
			if quick && !cmd.Flags().Changed("watchers") {
				cfg.Watchers = 100
			}
			if quick && !cmd.Flags().Changed("duration") {
				cfg.Duration = time.Second
			}
			if err := cfg.Check(); err != nil {
				return usagef("%v", err)
			}
			if only != "" && only != "ours" && only != "centrifugo" {
				return usagef("--only is ours or centrifugo")
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
			res, err := bench.RunWS(cmd.Context(), cfg, benchProgress(cmd))
			if err != nil {
				return err
			}
			return reportWS(stdout(cmd), res, asJSON)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Watchers, "watchers", 1000, "WebSocket watchers of the one stream on each server")
	f.IntVar(&cfg.Rate, "rate", 100, "writer's sets per second")
	f.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long the writer writes")
	f.IntVar(&cfg.ValueSize, "value-size", 128, "bytes per value")
	f.IntVar(&cfg.Publishers, "publishers", 16, "sets in flight at most")
	f.BoolVar(&quick, "quick", false, "a smoke run: 100 watchers (unless --watchers), 1s (unless --duration)")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.StringVar(&only, "only", "", "run one side: ours or centrifugo")
	f.StringVar(&cfg.Centrifugo, "centrifugo", "", "Centrifugo binary to run (default: go install it into a temp directory)")
	f.StringVar(&cfg.UpProfile, "cpuprofile", "", "have our up write a CPU profile of its whole life to this `FILE` (read it with go tool pprof BINARY FILE)")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the servers' data, configs and logs (default: a temp dir)")
	return cmd
}

// reportWS prints res (see bench.PrintEventsResult), then fails when a
// server lost deliveries (bench.WSLost): printed first, since the figures
// of such a run are still what it measured.
func reportWS(w io.Writer, res bench.EventsResult, asJSON bool) error {
	if err := bench.PrintEventsResult(w, res, asJSON); err != nil {
		return err
	}
	return bench.WSLost(res)
}
