package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
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
		Short: "Run a persist server, or inspect a stream or the servers",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	p.AddCommand(newPersistServeCmd(), newPersistInventoryCmd())
	return p
}

func newPersistServeCmd() *cobra.Command {
	var natsOpts natsFlags
	var archiveEvery time.Duration
	var maxOpen, maxQueue, packs int
	maxQueueBytes := int64(server.MaxQueueBytesDefault)
	var syncAll, exclusive bool
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
			if err := checkPacks(packs, archiveDir); err != nil {
				return err
			}
			if maxQueue < 1 || maxQueueBytes < 1 {
				return usagef("--max-queue %d and --max-queue-bytes %d must be at least 1", maxQueue, maxQueueBytes)
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
			// Every flag is checked: only now may it create the directories.
			if err := checkDataDirs(dataDir, archiveDir); err != nil {
				return err
			}
			cfg := fleet.Config{
				Service: natsOpts.service,
				NATS:    bus,
				Persist: fleet.PersistConfig{IDs: ids, Serve: []string{id}, Placement: fn, DataDir: dataDir, Archive: archiveDir, ArchiveEvery: archiveEvery, MaxOpenStreams: maxOpen, MaxQueue: maxQueue, MaxQueueBytes: maxQueueBytes, Sync: syncAll, ExclusiveFiles: exclusive, Packs: packs},
				HTTP:    httpOpts.fleetHTTP(),
			}
			return runFleet(cmd, cfg, func(f *fleet.Fleet) {
				if u := httpOpts.shownURL(f.HTTPURL()); u != "" {
					fmt.Fprintf(stdout(cmd), "persist server %s: http %s\n", id, u)
				}
				// A line other processes (and the durability test) can wait for.
				fmt.Fprintf(stdout(cmd), "persist server %s ready on %s (data %s)\n", id, shownBusURL(f), dataDir)
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
	cmd.Flags().IntVar(&maxQueue, "max-queue", server.MaxQueueDefault, "requests that may wait on one stream; more are answered unavailable (clients retry)")
	cmd.Flags().Var(sizeValue{&maxQueueBytes}, "max-queue-bytes", "bytes of requests the server may hold queued or being served, over all its streams (each counted at its message's size plus what decoding it took); a request past it is answered unavailable. A number of bytes or with KiB, MiB, GiB")
	cmd.Flags().BoolVar(&syncAll, "sync", false, "fsync every commit of every stream (synchronous=FULL) before answering its writes: an acknowledged write survives power loss, at the cost of one fsync per group commit; without it only streams whose config says \"sync\": true do")
	cmd.Flags().BoolVar(&exclusive, "exclusive-files", false, "lock each stream file for as long as it is open (SQLite locking_mode=EXCLUSIVE): opens, closes and commits cost about a third less, but no other process can read a stream this server holds open; for a server alone on --data (servers sharing it must leave it off, or a scope moving between them waits until the old owner closes the stream)")
	cmd.Flags().IntVar(&packs, "packs", 0, packsHelp)
	cmd.Flags().StringVar(&placementName, "placement", placement.NameRendezvous, "placement function: rendezvous or modulo (must match the balancer)")
	httpOpts.register(cmd, "")
	return cmd
}

// checkPacks refuses a --packs out of range, or with --archive, as a usage
// error (persist serve and up).
func checkPacks(packs int, archiveDir string) error {
	if packs < 0 || packs > store.MaxPacks {
		return usagef("--packs %d: want 0 (a file per stream) to %d", packs, store.MaxPacks)
	}
	if packs > 0 && archiveDir != "" {
		return usagef("--packs and --archive exclude each other: a stream in a pack has no file to copy")
	}
	return nil
}

// packsHelp is the --packs flag's text, the same for persist serve and up.
var packsHelp = fmt.Sprintf("keep new streams in N shared files under the data directory's .packs instead of a file each (0: a file each): a stream there holds no file descriptor and under a KiB of memory while open, so a server writing to many more streams than it can keep open stays fast; --max-open-streams then defaults to %d. Fixed once the data directory has packs (at most %d); stream files made before stay as they are. The packs are one process's at a time; excludes --archive", server.PackedMaxOpenStreamsDefault, store.MaxPacks)

func newPersistInventoryCmd() *cobra.Command {
	var natsOpts natsFlags
	var idsFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inventory [SCOPE STREAM]",
		Short: "Print a stream's count, bytes, last seq and limits; without arguments, each server's streams, open and on disk",
		Long: `With SCOPE STREAM, prints that stream's message count, bytes, last seq and
non-default limits as JSON.

Without arguments, asks each persist server for its own figures (the servers
the balancer places scopes over, or those of --ids) and prints one line per
server: the persistent streams it holds on disk (counted
by a walk of its data directory at start, "counting" until that is done, then
kept up by its creates and drops), the streams whose files are open now and
at most since it started, its cap (--max-open-streams), the file descriptors
the open ones hold (3 each, 2 with --exclusive-files), the streams its closer
compacted, and those waiting for it (TO-COMPACT: the closer leaves them while
requests are being served). --json
prints the answers as a JSON array. A server that does not answer is
reported on its line and makes the command fail. It needs the trusted
client's credentials (a tenant's cannot reach a server's own subject).`,
		Example: `  switchyard persist inventory hub orders
  switchyard persist inventory --ids 0,1,2,3`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return usagef("persist inventory takes SCOPE STREAM, or nothing for every server's figures; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				var ids []string
				if cmd.Flags().Changed("ids") {
					var err error
					if ids, err = parseIDs(idsFlag); err != nil {
						return err
					}
				}
				return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
					if ids == nil {
						// The fleet's servers, as many as it runs (up
						// --servers N), not a default list.
						var err error
						if ids, err = c.ServerIDs(ctx); err != nil {
							return fmt.Errorf("which persist servers to ask (give --ids to say): %w", err)
						}
					}
					return printServerInventory(ctx, stdout(cmd), c, ids, asJSON)
				})
			}
			if cmd.Flags().Changed("ids") {
				return usagef("--ids goes with persist inventory without SCOPE STREAM")
			}
			if err := checkScopeStream(args[0], args[1]); err != nil {
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
	cmd.Flags().StringVar(&idsFlag, "ids", "", "without SCOPE STREAM: the persist server ids to ask (default: those the balancer places over)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "without SCOPE STREAM: print the servers' answers as a JSON array")
	return cmd
}

// printServerInventory asks each server of ids for its figures and prints
// them, a line each (or a JSON array); it fails when one did not answer,
// after printing the others.
func printServerInventory(ctx context.Context, out io.Writer, c *persist.Client, ids []string, asJSON bool) error {
	var sts []persist.ServerStats
	var first error
	errs := map[string]error{}
	for _, id := range ids {
		st, err := c.ServerStats(ctx, id)
		if err != nil {
			errs[id] = err
			if first == nil {
				first = err
			}
			continue
		}
		sts = append(sts, st)
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if sts == nil {
			sts = []persist.ServerStats{}
		}
		if err := enc.Encode(sts); err != nil {
			return err
		}
		return first
	}
	w := newTable(out)
	fmt.Fprintln(w, "SERVER\tSTREAMS\tOPEN\tPEAK\tCAP\tDESCRIPTORS\tCOMPACTED\tTO-COMPACT")
	next := 0
	for _, id := range ids {
		if err := errs[id]; err != nil {
			fmt.Fprintf(w, "%s\tno answer: %v\n", id, err)
			continue
		}
		st := sts[next]
		next++
		var streams string
		switch {
		case st.Streams >= 0:
			streams = strconv.FormatInt(st.Streams, 10)
		case st.Streams == -1:
			streams = "counting"
		default:
			streams = "unknown" // the walk failed (the server logged why)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", st.ID, streams, st.OpenStorage, st.OpenStoragePeak, st.MaxOpenStreams, st.Descriptors, st.StreamsCompacted, st.CompactBacklog)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return first
}
