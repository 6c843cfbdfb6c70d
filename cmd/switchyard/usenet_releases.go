package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// newUsenetReleasesCmd builds switchyard usenet releases.
func newUsenetReleasesCmd() *cobra.Command {
	var natsOpts natsFlags
	var usenetOpts usenetFlags
	var q usenet.ListQuery
	var asJSON bool
	releases := &cobra.Command{
		Use:   "releases",
		Short: "List the visible releases, newest first",
		Long: `Lists the releases the indexer made visible (complete, or settled with enough
of them present), newest first: id, date, category, size, files, completion
and name. --group keeps those posted to a group; --q keeps those whose name
holds every word, ignoring case and accents as the Newznab API's q does
(Amelie finds Amélie; . _ - separate words; punctuation alone finds
nothing). --json prints the records as a JSON array for scripts.`,
		Example: `  switchyard usenet releases
  switchyard usenet releases --q "show s01e02" --group alt.binaries.teevee
  switchyard usenet releases --json --limit 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if q.Limit < 0 {
				return usagef("--limit %d: want 0 (all) or more", q.Limit)
			}
			if err := usenet.ValidScope(usenetOpts.scope); err != nil {
				return usagef("--usenet-scope: %v", err)
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				st, err := usenetOpts.store(c)
				if err != nil {
					return err
				}
				rels, err := st.List(ctx, q)
				if err != nil {
					return err
				}
				if asJSON {
					if rels == nil {
						rels = []usenet.Release{}
					}
					enc := json.NewEncoder(stdout(cmd))
					enc.SetIndent("", "  ")
					return enc.Encode(rels)
				}
				printReleases(stdout(cmd), rels)
				return nil
			})
		},
	}
	releases.Flags().StringVar(&q.Group, "group", "", "only releases posted to `GROUP`")
	releases.Flags().StringVar(&q.Words, "q", "", "only releases whose name holds all these `WORDS`")
	releases.Flags().IntVar(&q.Limit, "limit", 100, "at most this many releases (0: all)")
	releases.Flags().BoolVar(&asJSON, "json", false, "print the releases as a JSON array")
	usenetOpts.registerScope(releases)
	natsOpts.registerClient(releases)
	return releases
}

// newUsenetNZBCmd builds switchyard usenet nzb.
func newUsenetNZBCmd() *cobra.Command {
	var natsOpts natsFlags
	var usenetOpts usenetFlags
	nzb := &cobra.Command{
		Use:   "nzb RELEASE",
		Short: "Write the NZB file of a release to standard output",
		Long: `Writes the NZB 1.1 file of the visible release RELEASE (its id, as
'usenet releases' and the Newznab API show it) to standard output: every file
of the release with its groups and segments (message-ids), par2 files last. A
downloader (NZBGet, SABnzbd) fetches the articles from any provider with it.`,
		Example: `  switchyard usenet nzb 3f2a9c0e4b1d5a6f7e8d9c0b1a2f3e4d > release.nzb`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want one RELEASE id, got %d arguments", len(args))
			}
			if args[0] == "" {
				return usagef("RELEASE is empty: give a release id, as usenet releases shows it")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := usenet.ValidScope(usenetOpts.scope); err != nil {
				return usagef("--usenet-scope: %v", err)
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				st, err := usenetOpts.store(c)
				if err != nil {
					return err
				}
				_, err = st.NZB(ctx, args[0], stdout(cmd))
				if errors.Is(err, usenet.ErrNotFound) {
					return fmt.Errorf("no visible release %q: %w", args[0], usenet.ErrNotFound)
				}
				return err
			})
		},
	}
	usenetOpts.registerScope(nzb)
	natsOpts.registerClient(nzb)
	return nzb
}

// printReleases prints the releases table. A release's name is what a
// poster chose, so it is escaped (terminalSafe).
func printReleases(out io.Writer, rels []usenet.Release) {
	if len(rels) == 0 {
		fmt.Fprintln(out, "no visible releases")
		return
	}
	w := newTable(out)
	fmt.Fprintln(w, "ID\tDATE\tCATEGORY\tSIZE\tFILES\tDONE\tNAME")
	for _, r := range rels {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d%%\t%s\n", r.ID, time.Unix(r.Date, 0).UTC().Format("2006-01-02 15:04"), r.Category, humanBytes(r.Size), r.FileCount(), percentDone(r.Completion()), terminalSafe(r.Name))
	}
	w.Flush()
}

// percentDone is the fraction done (0 to 1) as a whole percent, rounded
// down, so 100% is shown only for a complete release: rounding to nearest
// would show 99.5% (parts missing, not fully downloadable) as 100%. The
// slack keeps a fraction whose float product falls just short of a whole
// percent (29/100 is 28.999...) from losing one.
func percentDone(frac float64) int {
	if frac >= 1 {
		return 100
	}
	return min(99, int(math.Floor(100*frac+1e-9)))
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
