package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

func init() {
	var (
		host, dataDir, archiveDir, placementName, service string
		port, servers                                     int
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything embedded in one process: NATS, persist servers and the balancer",
		Long: `Starts an embedded NATS server, --servers persist servers (ids 0..N-1) sharing the
data directory, and the balancer, then prints how to connect. Client commands
(switchyard kv, stream, persist inventory) find it at the default address.
Ctrl-C or SIGTERM stops it cleanly: requests in flight are answered and every
SQLite file is closed.`,
		Example: `  switchyard up
  switchyard up --nats-port 4333 --data /tmp/sy --servers 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return usagef("--nats-port %d: want 1-65535", port)
			}
			if servers < 1 || servers > 64 {
				return usagef("--servers %d: want 1-64", servers)
			}
			fn, err := parsePlacement(placementName)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
			return runUp(cmd, upConfig{host: host, port: port, dataDir: dataDir, archiveDir: archiveDir, servers: servers, placement: fn, placementName: placementName, service: service})
		},
	}
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "address the embedded NATS server listens on")
	cmd.Flags().IntVar(&port, "nats-port", 4222, "port of the embedded NATS server")
	cmd.Flags().StringVar(&dataDir, "data", "./switchyard-data", "directory for the SQLite files")
	cmd.Flags().StringVar(&archiveDir, "archive", "", "directory for backup copies of the streams (optional, see persist serve --help)")
	cmd.Flags().IntVar(&servers, "servers", 2, "number of persist servers (ids 0..N-1)")
	cmd.Flags().StringVar(&placementName, "placement", placement.NameRendezvous, "placement function: rendezvous or modulo")
	cmd.Flags().StringVar(&service, "service", bus.DefaultService, "first subject token of the persist service")
	rootCmd.AddCommand(cmd)
}

type upConfig struct {
	host, dataDir, archiveDir, placementName, service string
	port, servers                                     int
	placement                                         placement.Func
}

// runUp starts every role, waits for the command's context to end (a
// signal), then stops them in reverse order: balancer, persist servers
// (draining), connections, NATS.
func runUp(cmd *cobra.Command, cfg upConfig) (err error) {
	embedded, err := embedded.Start(embedded.Config{Host: cfg.host, Port: cfg.port})
	if err != nil {
		return err
	}
	defer embedded.Shutdown()
	url := embedded.ClientURL()

	var stops []func(context.Context) error // run in reverse on the way out
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		// The stops share one drain deadline, so once a persist server has
		// given up (its error wraps context.DeadlineExceeded) the later ones
		// give up too: the first error is returned (exit 1), the rest logged.
		for i := len(stops) - 1; i >= 0; i-- {
			serr := stops[i](ctx)
			switch {
			case serr == nil:
			case err == nil:
				err = serr
			default:
				slog.Warn("switchyard: stop", "err", serr)
			}
		}
	}()
	connect := func(name string) (*nats.Conn, error) {
		// Roles inside this process reach the embedded server over an
		// in-memory pipe rather than loopback TCP.
		nc, err := embedded.ConnectInProcess(bus.ConnectConfig{Name: name})
		if err != nil {
			return nil, err
		}
		stops = append(stops, func(context.Context) error { nc.Close(); return nil })
		return nc, nil
	}

	ids := make([]string, cfg.servers)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	for _, id := range ids {
		nc, err := connect("switchyard-persist-" + id)
		if err != nil {
			return err
		}
		srv, err := server.New(server.Config{Conn: nc, ID: id, IDs: ids, Placement: cfg.placement, Service: cfg.service, DataDir: cfg.dataDir, Archive: cfg.archiveDir})
		if err != nil {
			return err
		}
		if err := srv.Start(cmd.Context()); err != nil {
			return err
		}
		stops = append(stops, srv.Stop)
	}
	nc, err := connect("switchyard-balancer")
	if err != nil {
		return err
	}
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: nc, IDs: ids, Placement: cfg.placement, Service: cfg.service})
	if err != nil {
		return err
	}
	if err := b.Start(cmd.Context()); err != nil {
		return err
	}
	stops = append(stops, b.Stop)

	w := stdout(cmd)
	flag := ""
	if url != defaultLocalURL {
		flag = " --nats " + url
	}
	fmt.Fprintf(w, `switchyard is up
  NATS       %s   (export %s=%s)
  persist    %d servers, ids %s, placement %s, data %s
  balancer   %s.*.id

Try:
  switchyard kv set hub demo greeting hello%s
  switchyard kv get hub demo greeting%s
  switchyard stream pub hub log 'first event'%s
  switchyard watch hub log%s                # every change, live
  nats req %s.hub.id ''          # the plain NATS client works too

Stop with Ctrl-C.
`, url, bus.EnvURL, url, cfg.servers, strings.Join(ids, ","), cfg.placementName, cfg.dataDir, cfg.service, flag, flag, flag, flag, cfg.service)

	<-cmd.Context().Done()
	slog.Info("switchyard stopping: draining in-flight requests")
	return nil
}
