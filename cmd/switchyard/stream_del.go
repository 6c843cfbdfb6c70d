package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
)

// newStreamDelCmd builds `stream del SCOPE STREAM (SEQ... | --up-to SEQ | --all)`.
func newStreamDelCmd() *cobra.Command {
	var natsOpts natsFlags
	var upTo uint64
	var all bool
	cmd := &cobra.Command{
		Use:   "del SCOPE STREAM (SEQ... | --up-to SEQ | --all)",
		Short: "Delete messages by seq, up to a seq, or all; prints the seqs removed",
		Long: `Deletes the messages given by exactly one selector: one or more SEQ arguments,
--up-to SEQ (every message with a seq <= SEQ) or --all. Prints the seqs it
removed, one per line; seqs that did not exist are skipped without an error, so
the output may be shorter than the request, or empty. Each removal is a delete
on the stream's change feed. Seqs are never reused: the next message still gets
the next seq.`,
		Example: `  switchyard stream del hub log 3 7
  switchyard stream del hub log --up-to 1000 | wc -l   # how many were removed
  switchyard stream del hub log --all`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			d, err := parseDeleteSelector(args[2:], upTo, cmd.Flags().Changed("up-to"), all)
			if err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				seqs, err := c.Stream(args[0], args[1]).Delete(ctx, d)
				if err != nil {
					return err
				}
				w := stdout(cmd)
				for _, q := range seqs {
					if _, err := fmt.Fprintln(w, q); err != nil {
						return fmt.Errorf("write output: %w", err)
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().Uint64Var(&upTo, "up-to", 0, "delete every message with a seq <= `SEQ`")
	cmd.Flags().BoolVar(&all, "all", false, "delete every message")
	natsOpts.registerClient(cmd)
	return cmd
}

// parseDeleteSelector builds the delete from the SEQ arguments and flags.
// Exactly one selector is allowed: the server would refuse a mix anyway, but
// as a usage error the caller learns before anything is sent.
func parseDeleteSelector(seqArgs []string, upTo uint64, upToSet, all bool) (persist.Delete, error) {
	n := 0
	for _, set := range []bool{len(seqArgs) > 0, upToSet, all} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return persist.Delete{}, usagef("say what to delete: SEQ arguments, --up-to SEQ or --all")
	case n > 1:
		return persist.Delete{}, usagef("give only one of SEQ arguments, --up-to SEQ and --all")
	case all:
		return persist.Delete{All: true}, nil
	case upToSet:
		if upTo == 0 {
			return persist.Delete{}, usagef("--up-to 0: seqs start at 1, so it would delete nothing")
		}
		return persist.Delete{UpTo: upTo}, nil
	}
	// The server takes at most persist.MaxBatch seqs in one request.
	if len(seqArgs) > persist.MaxBatch {
		return persist.Delete{}, usagef("%d seqs: at most %d in one del (use --up-to for a range)", len(seqArgs), persist.MaxBatch)
	}
	seqs := make([]uint64, len(seqArgs))
	for i, a := range seqArgs {
		q, err := strconv.ParseUint(a, 10, 64)
		if err != nil || q == 0 {
			return persist.Delete{}, usagef("SEQ %q: want a positive integer", a)
		}
		seqs[i] = q
	}
	return persist.Delete{Seqs: seqs}, nil
}
