package main

import (
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// usenetFlags are the flags of the commands that read or write the usenet
// records: where they live, and when an incomplete release shows.
type usenetFlags struct {
	scope      string
	settle     time.Duration
	completion float64
	postGap    time.Duration
	minFiles   int
	minBytes   int64
	// postprocess runs the post-processor; hidePassworded hides what it
	// found passworded from searches and feeds.
	postprocess    bool
	hidePassworded bool
	// baseURL is what the links of the API's feeds start with; "" means
	// the request's own scheme and host.
	baseURL string
}

func (f *usenetFlags) registerBaseURL(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.baseURL, "base-url", "", "`URL` the links in the Newznab API's feeds (the NZB downloads) start with, for apps that reach it through a proxy: http(s)://HOST[:PORT][/PATH] (default: the request's own host)")
}

// validateBaseURL checks --base-url: an absolute http or https URL with a
// host and no query or fragment, which the feeds' links are built on.
func (f *usenetFlags) validateBaseURL() error {
	if f.baseURL == "" {
		return nil
	}
	u, err := url.Parse(f.baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return usagef("--base-url %q: want http(s)://HOST[:PORT][/PATH], with no user, query or fragment", f.baseURL)
	}
	return nil
}

func (f *usenetFlags) registerPostProcess(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.postprocess, "postprocess", true, "read a few bodies of each release (its par2 index, NFO and first RAR volume: at most 3 articles, 2 MiB) for the real names of obfuscated posts, the NFO and the password flag, through a share of --nntp-conns below the coordinator's (--postprocess=false: headers only)")
}

func (f *usenetFlags) registerHidePassworded(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.hidePassworded, "hide-passworded", false, "leave releases post-processing found passworded (an encrypted RAR: password=1) out of the API's searches and feeds")
}

func (f *usenetFlags) registerScope(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.scope, "usenet-scope", usenet.DefaultScope, "the persist `SCOPE` of the usenet binaries and releases")
}

func (f *usenetFlags) registerSettle(cmd *cobra.Command) {
	f.registerScope(cmd)
	cmd.Flags().DurationVar(&f.settle, "settle", 2*time.Hour, "an incomplete release shows once unchanged for this `DURATION`...")
	cmd.Flags().Float64Var(&f.completion, "settle-completion", 0.95, "...if at least this `FRACTION` of its parts is present (complete ones show at once)")
	cmd.Flags().DurationVar(&f.postGap, "post-gap", usenet.PostGapDefault, "a copy of a post posted after a pause longer than this `DURATION` is a repost, a release of its own")
	cmd.Flags().IntVar(&f.minFiles, "min-files", usenet.MinFilesDefault, "a release shows only with at least this `N` files (0 or -1: no minimum)")
	cmd.Flags().Int64Var(&f.minBytes, "min-bytes", usenet.MinBytesDefault, "a release shows only with at least this many `BYTES` (0 or -1: no minimum)")
}

func (f *usenetFlags) store(c *persist.Client) (*usenet.Store, error) {
	st, err := usenet.NewStore(c, f.scope)
	if err != nil {
		return nil, usagef("--usenet-scope: %v", err)
	}
	return st, nil
}

// settleConfig checks the settle flags and returns their config. A
// minimum of 0 (at least nothing) is passed on as -1, usenet's "no
// minimum", since usenet reads 0 as its default.
func (f *usenetFlags) settleConfig() (usenet.SettleConfig, error) {
	cfg := usenet.SettleConfig{Window: f.settle, MinCompletion: f.completion, PostGap: f.postGap, MinFiles: noMinimum(f.minFiles), MinBytes: noMinimum(f.minBytes)}
	if f.postGap <= 0 {
		return cfg, usagef("--post-gap %v: want a positive duration", f.postGap)
	}
	if f.settle <= 0 {
		return cfg, usagef("--settle %v: want a positive duration", f.settle)
	}
	if f.completion <= 0 || f.completion > 1 {
		return cfg, usagef("--settle-completion %v: want a fraction in (0, 1]", f.completion)
	}
	return cfg, nil
}

// noMinimum maps a minimum flag's 0 to -1, usenet's "no minimum".
func noMinimum[T int | int64](n T) T {
	if n == 0 {
		return -1
	}
	return n
}

// validateIndexer checks the flags of indexer name before anything
// connects.
func (f *usenetFlags) validateIndexer(name string) error {
	switch name {
	case "usenet":
		if _, err := f.settleConfig(); err != nil {
			return err
		}
	case "count":
	default:
		return usagef("--indexer %q: want usenet or count", name)
	}
	// Every indexer: fleet validates the scope whatever the indexer, and a
	// bad one there would be a run-time error (exit 1), not a usage error.
	if err := usenet.ValidScope(f.scope); err != nil {
		return usagef("--usenet-scope: %v", err)
	}
	return nil
}
