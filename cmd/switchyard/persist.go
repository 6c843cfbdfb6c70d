package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
	"github.com/switchyard-dev/switchyard/placement"
)

// newPersistCmd builds switchyard persist and its subcommands.
func newPersistCmd() *cobra.Command {
	p := &cobra.Command{
		Use:   "persist",
		Short: "Run a persist server, or inspect a stream",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	p.AddCommand(newPersistServeCmd(), newPersistInventoryCmd())
	return p
}

func newPersistServeCmd() *cobra.Command {
	var natsOpts natsFlags
	var archiveEvery time.Duration
	var maxOpen int
	var syncAll bool
	var id, idsFlag, dataDir, archiveDir, placementName string
	var httpOpts httpFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the scopes placement gives this server id, storing them under --data",
		Long: `Runs one persist server. It answers {service}.{scope}.api.{id} for every scope
that the placement of --ids gives to --id, and wrong-owner for the others.
Each stream is one SQLite file under --data. With --archive DIR, every stream
written since its last backup is copied to DIR every --archive-every and when
it closes, and a stream whose local file is missing or older than its archive
copy is restored from DIR when it opens (see docs/persist.md).
On SIGTERM or Ctrl-C it stops taking requests, answers the ones in flight and
closes its files.`,
		Example: `  switchyard persist serve --id 0 --ids 0,1 --data /var/lib/switchyard --nats nats://10.0.0.5:4222`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(idsFlag)
			if err != nil {
				return err
			}
			if !slices.Contains(ids, id) {
				return usagef("--id %q is not one of --ids %q", id, idsFlag)
			}
			fn, err := parsePlacement(placementName)
			if err != nil {
				return err
			}
			if dataDir == "" {
				return usagef("--data is required")
			}
			if maxOpen < 0 {
				return usagef("--max-open-streams %d: must not be negative", maxOpen)
			}
			if archiveEvery < 0 {
				return usagef("--archive-every %s: must not be negative", archiveEvery)
			}
			if err := httpOpts.validate(false); err != nil {
				return err
			}
			bus, err := natsOpts.fleetNATS()
			if err != nil {
				return err
			}
			cfg := fleet.Config{
				Service: natsOpts.service,
				NATS:    bus,
				Persist: fleet.PersistConfig{IDs: ids, Serve: []string{id}, Placement: fn, DataDir: dataDir, Archive: archiveDir, ArchiveEvery: archiveEvery, MaxOpenStreams: maxOpen, Sync: syncAll},
				HTTP:    httpOpts.fleetHTTP(),
			}
			return runFleet(cmd, cfg, func(f *fleet.Fleet) {
				if u := f.HTTPURL(); u != "" {
					fmt.Fprintf(stdout(cmd), "persist server %s: http %s\n", id, u)
				}
				// A line other processes (and the durability test) can wait for.
				fmt.Fprintf(stdout(cmd), "persist server %s ready on %s (data %s)\n", id, f.BusURL(), dataDir)
			}, "persist server stopping", "id", id)
		},
	}
	natsOpts.registerServer(cmd)
	cmd.Flags().StringVar(&id, "id", "0", "this server's id (one of --ids)")
	cmd.Flags().StringVar(&idsFlag, "ids", "0,1", "all persist server ids, in the order every party agrees on")
	cmd.Flags().StringVar(&dataDir, "data", "./switchyard-data", "directory for the SQLite files")
	cmd.Flags().StringVar(&archiveDir, "archive", "", "directory for backup copies of the streams (optional; may be shared by servers)")
	cmd.Flags().DurationVar(&archiveEvery, "archive-every", server.ArchiveEveryDefault, "how often streams changed since their last backup are copied to --archive")
	cmd.Flags().IntVar(&maxOpen, "max-open-streams", 0, fmt.Sprintf("streams kept open at once, %d file descriptors and about %d KiB of memory each; 0 derives it from the descriptor limit and a memory budget of %d MiB (now %d): the lower of (limit - %d) / %d and %d", store.FilesPerOpenStream, server.OpenStreamMemory>>10, server.OpenStreamsMemoryDefault>>20, server.DefaultMaxOpenStreams(1), server.DescriptorReserve, store.FilesPerOpenStream, server.MaxOpenStreamsDefault))
	cmd.Flags().BoolVar(&syncAll, "sync", false, "fsync every commit of every stream (synchronous=FULL) before answering its writes: an acknowledged write survives power loss, at the cost of one fsync per group commit; without it only streams whose config says \"sync\": true do")
	cmd.Flags().StringVar(&placementName, "placement", placement.NameRendezvous, "placement function: rendezvous or modulo (must match the balancer)")
	httpOpts.register(cmd, "")
	return cmd
}

func newPersistInventoryCmd() *cobra.Command {
	var natsOpts natsFlags
	cmd := &cobra.Command{
		Use:   "inventory SCOPE STREAM",
		Short: "Print a stream's message count, bytes, last seq and non-default limits as JSON",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScope(args[0]); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				inv, err := c.Stream(args[0], args[1]).Inventory(ctx)
				if err != nil {
					return err
				}
				enc := json.NewEncoder(stdout(cmd))
				enc.SetIndent("", "  ")
				return enc.Encode(inv)
			})
		},
	}
	natsOpts.registerClient(cmd)
	return cmd
}
