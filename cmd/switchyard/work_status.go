package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

// newWorkCmd builds switchyard work and its status.
func newWorkCmd() *cobra.Command {
	workCmd := &cobra.Command{
		Use:   "work",
		Short: "Inspect the work of a source: groups, ranges, leases, shares",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	workCmd.AddCommand(newWorkStatusCmd())
	return workCmd
}

// newWorkStatusCmd builds switchyard work status.
func newWorkStatusCmd() *cobra.Command {
	var natsOpts natsFlags
	var source string
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Print groups, ranges by state, leases, connection shares and throughput",
		Long: `Prints, for one source: each group's low/high water marks, how far it is
planned and how much of it is done; ranges and their articles by state
(planned, spooled, leased, done, failed); live leases with holder, progress
and expiry; the connection shares (name, priority, granted, in use); and the
articles per second finished over the last minute. --json for scripts.

Without --source it prints every source whose coordinator has started (up's
is "demo" with its demo provider), one after the other; with --json, one
object when there is one source and an array of them when there are
several. With none started yet it prints the source "default".

A --source whose coordinator has never started and that holds no work is
an error (exit 3) listing the sources that have started; a source whose
coordinator has started but not planned yet says "no groups planned yet".`,
		Example: `  switchyard work status
  switchyard work status --source eu-provider --json | jq .ranges`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSource(source); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				listed, err := work.ListSources(ctx, c)
				if err != nil {
					return err
				}
				named := cmd.Flags().Changed("source")
				sources := []string{source}
				if !named && len(listed) > 0 {
					sources = listed
				}
				var all []work.Status
				for _, src := range sources {
					st, err := work.NewStore(c, src)
					if err != nil {
						return usageError{err}
					}
					s, err := st.Status(ctx)
					if err != nil {
						return fmt.Errorf("source %s: %w", src, err)
					}
					// A source is known once its coordinator has started
					// (it is listed from then on, before it plans
					// anything) or once it holds work (state written by a
					// coordinator of a build that did not list sources
					// yet). Anything else is a name no process used: a
					// typo would otherwise print empty tables and exit 0.
					if named && !slices.Contains(listed, src) && noWorkState(s) {
						return notFoundf("source %q is not known: no coordinator of it has started and it holds no work (%s)", src, knownSources(listed))
					}
					all = append(all, s)
				}
				if asJSON {
					enc := json.NewEncoder(stdout(cmd))
					enc.SetIndent("", "  ")
					if len(all) == 1 {
						return enc.Encode(all[0])
					}
					return enc.Encode(all)
				}
				for i, s := range all {
					if i > 0 {
						fmt.Fprintln(stdout(cmd))
					}
					printStatus(stdout(cmd), s)
				}
				return nil
			})
		},
	}
	sourceFlag(status, &source)
	status.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	natsOpts.registerClient(status)
	return status
}

// noWorkState reports whether s shows nothing of a source: no groups,
// ranges, leases or shares.
func noWorkState(s work.Status) bool {
	for _, n := range s.Ranges {
		if n > 0 {
			return false
		}
	}
	return len(s.Groups) == 0 && len(s.Leases) == 0 && len(s.Shares) == 0 && len(s.Failed) == 0 && len(s.Broken) == 0
}

// knownSources words the sources whose coordinator has started, for an
// error naming a source that is not one of them.
func knownSources(listed []string) string {
	if len(listed) == 0 {
		return "no coordinator has started yet"
	}
	return "known: " + strings.Join(listed, ", ")
}

// printStatus prints the status tables. Group names and a failed range's
// error come from the NNTP provider (the error is often its own response
// text), and holders and share ids from the workers, so they are escaped
// (terminalSafe): none of them may write escapes or lines of its own.
func printStatus(out io.Writer, s work.Status) {
	w := newTable(out)
	fmt.Fprintf(w, "source %s: %.0f articles/s over the last minute\n\n", terminalSafe(s.Source), s.Throughput)
	if len(s.Groups) == 0 {
		// A started coordinator writes its groups once it has reached
		// the provider and planned them: say so rather than print a
		// table with no rows, which reads as a source nobody runs.
		fmt.Fprintln(w, "no groups planned yet (a coordinator plans them once it has started and reached the NNTP provider)")
	} else {
		fmt.Fprintln(w, "GROUP\tLOW\tHIGH\tPLANNED THROUGH\tDONE\tUNMATCHED")
	}
	for _, g := range s.Groups {
		// Rounded down, so 100% means every planned article is done:
		// rounding to nearest would show 99.5% as 100%.
		var pct int64
		if g.Planned > 0 {
			pct = 100 * g.Done / g.Planned
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d of %d (%d%%)\t%d\n", terminalSafe(g.Name), g.Low, g.High, g.PlannedThrough, g.Done, g.Planned, pct, g.Unmatched)
	}
	fmt.Fprintln(w, "\nSTATE\tRANGES\tARTICLES")
	for _, state := range work.States {
		fmt.Fprintf(w, "%s\t%d\t%d\n", state, s.Ranges[state], s.Articles[state])
	}
	if len(s.Leases) > 0 {
		fmt.Fprintln(w, "\nLEASE\tGROUP\tARTICLES\tHOLDER\tPROGRESS\tEXPIRES IN")
		for _, l := range s.Leases {
			fmt.Fprintf(w, "%d\t%s\t%d-%d\t%s\t%d\t%s\n", l.Range, terminalSafe(l.Group), l.First, l.Last, terminalSafe(l.Holder), l.Progress, time.Until(time.UnixMilli(l.Expires)).Round(time.Second))
		}
	}
	if len(s.Shares) > 0 {
		fmt.Fprintln(w, "\nSHARE\tID\tPRIORITY\tMIN\tMAX\tGRANTED\tIN USE\tREFUSALS")
		for _, e := range s.Shares {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", terminalSafe(e.Name), terminalSafe(e.ID), e.Priority, e.Min, e.Max, e.Granted, e.Using, e.TooMany)
		}
	}
	if s.Retired > 0 {
		fmt.Fprintf(w, "\n%d of the done ranges are retired (their records deleted --retain-done after they finished; their counts kept)\n", s.Retired)
	}
	for _, r := range s.Failed {
		fmt.Fprintf(w, "\nfailed: range %d %s %d-%d after %d attempts: %s\n", r.ID, terminalSafe(r.Group), r.First, r.Last, r.Attempts, terminalSafe(r.Error))
	}
	// Records that do not decode are skipped by every reader: the
	// operator mends or deletes them (a broken lease still holds its range).
	for _, b := range s.Broken {
		fmt.Fprintf(w, "\nbroken: %s/%s (seq %d) does not decode, skipped: %s\n", b.Stream, terminalSafe(b.Key), b.Seq, terminalSafe(b.Error))
	}
	w.Flush()
}
