package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/internal/progress"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// nntpFlags are the connection flags shared by the nntp subcommands.
type nntpFlags struct {
	server   string
	tls      bool
	starttls bool
	insecure bool
	user     string
	compress string
	timeout  time.Duration
}

func (f *nntpFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "news server host:port (required)")
	cmd.Flags().BoolVar(&f.tls, "tls", false, "TLS from the first byte (usually port 563)")
	cmd.Flags().BoolVar(&f.starttls, "starttls", false, "upgrade a plain connection with STARTTLS")
	cmd.Flags().BoolVar(&f.insecure, "insecure", false, "do not verify the server certificate")
	cmd.Flags().StringVar(&f.user, "user", "", "AUTHINFO user; the password comes from $SWITCHYARD_NNTP_PASS")
	cmd.Flags().StringVar(&f.compress, "compress", "off", "compression: off, auto, deflate or gzip")
	cmd.Flags().DurationVar(&f.timeout, "timeout", nntp.CommandTimeoutDefault, "deadline of one command, its whole answer included (positive)")
}

func (f *nntpFlags) config() (nntp.Config, error) {
	if f.server == "" {
		return nntp.Config{}, usagef("--server host:port is required")
	}
	if err := checkDialAddr("--server", f.server); err != nil {
		return nntp.Config{}, err
	}
	if f.tls && f.starttls {
		return nntp.Config{}, usagef("--tls and --starttls exclude each other")
	}
	if f.timeout <= 0 {
		// nntp.Config reads 0 as its default: a --timeout 0 would have
		// meant a minute, not "none" or "at once".
		return nntp.Config{}, usagef("--timeout must be positive")
	}
	cfg := nntp.Config{Addr: f.server, User: f.user, Pass: os.Getenv("SWITCHYARD_NNTP_PASS"), CommandTimeout: f.timeout}
	if f.tls || f.starttls {
		cfg.TLS = &tls.Config{InsecureSkipVerify: f.insecure}
		cfg.ImplicitTLS = f.tls
	}
	switch f.compress {
	case "off":
		cfg.Compress = nntp.CompressOff
	case "auto":
		cfg.Compress = nntp.CompressAuto
	case "deflate":
		cfg.Compress = nntp.CompressDeflate
	case "gzip":
		cfg.Compress = nntp.CompressGzip
	default:
		return nntp.Config{}, usagef("--compress %q: want off, auto, deflate or gzip", f.compress)
	}
	return cfg, nil
}

func (f *nntpFlags) dial(ctx context.Context) (*nntp.Conn, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	return nntp.Dial(ctx, cfg)
}

// newNNTPCmd builds switchyard nntp and its subcommands.
func newNNTPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nntp",
		Short: "Talk to a news server: list groups, read overview and headers, run a demo server",
		Long: `Operator tools for NNTP providers. Every command dials --server host:port
(plain, --tls for implicit TLS, --starttls), logs in with --user and the
password in $SWITCHYARD_NNTP_PASS, and prints what it read on stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newNNTPGroupsCmd(), newNNTPOverCmd(), newNNTPHeadCmd(), newNNTPServeDemoCmd())
	return cmd
}

func newNNTPGroupsCmd() *cobra.Command {
	var f nntpFlags
	var pattern string
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List the server's groups (LIST ACTIVE): name, low, high, status",
		Long: `Lists newsgroups with their low and high water marks and posting status,
one per line, tab-separated. --pattern narrows the list with a wildmat
such as 'alt.binaries.*'.`,
		Example: `  switchyard nntp groups --server 127.0.0.1:1119 --pattern 'alt.binaries.*'   # a serve-demo's
  switchyard nntp groups --server news.example.com:563 --tls --user me`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			out := cmd.OutOrStdout()
			return c.ListActive(cmd.Context(), pattern, func(g nntp.ActiveGroup) error {
				_, err := fmt.Fprintf(out, "%s\t%d\t%d\t%s\n", terminalSafe(g.Name), g.Low, g.High, terminalSafe(g.Status))
				return err
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&pattern, "pattern", "", "wildmat of groups to list (default all)")
	return cmd
}

// nntpParseRange parses FIRST-LAST, FIRST- or a single number. FIRST- is
// open-ended: open is true and last 0, the end being the group's high mark.
func nntpParseRange(s string) (first, last int64, open bool, err error) {
	a, b, dash := strings.Cut(s, "-")
	first, err = strconv.ParseInt(a, 10, 64)
	if err != nil || first < 1 {
		return 0, 0, false, usagef("range %q: want FIRST-LAST", s)
	}
	switch {
	case !dash:
		return first, first, false, nil
	case b == "":
		return first, 0, true, nil
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, false, usagef("range %q: want FIRST-LAST with FIRST <= LAST", s)
	}
	return first, last, false, nil
}

func newNNTPOverCmd() *cobra.Command {
	var f nntpFlags
	var chunk int64
	var noProgress bool
	cmd := &cobra.Command{
		Use:   "over GROUP [FIRST-LAST]",
		Short: "Print the overview of a range of articles (OVER), streamed",
		Long: `Selects GROUP and prints the overview lines of FIRST-LAST (default: the last
100 articles) as number, subject, from, date, message-id, bytes and lines,
tab-separated. Long ranges are fetched in pipelined chunks of --chunk and
show their progress on stderr (a bar on a terminal, else a line every 5s).`,
		Example: `  switchyard nntp over alt.binaries.demo.1 --server 127.0.0.1:1119
  switchyard nntp over alt.binaries.demo.1 1-50000 --server 127.0.0.1:1119 > over.tsv`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if chunk < 1 {
				return usagef("--chunk must be positive")
			}
			var first, last int64
			var open bool
			if len(args) == 2 {
				var err error
				if first, last, open, err = nntpParseRange(args[1]); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			g, err := c.Group(ctx, args[0])
			if err != nil {
				return err
			}
			switch {
			case len(args) == 1:
				first, last = max(g.Low, g.High-99), g.High
			case open:
				last = g.High
			}
			if last < first || last < 1 {
				return nil
			}
			first = max(first, 1)
			var ranges []nntp.Range
			for lo := first; lo <= last; lo += chunk {
				ranges = append(ranges, nntp.Range{First: lo, Last: min(lo+chunk-1, last)})
			}
			// One chunk is quick: progress only for longer ranges.
			bar := progress.New(cmd.ErrOrStderr(), last-first+1, "lines", progress.Options{
				Label: "over " + args[0], Mode: progressMode(noProgress || last-first+1 <= chunk)})
			defer bar.Done()
			out := cmd.OutOrStdout()
			return c.OverPipelined(ctx, ranges, func(r nntp.Range, ov nntp.Overview) error {
				bar.Set(ov.Number - first + 1)
				// The server's text is escaped (terminalSafe): a tab or a
				// control character in a field would shift the columns or
				// reach the terminal.
				_, err := fmt.Fprintf(out, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", ov.Number, terminalSafe(ov.Subject), terminalSafe(ov.From), terminalSafe(ov.Date), terminalSafe(ov.MessageID), ov.Bytes, ov.Lines)
				return err
			})
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&chunk, "chunk", 20000, "articles per OVER command")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress on stderr")
	return cmd
}

func newNNTPHeadCmd() *cobra.Command {
	var f nntpFlags
	var group string
	cmd := &cobra.Command{
		Use:   "head <MESSAGE-ID>|NUMBER",
		Short: "Print the headers of one article (HEAD)",
		Long: `Prints the headers of an article named by message-id (in angle brackets) or
by number; a number needs --group.`,
		Example: `  switchyard nntp head 42 --group alt.binaries.demo.1 --server 127.0.0.1:1119
  switchyard nntp head '<part1of50.x@example.invalid>' --server news.example.com:119`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if !strings.HasPrefix(id, "<") {
				if _, err := strconv.ParseInt(id, 10, 64); err != nil {
					return usagef("%q: want <message-id> or an article number", id)
				}
				if group == "" {
					return usagef("an article number needs --group")
				}
			}
			ctx := cmd.Context()
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if group != "" {
				if _, err := c.Group(ctx, group); err != nil {
					return err
				}
			}
			h, err := c.Head(ctx, id)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, fl := range h.Fields {
				fmt.Fprintf(out, "%s: %s\n", terminalSafe(fl.Name), terminalSafe(fl.Value))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&group, "group", "", "group to select first (needed for a number)")
	return cmd
}

func newNNTPServeDemoCmd() *cobra.Command {
	var addr string
	var groups int
	var articles, growBy int64
	var growEvery time.Duration
	var user string
	var maxConns int
	cmd := &cobra.Command{
		Use:   "serve-demo",
		Short: "Run the built-in test news server as a demo provider with growing groups",
		Long: `Starts the NNTP test server (generated binary posts with realistic subjects,
posters, dates and sizes; OVER, HEAD, BODY, POST, COMPRESS DEFLATE,
XFEATURE COMPRESS GZIP) on --addr, prints its address on stdout and serves
until interrupted. Every group gains --grow-by articles each --grow-every.
With --user, AUTHINFO is required and the password is $SWITCHYARD_NNTP_PASS.`,
		Example: `  switchyard nntp serve-demo
  switchyard nntp serve-demo --addr 127.0.0.1:0 --groups 2 --articles 10000 --grow-every 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if groups < 1 || articles < 0 || growBy < 0 || growEvery < 0 || maxConns < 0 {
				return usagef("--groups must be positive; --articles, --grow-by, --grow-every and --max-conns not negative")
			}
			cfg := nntptest.Config{Addr: addr, GrowEvery: growEvery, GrowBy: growBy, MaxConns: maxConns}
			if user != "" {
				cfg.Users = map[string]string{user: os.Getenv("SWITCHYARD_NNTP_PASS")}
			}
			s := nntptest.New(cfg)
			for i := 1; i <= groups; i++ {
				s.AddGroup(fmt.Sprintf("alt.binaries.demo.%d", i), articles)
			}
			if err := s.Start(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Addr())
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
			defer cancel()
			return s.Stop(ctx)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:1119", "listen address (port 0 picks a free one)")
	cmd.Flags().IntVar(&groups, "groups", 3, "number of groups alt.binaries.demo.N")
	cmd.Flags().Int64Var(&articles, "articles", 100000, "articles per group at start")
	cmd.Flags().DurationVar(&growEvery, "grow-every", time.Second, "how often groups grow (0: never)")
	cmd.Flags().Int64Var(&growBy, "grow-by", 50, "articles added to each group per growth")
	cmd.Flags().StringVar(&user, "user", "", "require AUTHINFO with this user")
	cmd.Flags().IntVar(&maxConns, "max-conns", 0, "refuse connections beyond this many with 502 (0: no limit)")
	return cmd
}
