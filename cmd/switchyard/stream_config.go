package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
)

// newStreamConfigCmd builds `stream config SCOPE STREAM [--set KEY=VALUE ...]`.
func newStreamConfigCmd() *cobra.Command {
	var natsOpts natsFlags
	var sets []string
	cmd := &cobra.Command{
		Use:   "config SCOPE STREAM [--set KEY=VALUE ...]",
		Short: "Print a stream's config as JSON, or change it with --set",
		Long: `Without --set, prints the stream's config as one JSON object in its wire form:
the keys below, max_age in milliseconds, -1 for "unlimited".

Each --set KEY=VALUE changes one key (repeat --set for more). The stream applies
the new limits at once, removing the messages they no longer allow, and the
new config is printed. An unknown key or a bad value is a usage error (exit 2)
and changes nothing.

Keys:
` + configKeysHelp(),
		Example: `  switchyard stream config hub log
  switchyard stream config hub log --set max_msgs=1000 --set max_age=24h
  switchyard stream config hub log --set allow_msg_ttl=true   # lets stream pub --ttl work
  switchyard stream config hub log --set discard_policy=new --set desc='audit trail'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScopeStream(args[0], args[1]); err != nil {
				return err
			}
			u, err := parseConfigSets(sets)
			if err != nil {
				return err
			}
			return natsOpts.with(cmd, func(ctx context.Context, c *persist.Client) error {
				// UpdateConfig with nothing set is a read.
				cfg, err := c.Stream(args[0], args[1]).UpdateConfig(ctx, u)
				if err != nil {
					return err
				}
				enc := json.NewEncoder(stdout(cmd))
				enc.SetIndent("", "  ")
				return enc.Encode(cfg)
			})
		},
	}
	// StringArray, not StringSlice: a slice flag splits on commas, which
	// would cut desc=a,b in two.
	cmd.Flags().StringArrayVar(&sets, "set", nil, "change one config key, `KEY=VALUE` (repeat for more; the keys are listed above)")
	natsOpts.registerClient(cmd)
	return cmd
}

// configKey is one key `stream config --set` accepts: a wire name of
// persist.Config and how its VALUE sets the field of an update.
type configKey struct {
	name string
	help string // what VALUE may be
	set  func(u *persist.ConfigUpdate, v string) error
}

// configKeys lists the keys in the order of the wire form; the help text is
// built from it, so the two cannot drift apart.
var configKeys = []configKey{
	limitKey("max_msgs", "messages kept", func(u *persist.ConfigUpdate) **int64 { return &u.MaxMsgs }),
	{"max_age", "age after which a message is removed: a Go duration (90s, 24h) or whole milliseconds; 0 = forever",
		func(u *persist.ConfigUpdate, v string) error {
			d, err := parseMaxAge(v)
			if err != nil {
				return err
			}
			u.MaxAge = &d
			return nil
		}},
	limitKey("max_bytes", "total bytes kept", func(u *persist.ConfigUpdate) **int64 { return &u.MaxBytes }),
	limitKey("max_msg_size", "bytes of one message", func(u *persist.ConfigUpdate) **int64 { return &u.MaxMsgSize }),
	limitKey("max_msgs_per_second", "write rate in messages", func(u *persist.ConfigUpdate) **int64 { return &u.MaxMsgsPerSecond }),
	limitKey("max_bytes_per_second", "write rate in bytes", func(u *persist.ConfigUpdate) **int64 { return &u.MaxBytesPerSecond }),
	{"discard_policy", "when a limit is full: old (remove the oldest messages) or new (refuse the write)",
		func(u *persist.ConfigUpdate, v string) error {
			if v != persist.DiscardOld && v != persist.DiscardNew {
				return fmt.Errorf("want %q or %q", persist.DiscardOld, persist.DiscardNew)
			}
			u.DiscardPolicy = &v
			return nil
		}},
	boolKey("allow_msg_ttl", "accept per-message TTLs (stream pub --ttl)", func(u *persist.ConfigUpdate) **bool { return &u.AllowMsgTTL }),
	boolKey("sync", "SQLite synchronous=FULL for this stream (fsync on every commit)", func(u *persist.ConfigUpdate) **bool { return &u.Sync }),
	{"desc", "free text, at most " + strconv.Itoa(persist.MaxDescBytes) + " bytes of UTF-8",
		func(u *persist.ConfigUpdate, v string) error {
			// The server (and the client before sending) refuses these as
			// too-large and bad-request, which would exit 1: they are bad
			// values, refused here before anything connects.
			if len(v) > persist.MaxDescBytes {
				return fmt.Errorf("%d bytes, over the limit of %d", len(v), persist.MaxDescBytes)
			}
			if !utf8.ValidString(v) {
				return fmt.Errorf("not valid UTF-8")
			}
			u.Desc = &v
			return nil
		}},
}

// limitKey is a count, byte or rate limit: an integer, -1 for unlimited.
func limitKey(name, what string, field func(*persist.ConfigUpdate) **int64) configKey {
	return configKey{name, what + ": an integer, -1 = unlimited", func(u *persist.ConfigUpdate, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return fmt.Errorf("want an integer >= -1 (-1 = unlimited)")
		}
		*field(u) = &n
		return nil
	}}
}

// boolKey is a switch: true or false (also 1/0, t/f as strconv reads them).
func boolKey(name, what string, field func(*persist.ConfigUpdate) **bool) configKey {
	return configKey{name, what + ": true or false", func(u *persist.ConfigUpdate, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*field(u) = &b
		return nil
	}}
}

// parseMaxAge reads max_age as a Go duration or as whole milliseconds (the
// wire unit). It refuses what the wire cannot carry exactly: negative ages,
// fractions of a millisecond and ages beyond a time.Duration.
func parseMaxAge(v string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, fmt.Errorf("%d ms is out of range", ms)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 90s or 24h, or whole milliseconds")
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("not a whole number of milliseconds")
	}
	return d, nil
}

// parseConfigSets turns the --set flags into one update. Every mistake is a
// usage error naming the flag, and a key given twice is refused rather than
// letting the last one win silently.
func parseConfigSets(sets []string) (persist.ConfigUpdate, error) {
	var u persist.ConfigUpdate
	seen := map[string]bool{}
	for _, s := range sets {
		name, value, ok := strings.Cut(s, "=")
		if !ok {
			return persist.ConfigUpdate{}, usagef("--set %q: want KEY=VALUE, for example max_msgs=1000", s)
		}
		k, found := lookupConfigKey(name)
		if !found {
			return persist.ConfigUpdate{}, usagef("--set %q: unknown key %q (keys: %s)", s, name, configKeyNames())
		}
		if seen[name] {
			return persist.ConfigUpdate{}, usagef("--set %q: %s is set twice", s, name)
		}
		seen[name] = true
		if err := k.set(&u, value); err != nil {
			return persist.ConfigUpdate{}, usagef("--set %q: %s: %v", s, name, err)
		}
	}
	return u, nil
}

func lookupConfigKey(name string) (configKey, bool) {
	for _, k := range configKeys {
		if k.name == name {
			return k, true
		}
	}
	return configKey{}, false
}

func configKeyNames() string {
	names := make([]string, len(configKeys))
	for i, k := range configKeys {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// configKeysHelp lists the keys for the command's long help.
func configKeysHelp() string {
	var b strings.Builder
	for _, k := range configKeys {
		fmt.Fprintf(&b, "  %-21s %s\n", k.name, k.help)
	}
	return strings.TrimRight(b.String(), "\n")
}
