package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/persist"
)

// newEventsCmd builds switchyard events and its subcommands.
func newEventsCmd() *cobra.Command {
	ev := &cobra.Command{
		Use:   "events",
		Short: "The events layer: who is connected where, durable subscriptions, a live tail, region secrets",
		Long: `Commands of the events layer (docs/events.md). Its WebSocket API, /ws/events, is
served by switchyard up's HTTP side, or by events serve beside persist servers
that run elsewhere; try it on the /events page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	ev.AddCommand(newEventsServeCmd(), newEventsPresenceCmd(), newEventsSubsCmd(), newEventsTailCmd(), newEventsSecretsCmd())
	return ev
}

// newEventsPresenceCmd builds switchyard events presence.
func newEventsPresenceCmd() *cobra.Command {
	var natsOpts natsFlags
	cmd := &cobra.Command{
		Use:   "presence USER",
		Short: "Print where USER is connected in this region: app, since when (exit 3 if not)",
		Long: `Prints USER's presence rows, one per app and region the user has a connection
in: the first connection of an app in a region writes the row, and the last one's close
removes it 30 to 60 seconds later (so a reload writes nothing). Rows are persist data in
scope "presence", stream USER; a subscription on the anchor presence/USER hears them come
and go. Each region keeps its own rows: this lists those of the region whose bus it asks.
A region that stops keeps its rows, so that a restart or a deploy writes nothing: until
the user's next connection there closes, or the rows' 48 h TTL ends, they are listed
while no connection is open.`,
		Example: `  switchyard events presence alice
  APP    REGION   CONNECTED SINCE
  notes  eu-west  2026-12-02T14:03:11Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			if err := checkUser(user); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				rows, err := events.PersistPresence{Client: c}.List(ctx, user)
				if err != nil {
					return fmt.Errorf("presence of %q: %w", user, err)
				}
				if len(rows) == 0 {
					return notFoundf("%q is not connected in this region", user)
				}
				tw := newTable(stdout(cmd))
				fmt.Fprintln(tw, "APP\tREGION\tCONNECTED SINCE")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", terminalSafe(r.App), terminalSafe(r.Region), time.UnixMilli(r.ConnectedAt).UTC().Format(time.RFC3339))
				}
				return tw.Flush()
			})
		},
	}
	natsOpts.registerClient(cmd)
	return cmd
}

// newEventsSecretsCmd builds switchyard events secrets.
func newEventsSecretsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "secrets NAME...",
		Short: "Print a --forward-secrets file for the regions NAME...: one random secret each",
		Long: `Prints NAME=SECRET lines, a random 256-bit secret (hex) for each region named: the
file every region's up --forward-secrets reads (the same file in every region). Each
region signs its batches with its own secret and checks its peers' with theirs. Keep
the file private (mode 0600): whoever has a region's secret can send as that region.`,
		Example: `  switchyard events secrets eu us > regions.secrets && chmod 600 regions.secrets`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seen := map[string]bool{}
			var b strings.Builder
			for _, name := range args {
				if !validRegionName(name) {
					return usagef("region %q: want 1 to 64 of [a-z0-9_-]", name)
				}
				if seen[name] {
					return usagef("region %q named twice", name)
				}
				seen[name] = true
				var raw [32]byte
				_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
				fmt.Fprintf(&b, "%s=%s\n", name, hex.EncodeToString(raw[:]))
			}
			_, err := io.WriteString(stdout(cmd), b.String())
			return err
		},
	}
}

// checkUser rejects a USER argument that cannot name a user's rows (the
// rule of persist.ValidStreamName), as a usage error.
func checkUser(user string) error {
	// ValidStreamName words the empty name for the wire ("missing stream
	// name (Sy-Stream)"), which names no argument of this command.
	if user == "" {
		return usagef("USER is empty")
	}
	if err := persist.ValidStreamName(user); err != nil {
		return usagef("user %q: %v", user, err)
	}
	return nil
}

// newEventsSubsCmd builds switchyard events subs.
func newEventsSubsCmd() *cobra.Command {
	var natsOpts natsFlags
	cmd := &cobra.Command{
		Use:   "subs USER",
		Short: "List USER's durable subscriptions: id, mode, anchor, filter, created, settled seq, changes since (exit 3 if none)",
		Long: `Lists the durable subscriptions USER stored through /ws/events (subscribe with mode
"broadcast" or "single"): rows kept in persist, scope events, stream subscriptions, key
USER/ID, live in every router of the region. Session subscriptions, which end with their
socket, are not rows and are not listed. SETTLED is a single subscription's cursor: the seq
of its stream up to which every change is acked, where a restarted region resumes it ("-"
for broadcast, or before a router has started the row). BEHIND is how many changes its
stream took after SETTLED: at most that many deliveries are still to be acked (changes
outside the anchor or the filter count too), so a BEHIND that only grows is a user whose
sessions do not ack.`,
		Example: `  switchyard events subs alice
  ID    MODE    ANCHOR          FILTER  CREATED               SETTLED  BEHIND
  jobs  single  project-1/jobs  -       2026-12-02T14:03:11Z  42       3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			if err := checkUser(user); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				store := events.DurableStore{Client: c}
				rows, err := store.List(ctx, user)
				if err != nil {
					return err
				}
				if len(rows) == 0 {
					return notFoundf("%q has no durable subscriptions", user)
				}
				// The last seq of each anchor's stream, read once a stream.
				lastSeq := map[events.Subject]uint64{}
				seqOf := func(anchor string) (uint64, bool, error) {
					a, err := events.ParseAnchor(anchor)
					if err != nil {
						return 0, false, nil // a row this build cannot read: no figure
					}
					k := events.Subject{Scope: a.Scope, Stream: a.Stream}
					if seq, ok := lastSeq[k]; ok {
						return seq, true, nil
					}
					inv, err := c.Stream(a.Scope, a.Stream).Inventory(ctx)
					if errors.Is(err, persist.ErrNotFound) {
						return 0, false, nil
					}
					if err != nil {
						return 0, false, fmt.Errorf("the stream of %s: %w", anchor, err)
					}
					lastSeq[k] = inv.Seq
					return inv.Seq, true, nil
				}
				tw := newTable(stdout(cmd))
				fmt.Fprintln(tw, "ID\tMODE\tANCHOR\tFILTER\tCREATED\tSETTLED\tBEHIND")
				for _, r := range rows {
					filter := strings.Join(r.Ops, ",")
					if r.Glob != "" {
						filter = strings.TrimPrefix(filter+" "+r.Glob, " ")
					}
					if filter == "" {
						filter = "-"
					}
					settled, behind := "-", "-"
					if r.Mode == events.ModeSingle {
						seq, ok, err := store.Cursor(ctx, user, r.ID)
						if err != nil {
							return err
						}
						if ok {
							settled = strconv.FormatUint(seq, 10)
							last, known, err := seqOf(r.Anchor)
							if err != nil {
								return err
							}
							if known {
								behind = strconv.FormatUint(last-min(last, seq), 10)
							}
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(r.ID), terminalSafe(r.Mode), terminalSafe(r.Anchor), terminalSafe(filter),
						time.UnixMilli(r.Created).UTC().Format(time.RFC3339), settled, behind)
				}
				return tw.Flush()
			})
		},
	}
	natsOpts.registerClient(cmd)
	return cmd
}
