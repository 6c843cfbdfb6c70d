package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
)

// newStreamCmd builds switchyard stream and its subcommands.
func newStreamCmd() *cobra.Command {
	stream := &cobra.Command{
		Use:   "stream",
		Short: "Publish to, read, delete from and configure a persist stream",
		Long: `Stream commands: a stream is an append-only sequence of messages numbered by seq,
with limits (stream config) that remove old messages or refuse new ones.
They talk to a running ` + "`switchyard up`" + `, or to --nats URL / $SWITCHYARD_NATS_URL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	stream.AddCommand(newStreamPubCmd(), newStreamGetCmd(), newStreamLsCmd(), newStreamConfigCmd(), newStreamDelCmd())
	return stream
}

// newStreamPubCmd builds switchyard stream pub.
func newStreamPubCmd() *cobra.Command {
	var natsOpts natsFlags
	var msgID, key string
	var ttl time.Duration
	pub := &cobra.Command{
		Use:   "pub SCOPE STREAM VALUE",
		Short: "Append VALUE (VALUE '-' reads stdin); prints the new seq",
		Example: `  switchyard stream pub hub log 'hello'
  echo hi | switchyard stream pub hub log - --msg-id retry-safe-1`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			// Given but empty is refused, as the server refuses an empty
			// Sy-Key or Sy-Msg-Id: it is a script's unset variable
			// (--key "$K"), and sent as no key the value would be written
			// unkeyed beside the key's row, or without de-duplication.
			for _, name := range []string{"key", "msg-id"} {
				if f := cmd.Flags().Lookup(name); f.Changed && f.Value.String() == "" {
					return usagef("--%s is empty: give a value, or leave the flag out", name)
				}
			}
			if err := persist.ValidKey(key); err != nil {
				return usagef("--key %q: %v", key, err)
			}
			if ttl < 0 {
				return usagef("--ttl must not be negative")
			}
			value, err := valueArg(cmd, args[2])
			if err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				res, err := c.Stream(args[0], args[1]).Set(ctx, value, persist.SetOptions{MsgID: msgID, Key: key, TTL: ttl})
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout(cmd), res.Seq)
				if res.Dup {
					// stdout stays the seq alone, for scripts.
					fmt.Fprintf(cmd.ErrOrStderr(), "duplicate: --msg-id %s was written within the last 2 minutes; nothing was written now, and %d is that write's seq\n", msgID, res.Seq)
				}
				return nil
			})
		},
	}
	pub.Flags().StringVar(&msgID, "msg-id", "", "de-duplication id: a repeat within 2 minutes writes nothing")
	pub.Flags().StringVar(&key, "key", "", "key: replaces the older message with this key")
	pub.Flags().DurationVar(&ttl, "ttl", 0, "expire the message after this long (the stream must allow_msg_ttl)")
	natsOpts.registerClient(pub)
	return pub
}

// newStreamGetCmd builds switchyard stream get.
func newStreamGetCmd() *cobra.Command {
	var natsOpts natsFlags
	var raw bool
	get := &cobra.Command{
		Use:   "get SCOPE STREAM SEQ",
		Short: "Print the value of message SEQ, alone (exit 3 if there is no such message)",
		Long: `Prints the value of message SEQ followed by a newline. With --raw it prints
exactly the stored bytes and nothing else, so binary values round-trip
(switchyard stream pub SCOPE STREAM - reads a value from stdin). A message that
does not exist (never written, deleted or expired) exits 3.`,
		Example: `  switchyard stream get hub log 1
  switchyard stream get hub blobs 7 --raw > value.bin`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			seq, err := strconv.ParseUint(args[2], 10, 64)
			if err != nil || seq == 0 {
				return usagef("SEQ %q: want a positive integer", args[2])
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				m, err := c.Stream(args[0], args[1]).Get(ctx, seq)
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

// newStreamLsCmd builds switchyard stream ls.
func newStreamLsCmd() *cobra.Command {
	var natsOpts natsFlags
	var from, to uint64
	var limit int
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls SCOPE STREAM",
		Short: "List messages: seq, time, key and value (one line each)",
		Example: `  switchyard stream ls hub log
  switchyard stream ls hub log --from 100 --limit 20 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit must be >= 0")
			}
			if to != 0 && from > to {
				return usagef("--from %d is after --to %d", from, to)
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				w := stdout(cmd)
				enc := json.NewEncoder(w)
				_, err := c.Stream(args[0], args[1]).Scan(ctx, persist.Range{Start: from, End: to, Limit: limit}, func(m *persist.Message) error {
					if asJSON {
						l := lsLine{Seq: m.Seq, Time: m.Time, Key: m.Key, Headers: m.Headers, TTL: m.TTL.Milliseconds()}
						l.Value, l.Enc = jsonValue(m.Value)
						return enc.Encode(l)
					}
					_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", m.Seq, time.UnixMilli(m.Time).UTC().Format(time.RFC3339Nano), escapeLine(m.Key), preview(m.Value))
					return err
				})
				return err
			})
		},
	}
	ls.Flags().Uint64Var(&from, "from", 0, "first seq (default: the first)")
	ls.Flags().Uint64Var(&to, "to", 0, "last seq, inclusive (default: the last)")
	ls.Flags().IntVar(&limit, "limit", 0, "at most this many messages (0 = all)")
	ls.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line (a value that is not UTF-8 in hex, with \"enc\":\"hex\")")
	natsOpts.registerClient(ls)
	return ls
}

type lsLine struct {
	Seq     uint64            `json:"seq"`
	Time    int64             `json:"time"`
	Key     string            `json:"key,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	TTL     int64             `json:"ttl,omitempty"` // milliseconds, as the wire and stream config print durations
	Value   string            `json:"value"`
	Enc     string            `json:"enc,omitempty"`
}

// jsonValue is a message value for --json output: the text itself when it
// is valid UTF-8 (enc ""), else its bytes in hex with enc "hex", since a
// JSON string cannot hold them without loss.
func jsonValue(v []byte) (value, enc string) {
	if utf8.Valid(v) {
		return string(v), ""
	}
	return hex.EncodeToString(v), "hex"
}

// preview shows a value on one line: text escaped, binary as its size, long
// values cut.
func preview(v []byte) string {
	const max = 120
	if !utf8.Valid(v) {
		return fmt.Sprintf("<%d bytes binary>", len(v))
	}
	s := escapeLine(string(v))
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut-- // never split a rune
		}
		return s[:cut] + fmt.Sprintf("… (%d bytes)", len(v))
	}
	return s
}
