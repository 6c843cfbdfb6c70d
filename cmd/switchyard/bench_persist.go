package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchPersistCmd builds switchyard bench persist.
func newBenchPersistCmd() *cobra.Command {
	var cfg bench.PersistConfig
	var clients string
	var secure bool
	var streams bench.StreamsConfig
	var keys bench.KeysConfig
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "persist",
		Short: "persist set/setMany/pipelined sets vs JetStream KV put/async publish, on one embedded NATS",
		Long: `Starts one embedded NATS server with JetStream on, one persist server and the
balancer, then runs each workload on both sides for --duration:
  set (keyed, --value-size bytes) vs JetStream KV put, at each --clients level
  setMany of --batch vs JetStream async publish of --batch
  --batch pipelined sets (Stream.Pipeline, one future each) vs the same async publish
and prints ops/s for both and the ratio. Targets (not tests): set >= 0.5x KV put
at 1 client and >= 0.7x at 16; setMany and pipelined sets >= 1x async publish. Beside the table it
prints the bus floor (a bare request/reply), where a lone set's time goes (in the
persist server, its commit, and the bus and clients) and the storage ceiling
(the SQLite store alone), which bound what persist can reach.

With --auth it measures what securing the bus costs instead: the same persist
workloads on a bus with per-role NATS users and TLS for clients (as
"switchyard up --auth" runs it) and on an open one, back to back in one run.
Target: the secured bus keeps >= 0.9x (costs at most 10 %).

With --durable both sides fsync every acknowledged write: persist with every
stream synchronous=FULL (persist serve --sync), one fsync per group commit,
against JetStream with sync_interval: always. Targets: set >= 1x at 1 client,
>= 5x at 16. It then bounds those two ratios: persist's set with no fsync at
all (its default tier, on a server of its own), against the same durable
JetStream figures; no durable set can beat that line.

With --streams N it measures many small streams instead: N persist streams
(one 3-key stream in each of N scopes) against N JetStream KV buckets of the
same 3 keys, each server a process of its own (nats-server -js; persist serve
on a nats-server of its own, with a balancer), and reports for both sides and
the ratio: create (16 clients), spread writes (16 clients setting random keys
of random streams for --duration; then the same over the first 500 streams
only, or half of --max-open-streams, which persist holds open), the restart (SIGTERM, start again on the
same data: time to the first get answered and to a window of gets whose p99
is within 1.5x of the one before), RSS of the serving process after the
restart idle and after a get of 1 % of the streams, and disk per stream.
Targets (not tests): restart >= 100x faster than JetStream at 10,000 streams
and under 1 s at 100,000; idle RSS <= 0.1x; spread writes >= 1.0x; disk per
stream <= 1.0x. The nats-server binary is --nats-server, else nats-server on
PATH, else built once from the nats-server module this binary embeds.

With --keys N it measures many keys in one stream instead: N keys (values of
32-100 bytes) in one persist stream against one JetStream KV bucket
(history 1), the servers processes of their own as with --streams, and
reports for both sides and the ratio: the load (4 loaders, each with one
setMany of --batch keys / --batch async KV puts in flight), RSS of the
serving process after the load, after a restart idle and after --gets gets
of random keys (16 clients), the get p50 and p99, and disk. Target (not a
test): RSS <= 0.2x JetStream's.

With --streams or --keys, a phase that failed on either side (an error, a
get that failed, a wait past --js-timeout, a server that did not start or
come back) still leaves the figures measured printed, then the command
says what failed and exits 1.`,
		Example: `  switchyard bench persist --duration 1s --clients 1,16
  switchyard bench persist --streams 10000 --skip-js --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Clients, err = positiveInts("--clients", clients); err != nil {
				return err
			}
			if cfg.Duration <= 0 || cfg.ValueSize < 1 || cfg.Batch < 1 {
				return usagef("--duration, --value-size and --batch must be positive")
			}
			cfg.Progress = benchProgress(cmd)
			if cmd.Flags().Changed("streams") && cmd.Flags().Changed("keys") {
				return usagef("--streams and --keys measure different things; give one")
			}
			if cmd.Flags().Changed("keys") {
				if secure || cfg.Durable {
					return usagef("--keys measures one stream in the default tier; it takes neither --auth nor --durable")
				}
				for _, f := range []string{"max-open-streams", "packs", "value-size", "clients", "duration", "exclusive-files"} {
					if cmd.Flags().Changed(f) {
						return usagef("--%s does not go with --keys", f)
					}
				}
				keys.SkipJS, keys.Timeout, keys.NATSServer, keys.Settle = streams.SkipJS, streams.JSTimeout, streams.NATSServer, streams.Settle
				return runBenchKeys(cmd, cfg, keys, asJSON)
			}
			if cmd.Flags().Changed("gets") {
				return usagef("--gets goes with --keys N")
			}
			if cmd.Flags().Changed("streams") {
				if secure || cfg.Durable {
					return usagef("--streams measures many streams in the default tier; it takes neither --auth nor --durable")
				}
				// Its concurrency is fixed (16 clients) and it sends no
				// batches: a --clients or --batch given would be ignored.
				for _, f := range []string{"clients", "batch"} {
					if cmd.Flags().Changed(f) {
						return usagef("--%s does not go with --streams", f)
					}
				}
				return runBenchStreams(cmd, cfg, streams, asJSON)
			}
			for _, f := range []string{"skip-js", "js-timeout", "nats-server", "max-open-streams", "packs", "settle", "json"} {
				if cmd.Flags().Changed(f) {
					return usagef("--%s goes with --streams N or --keys N", f)
				}
			}
			if secure && (cfg.Durable || cfg.ExclusiveFiles) {
				return usagef("--auth compares two buses, not persist's tiers; it takes neither --durable nor --exclusive-files")
			}
			if secure {
				_, err = bench.RunPersistAuth(cmd.Context(), cfg, stdout(cmd))
				return err
			}
			_, err = bench.RunPersist(cmd.Context(), cfg, stdout(cmd))
			return err
		},
	}
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 3*time.Second, "how long each workload runs on each side")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 128, "bytes per value")
	cmd.Flags().StringVar(&clients, "clients", "1,16", "concurrency levels for set vs put")
	cmd.Flags().IntVar(&cfg.Batch, "batch", 1000, "messages per setMany / async publish batch")
	cmd.Flags().BoolVar(&secure, "auth", false, "compare a bus with per-role users and TLS against an open one instead of persist against JetStream")
	cmd.Flags().BoolVar(&cfg.Durable, "durable", false, "both sides in their durable tier: persist with every stream fsynced per commit (persist serve --sync) vs JetStream with sync_interval: always")
	cmd.Flags().BoolVar(&cfg.ExclusiveFiles, "exclusive-files", false, "run persist with each stream file locked while open (persist serve --exclusive-files), as a server alone on its data directory may")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "directory for SQLite and JetStream files (default: a temp dir)")
	cmd.Flags().IntVar(&streams.Streams, "streams", 0, "measure `N` small streams on each side (create, restart, RSS, spread writes, disk) instead of the one-stream workloads")
	cmd.Flags().IntVar(&keys.Keys, "keys", 0, "measure `N` keys in one stream on each side (load, RSS, get p50/p99, disk) instead of the one-stream workloads")
	cmd.Flags().IntVar(&keys.Gets, "gets", 20000, "with --keys: the gets of random keys after the restart")
	cmd.Flags().BoolVar(&streams.SkipJS, "skip-js", false, "with --streams or --keys: the persist side alone (for N that JetStream cannot hold)")
	cmd.Flags().DurationVar(&streams.JSTimeout, "js-timeout", 5*time.Minute, "with --streams: bound of JetStream's create and of each wait after a restart (reported as > timeout); with --keys: bound of each side's load and of each wait after a restart")
	cmd.Flags().StringVar(&streams.NATSServer, "nats-server", "", "with --streams or --keys: the nats-server `BIN` to run (default nats-server on PATH, else one built from the module this binary embeds)")
	cmd.Flags().IntVar(&streams.MaxOpenStreams, "max-open-streams", 0, "with --streams: persist serve --max-open-streams (0: the server's default)")
	cmd.Flags().IntVar(&streams.Packs, "packs", 0, "with --streams: persist serve --packs `N`, the streams in N shared files (0: a file each)")
	cmd.Flags().DurationVar(&streams.Settle, "settle", 2*time.Second, "with --streams or --keys: the pause before each RSS reading")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --streams or --keys: print the figures as JSON")
	return cmd
}

// runBenchStreams runs bench persist --streams: the servers are separate
// processes, persist's being this binary (persist serve, balancer).
func runBenchStreams(cmd *cobra.Command, cfg bench.PersistConfig, sc bench.StreamsConfig, asJSON bool) error {
	if sc.Streams < 1 {
		return usagef("--streams %d: want at least 1", sc.Streams)
	}
	if sc.JSTimeout <= 0 || sc.Settle <= 0 || sc.MaxOpenStreams < 0 {
		return usagef("--js-timeout and --settle must be positive, --max-open-streams not negative")
	}
	if err := checkPacks(sc.Packs, ""); err != nil {
		return err
	}
	sc.ExclusiveFiles = cfg.ExclusiveFiles
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench persist --streams: find this binary: %w", err)
	}
	if sc.NATSServer, err = bench.FindNATSServer(cmd.Context(), sc.NATSServer); err != nil {
		return err
	}
	sc.Switchyard = []string{self}
	sc.Duration, sc.ValueSize, sc.Dir, sc.Progress = cfg.Duration, cfg.ValueSize, cfg.Dir, cfg.Progress
	_, err = bench.RunStreams(cmd.Context(), sc, stdout(cmd), asJSON)
	return err
}

// runBenchKeys runs bench persist --keys: the servers are separate
// processes, persist's being this binary (persist serve, balancer).
func runBenchKeys(cmd *cobra.Command, cfg bench.PersistConfig, kc bench.KeysConfig, asJSON bool) error {
	if kc.Keys < 1 || kc.Gets < 1 {
		return usagef("--keys %d --gets %d: want at least 1 of each", kc.Keys, kc.Gets)
	}
	if kc.Timeout <= 0 || kc.Settle <= 0 {
		return usagef("--js-timeout and --settle must be positive")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench persist --keys: find this binary: %w", err)
	}
	if kc.NATSServer, err = bench.FindNATSServer(cmd.Context(), kc.NATSServer); err != nil {
		return err
	}
	kc.Switchyard = []string{self}
	kc.Batch, kc.Dir, kc.Progress = cfg.Batch, cfg.Dir, cfg.Progress
	_, err = bench.RunKeys(cmd.Context(), kc, stdout(cmd), asJSON)
	return err
}

// positiveInts parses a comma-separated list of positive integers given to
// flag, as a usage error when it is not one.
func positiveInts(flag, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, usagef("%s %q: want positive integers separated by commas, for example 1,16", flag, list)
		}
		out = append(out, n)
	}
	return out, nil
}
