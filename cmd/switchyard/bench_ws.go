package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchWSCmd builds switchyard bench ws.
func newBenchWSCmd() *cobra.Command {
	var cfg bench.WSConfig
	var quick, inProcess bool
	var cpuProfile, blockProfile, mutexProfile string
	cmd := &cobra.Command{
		Use:   "ws",
		Short: "Watch gateway: WebSocket watchers vs Stream.Watch in Go, and memory per idle WebSocket watcher",
		Long: `Starts one embedded NATS server, one persist server, the balancer and the
WebSocket watch gateway on loopback. --watchers Go WebSocket clients (standing
in for browsers, in this process) watch one stream through the gateway while a
writer sets --rate values/s for --duration; then as many Stream.Watch watchers
in Go (one persist client, as the gateway has) watch another stream under the
same writer. It prints p50 and p99 from a write returning to each watcher
receiving it, for both, and the p99 ratio (target: WebSocket <= 2x Go).

Then it opens --idle idle WebSocket watchers and prints the growth of this
process's heap and goroutine stacks per watcher (target <= 64 KiB). The
clients run in a child process (this binary), so the figure is the server
side's alone; with --in-process they share this process and the figure counts
both sides (an upper bound).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if quick {
				cfg.Watchers, cfg.Idle, cfg.Duration = 100, 200, time.Second
			}
			if cfg.Watchers < 1 || cfg.Idle < 1 || cfg.Rate < 1 || cfg.ValueSize < 1 || cfg.Duration <= 0 {
				return usagef("--watchers, --idle, --rate, --value-size and --duration must be positive")
			}
			if !inProcess {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.ClientCmd = []string{self, "bench", "ws-clients"}
			}
			stopProfiles, err := startProfiles(cpuProfile, blockProfile, mutexProfile)
			if err != nil {
				return err
			}
			_, err = bench.RunWS(cmd.Context(), cfg, stdout(cmd))
			if perr := stopProfiles(); err == nil {
				err = perr
			}
			return err
		},
	}
	cmd.Flags().IntVar(&cfg.Watchers, "watchers", 1000, "WebSocket watchers, and Go watchers beside them")
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long the writer writes on each side")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 100, "writer's sets per second")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 128, "bytes per value")
	cmd.Flags().IntVar(&cfg.Idle, "idle", 1000, "idle WebSocket watchers for the memory figure")
	cmd.Flags().BoolVar(&quick, "quick", false, "a smoke run: 100 watchers, 200 idle, 1s")
	cmd.Flags().BoolVar(&inProcess, "in-process", false, "run the idle clients in this process (the memory figure then counts both sides)")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "directory for SQLite files (default: a temp dir)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (gateway, clients and Go side) to this file")
	cmd.Flags().StringVar(&blockProfile, "blockprofile", "", "write a block profile of the whole run to this file")
	cmd.Flags().StringVar(&mutexProfile, "mutexprofile", "", "write a mutex contention profile of the whole run to this file")
	return cmd
}

// newBenchWSClientsCmd builds the hidden bench ws-clients, the child process
// bench ws starts to hold its idle watchers.
func newBenchWSClientsCmd() *cobra.Command {
	var u string
	var n int
	clients := &cobra.Command{
		Use:    "ws-clients",
		Short:  "Child process of bench ws: holds idle WebSocket watchers until stdin ends",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.WSClients(cmd.Context(), u, n, cmd.InOrStdin(), stdout(cmd))
		},
	}
	clients.Flags().StringVar(&u, "url", "", "watch URL")
	clients.Flags().IntVar(&n, "n", 1, "watchers")
	return clients
}

// startProfiles starts the profiles whose file names are not empty and
// returns a func that stops them and writes them out.
func startProfiles(cpu, block, mutex string) (func() error, error) {
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		cpuFile = f
	}
	if block != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond)) // blocking events of 1µs or more
	}
	if mutex != "" {
		runtime.SetMutexProfileFraction(10)
	}
	return func() error {
		var first error
		keep := func(err error) {
			if first == nil {
				first = err
			}
		}
		if cpuFile != nil {
			pprof.StopCPUProfile()
			keep(cpuFile.Close())
		}
		for _, p := range []struct{ name, file string }{{"block", block}, {"mutex", mutex}} {
			if p.file == "" {
				continue
			}
			f, err := os.Create(p.file)
			if err != nil {
				keep(err)
				continue
			}
			keep(pprof.Lookup(p.name).WriteTo(f, 0))
			keep(f.Close())
		}
		return first
	}, nil
}
