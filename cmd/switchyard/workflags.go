package main

import (
	"crypto/tls"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/work"
)

// sourceDefault names the work state of a provider when --source is not
// given: one source per provider, so a second provider needs its own.
const sourceDefault = "default"

// sourceFlag adds --source, shared by every work command.
func sourceFlag(cmd *cobra.Command, source *string) {
	cmd.Flags().StringVar(source, "source", sourceDefault, "`NAME` of the work state of this NNTP provider (persist scope work-NAME); one per provider")
}

// providerFlags say how to reach the NNTP provider and what to index: the
// same flags on coordinator run and up.
type providerFlags struct {
	addr     string
	tls      bool
	insecure bool
	user     string
	conns    int
	groups   string
}

func (f *providerFlags) register(cmd *cobra.Command, required bool) {
	what := "NNTP provider `ADDR` (host:port)"
	if !required {
		what += " (default: the demo provider up runs in-process)"
	}
	cmd.Flags().StringVar(&f.addr, "nntp", "", what)
	cmd.Flags().BoolVar(&f.tls, "nntp-tls", false, "TLS from the first byte (usually port 563)")
	cmd.Flags().BoolVar(&f.insecure, "nntp-insecure", false, "do not verify the provider's TLS certificate")
	cmd.Flags().StringVar(&f.user, "nntp-user", "", "AUTHINFO `USER`; the password comes from $SWITCHYARD_NNTP_PASS, never a flag")
	cmd.Flags().IntVar(&f.conns, "nntp-conns", 4, "the provider's connection limit `N`, shared by every process of this source")
	cmd.Flags().StringVar(&f.groups, "groups", "alt.binaries.*", "groups to index: comma-separated `LIST` of names and globs over LIST ACTIVE")
}

// config validates the flags (usage errors) and returns the connection
// config and the group selection.
func (f *providerFlags) config() (nntp.Config, work.Groups, error) {
	if f.addr == "" {
		return nntp.Config{}, work.Groups{}, usagef("--nntp host:port is required")
	}
	if err := checkDialAddr("--nntp", f.addr); err != nil {
		return nntp.Config{}, work.Groups{}, err
	}
	if f.conns < 1 || f.conns > 1000 {
		return nntp.Config{}, work.Groups{}, usagef("--nntp-conns %d: want 1-1000", f.conns)
	}
	groups, err := work.ParseGroups(f.groups)
	if err != nil {
		return nntp.Config{}, work.Groups{}, usageError{err}
	}
	cfg := nntp.Config{Addr: f.addr, User: f.user, Pass: os.Getenv("SWITCHYARD_NNTP_PASS")}
	if f.user != "" && cfg.Pass == "" {
		return nntp.Config{}, work.Groups{}, usagef("--nntp-user %q: set the password in $SWITCHYARD_NNTP_PASS", f.user)
	}
	if f.tls {
		cfg.TLS = &tls.Config{InsecureSkipVerify: f.insecure}
		cfg.ImplicitTLS = true
	}
	return cfg, groups, nil
}

// checkDialAddr checks the host:port a command dials (flag names it in the
// usage error): a host, and a port of 1-65535.
func checkDialAddr(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return usagef("%s %q: want host:port", flag, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return usagef("%s %q: port %q is not 1-65535", flag, addr, port)
	}
	return nil
}

// checkListenAddr checks the host:port a command listens on (flag names it
// in the usage error): a port of 0-65535, 0 for any free one. It returns
// the host, which may be empty (every interface).
func checkListenAddr(flag, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usagef("%s %q: want host:port: %v", flag, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", usagef("%s %q: port %q is not 0-65535", flag, addr, port)
	}
	return host, nil
}

// workFlags tune planning, prefetching and leases.
type workFlags struct {
	rangeSize, depth, chunk int64
	ahead                   int
	leaseTTL, tailEvery     time.Duration
	abandonedEvery          time.Duration
	retainDone              time.Duration
	shareEvery              time.Duration
}

func (f *workFlags) registerPlan(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.rangeSize, "range-size", work.RangeSizeDefault, "articles per range")
	cmd.Flags().Int64Var(&f.depth, "history-depth", work.HistoryDepthDefault, "how many of a new group's newest articles its history covers")
	cmd.Flags().Int64Var(&f.chunk, "chunk", work.ChunkDefault, "articles per OVER command and spool message")
	cmd.Flags().IntVar(&f.ahead, "prefetch-ahead", work.PrefetchAheadDefault, "ranges this shard keeps spooled ahead of the workers")
	cmd.Flags().DurationVar(&f.tailEvery, "tail-every", work.TailEveryDefault, "how often shard 1 plans the groups' new articles")
	cmd.Flags().DurationVar(&f.shareEvery, "share-every", work.ShareEveryDefault, "how often this process renews its share of the connections and takes its new grant (an entry not renewed for 3 rounds is dropped)")
	cmd.Flags().DurationVar(&f.abandonedEvery, "abandoned-every", work.AbandonedEveryDefault, "how often shard 1 finishes ranges whose worker read everything and went quiet")
	cmd.Flags().DurationVar(&f.retainDone, "retain-done", work.RetainDoneDefault, "how long a done range's record is kept after it finished; then shard 1's --abandoned-every round deletes it and keeps its counts in its group's record (work status still counts it)")
}

func (f *workFlags) registerLease(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.leaseTTL, "lease-ttl", work.LeaseTTLDefault, "how long a lease lives without a heartbeat (heartbeats every sixth of it)")
}

// validatePlan checks the flags of registerPlan and registerLease.
func (f *workFlags) validatePlan() error {
	switch {
	case f.rangeSize < 1:
		return usagef("--range-size %d: want at least 1", f.rangeSize)
	case f.depth < 1:
		return usagef("--history-depth %d: want at least 1", f.depth)
	case f.chunk < 1 || f.chunk > 100_000:
		return usagef("--chunk %d: want 1-100000", f.chunk)
	case f.ahead < 1:
		return usagef("--prefetch-ahead %d: want at least 1", f.ahead)
	case f.tailEvery <= 0:
		return usagef("--tail-every %s: want a positive duration", f.tailEvery)
	case f.shareEvery < 10*time.Millisecond:
		return usagef("--share-every %s: want at least 10ms", f.shareEvery)
	case f.abandonedEvery <= 0:
		return usagef("--abandoned-every %s: want a positive duration", f.abandonedEvery)
	case f.retainDone < time.Minute:
		return usagef("--retain-done %s: want at least 1m", f.retainDone)
	}
	return f.validateLease()
}

// validateLease checks the flags of registerLease.
func (f *workFlags) validateLease() error {
	if f.leaseTTL < time.Second {
		return usagef("--lease-ttl %s: want at least 1s", f.leaseTTL)
	}
	return nil
}

// workerConfig is a worker's config from the flags (its Name is set by
// whoever runs it).
func (f *workFlags) workerConfig() work.WorkerConfig {
	return work.WorkerConfig{Lease: work.LeaseConfig{TTL: f.leaseTTL}, Heartbeat: f.heartbeat()}
}

// heartbeat is a sixth of the lease TTL, as the defaults (60 s, 10 s).
func (f *workFlags) heartbeat() time.Duration {
	if f.leaseTTL == 0 {
		return 0
	}
	return f.leaseTTL / 6
}

// checkSource rejects a --source that cannot name a scope.
func checkSource(s string) error {
	if err := work.ValidSource(s); err != nil {
		return usagef("--source: %v", err)
	}
	return nil
}
