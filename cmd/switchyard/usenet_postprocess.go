package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// newUsenetPostprocessCmd builds switchyard usenet postprocess.
func newUsenetPostprocessCmd() *cobra.Command {
	var natsOpts natsFlags
	var usenetOpts usenetFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "postprocess",
		Short: "Sum up what post-processing read: releases by status, articles and bytes fetched, findings, failures by kind",
		Long: `Reads the post-processing records of --usenet-scope (one per release the
post-processor is done with) and prints: the releases by status (done,
nothing: no file worth reading, failed: every body failed), the articles and
bytes it fetched, how many releases got real names, were found passworded
(password 1) or maybe passworded (2), or had an NFO, the failed bodies by kind
(fetch, decode, par2, rar, nfo), and the visible releases not processed yet.
It reads every record: for an operator, not a monitor (/metrics has the
running totals). --json for scripts.`,
		Example: `  switchyard usenet postprocess
  switchyard usenet postprocess --json | jq .failures`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := usenet.ValidScope(usenetOpts.scope); err != nil {
				return usagef("--usenet-scope: %v", err)
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				st, err := usenetOpts.store(c)
				if err != nil {
					return err
				}
				sum, err := st.PostSummary(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(stdout(cmd))
					enc.SetIndent("", "  ")
					return enc.Encode(sum)
				}
				printPostSummary(stdout(cmd), sum)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as one JSON object")
	usenetOpts.registerScope(cmd)
	natsOpts.registerClient(cmd)
	return cmd
}

func printPostSummary(out io.Writer, s usenet.PostSummary) {
	w := newTable(out)
	var total int64
	for _, n := range s.Releases {
		total += n
	}
	fmt.Fprintf(w, "releases processed\t%d\t(done %d, nothing to read %d, failed %d)\n", total, s.Releases[usenet.PostDone], s.Releases[usenet.PostNothing], s.Releases[usenet.PostFailed])
	fmt.Fprintf(w, "not processed yet\t%d\n", s.Pending)
	fmt.Fprintf(w, "articles fetched\t%d\t(%d bytes)\n", s.Articles, s.Bytes)
	fmt.Fprintf(w, "renamed\t%d\n", s.Renamed)
	fmt.Fprintf(w, "passworded\t%d\t(maybe: %d)\n", s.Passworded, s.Maybe)
	fmt.Fprintf(w, "with an NFO\t%d\n", s.NFOs)
	kinds := make([]string, 0, len(s.Failures))
	for k := range s.Failures {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "failed bodies: %s\t%d\n", k, s.Failures[k])
	}
	w.Flush()
}
