package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
)

// newKVCmd builds switchyard kv and its subcommands.
func newKVCmd() *cobra.Command {
	kv := &cobra.Command{
		Use:   "kv",
		Short: "Read and write key-value data in a persist stream",
		Long: `Key-value commands over a persist stream: every write is keyed, so the stream
holds the current value of each key. They talk to a running ` + "`switchyard up`" + `, or to
--nats URL / $SWITCHYARD_NATS_URL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	kv.AddCommand(newKVSetCmd(), newKVGetCmd(), newKVDelCmd(), newKVKeysCmd())
	return kv
}

// newKVSetCmd builds switchyard kv set.
func newKVSetCmd() *cobra.Command {
	var natsOpts natsFlags
	var prev int64
	var ttl time.Duration
	set := &cobra.Command{
		Use:   "set SCOPE STREAM KEY VALUE",
		Short: "Store VALUE under KEY (VALUE '-' reads stdin); prints the new seq",
		Example: `  switchyard kv set hub settings theme dark
  switchyard kv set hub settings theme light --prev-seq 3   # only if theme is still at seq 3
  switchyard kv set hub sessions s-42 alice --ttl 30m        # gone after 30 minutes (the stream must allow_msg_ttl)`,
		Args: cobra.ExactArgs(4),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStreamKey(args[0], args[1], args[2]); err != nil {
				return err
			}
			value, err := valueArg(cmd, args[3])
			if err != nil {
				return err
			}
			if ttl < 0 {
				return usagef("--ttl must not be negative")
			}
			opts := persist.SetOptions{TTL: ttl}
			if cmd.Flags().Changed("prev-seq") {
				if prev < 0 {
					return usagef("--prev-seq must be >= 0 (0 = the key must not exist)")
				}
				p := uint64(prev)
				opts.PrevSeq = &p
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				res, err := c.KV(args[0], args[1]).Set(ctx, args[2], value, opts)
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout(cmd), res.Seq)
				return nil
			})
		},
	}
	set.Flags().Int64Var(&prev, "prev-seq", 0, "compare-and-set: write only if the key's current seq is this (0 = key must not exist)")
	set.Flags().DurationVar(&ttl, "ttl", 0, "expire the value after this long (the stream must allow_msg_ttl: switchyard stream config SCOPE STREAM --set allow_msg_ttl=true)")
	natsOpts.registerClient(set)
	return set
}

// newKVGetCmd builds switchyard kv get.
func newKVGetCmd() *cobra.Command {
	var natsOpts natsFlags
	var raw bool
	get := &cobra.Command{
		Use:   "get SCOPE STREAM KEY",
		Short: "Print the value of KEY, alone (exit 3 if there is no such key)",
		Long: `Prints the value of KEY followed by a newline. With --raw it prints exactly the
stored bytes and nothing else, so binary values round-trip:
  switchyard kv set hub blobs logo - < logo.png
  switchyard kv get hub blobs logo --raw > copy.png
A key that does not exist exits 3.`,
		Example: `  switchyard kv get hub demo greeting
  switchyard kv get hub blobs logo --raw > copy.png`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStreamKey(args[0], args[1], args[2]); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				m, err := c.KV(args[0], args[1]).Get(ctx, args[2])
				if err != nil {
					return err
				}
				return writeValue(stdout(cmd), m.Value, raw)
			})
		},
	}
	get.Flags().BoolVar(&raw, "raw", false, "print exactly the stored bytes, with no newline added")
	natsOpts.registerClient(get)
	return get
}

// newKVDelCmd builds switchyard kv del.
func newKVDelCmd() *cobra.Command {
	var natsOpts natsFlags
	del := &cobra.Command{
		Use:     "del SCOPE STREAM KEY",
		Short:   "Delete KEY (succeeds quietly if it does not exist)",
		Example: `  switchyard kv del hub demo greeting`,
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStreamKey(args[0], args[1], args[2]); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				_, err := c.KV(args[0], args[1]).Delete(ctx, args[2])
				return err
			})
		},
	}
	natsOpts.registerClient(del)
	return del
}

// newKVKeysCmd builds switchyard kv keys.
func newKVKeysCmd() *cobra.Command {
	var natsOpts natsFlags
	var asJSON bool
	keys := &cobra.Command{
		Use:     "keys SCOPE STREAM",
		Short:   "List the keys of a stream, one per line",
		Example: `  switchyard kv keys hub demo`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				ks, err := c.KV(args[0], args[1]).Keys(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(stdout(cmd)).Encode(ks)
				}
				for _, k := range ks {
					fmt.Fprintln(stdout(cmd), escapeLine(k))
				}
				return nil
			})
		},
	}
	keys.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	natsOpts.registerClient(keys)
	return keys
}

// writeValue prints a value for get: exactly its bytes with raw, else
// followed by a newline, as a terminal user expects.
func writeValue(w io.Writer, v []byte, raw bool) error {
	if _, err := w.Write(v); err != nil {
		return fmt.Errorf("write value: %w", err)
	}
	if raw {
		return nil
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write value: %w", err)
	}
	return nil
}

// escapeLine quotes control characters so one key or value prints as one line.
func escapeLine(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
