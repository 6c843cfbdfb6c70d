package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

const benchNNTPGroup = "alt.binaries.bench"

// newBenchNNTPCmd builds switchyard bench nntp.
func newBenchNNTPCmd() *cobra.Command {
	var lines, chunk int64
	var rounds int
	cmd := &cobra.Command{
		Use:   "nntp",
		Short: "OVER throughput of nntp.Conn vs a raw line reader on the same server",
		Long: `Starts the NNTP test server on loopback with one group of --lines articles and
reads its whole overview, in OVER commands of --chunk articles, two ways:
  raw   the anchor: read lines until the terminating dot, no parsing, no
        unstuffing (nntptest.RawOver), one OVER at a time
  ours  nntp.Pool + Conn.OverPipelined, every line parsed into an Overview
with compression off and COMPRESS DEFLATE, over 1 and 4 connections (the
range split between them). Each case runs --rounds times, alternating raw
and ours; the best round of each is printed with the ratio ours/raw in
lines/s. Target (not a test): ours >= 0.9x raw.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 1000 || chunk < 1 || rounds < 1 {
				return usagef("--lines must be at least 1000, --chunk and --rounds positive")
			}
			return runBenchNNTP(cmd.Context(), cmd.OutOrStdout(), benchProgress(cmd), lines, chunk, rounds)
		},
	}
	cmd.Flags().Int64Var(&lines, "lines", 200_000, "overview lines read per run")
	cmd.Flags().Int64Var(&chunk, "chunk", 20_000, "articles per OVER command")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "runs per case (best one counts)")
	return cmd
}

// runBenchNNTP writes the table on out; p shows each case's rounds, both
// readers counted (a run's lines are added when it ends).
func runBenchNNTP(ctx context.Context, out io.Writer, p bench.Progress, lines, chunk int64, rounds int) error {
	s := nntptest.New(nntptest.Config{})
	s.AddGroup(benchNNTPGroup, lines)
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer s.Stop(context.WithoutCancel(ctx))

	fmt.Fprintf(out, "OVER of %d lines in chunks of %d from nntptest on %s, best of %d\n", lines, chunk, s.Addr(), rounds)
	fmt.Fprintf(out, "%-12s %5s %14s %14s %7s\n", "compression", "conns", "raw lines/s", "ours lines/s", "ratio")
	for _, deflate := range []bool{false, true} {
		for _, conns := range []int{1, 4} {
			mode := "off"
			if deflate {
				mode = "deflate"
			}
			m := p(fmt.Sprintf("compression %s, %d conns", mode, conns), 2*int64(rounds)*lines, "lines")
			var bestRaw, bestOurs float64
			for range rounds {
				raw, err := benchNNTPRaw(ctx, s.Addr(), lines, chunk, conns, deflate)
				if err != nil {
					m.Done()
					return fmt.Errorf("raw reader: %w", err)
				}
				m.Add(lines)
				ours, err := benchNNTPOurs(ctx, s.Addr(), lines, chunk, conns, deflate)
				if err != nil {
					m.Done()
					return fmt.Errorf("nntp client: %w", err)
				}
				m.Add(lines)
				bestRaw, bestOurs = max(bestRaw, raw), max(bestOurs, ours)
			}
			m.Done()
			fmt.Fprintf(out, "%-12s %5d %14.0f %14.0f %6.2fx\n", mode, conns, bestRaw, bestOurs, bestOurs/bestRaw)
		}
	}
	return nil
}

// benchShares splits 1..lines into conns contiguous parts.
func benchShares(lines int64, conns int) []nntp.Range {
	per := (lines + int64(conns) - 1) / int64(conns)
	var out []nntp.Range
	for lo := int64(1); lo <= lines; lo += per {
		out = append(out, nntp.Range{First: lo, Last: min(lo+per-1, lines)})
	}
	return out
}

// benchParallel runs fn once per share concurrently and returns lines/s
// over the wall time of all of them.
func benchParallel(lines int64, conns int, fn func(r nntp.Range) (int64, error)) (float64, error) {
	var wg sync.WaitGroup
	var total atomic.Int64
	errs := make(chan error, conns)
	start := time.Now()
	for _, r := range benchShares(lines, conns) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := fn(r)
			total.Add(n)
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if got := total.Load(); got != lines {
		return 0, fmt.Errorf("read %d lines, want %d", got, lines)
	}
	return float64(lines) / elapsed.Seconds(), nil
}

func benchNNTPRaw(ctx context.Context, addr string, lines, chunk int64, conns int, deflate bool) (float64, error) {
	return benchParallel(lines, conns, func(r nntp.Range) (int64, error) {
		return nntptest.RawOver(ctx, addr, benchNNTPGroup, r.First, r.Last, chunk, deflate)
	})
}

func benchNNTPOurs(ctx context.Context, addr string, lines, chunk int64, conns int, deflate bool) (float64, error) {
	comp := nntp.CompressOff
	if deflate {
		comp = nntp.CompressDeflate
	}
	// Connections are dialled inside the timed region, as the raw reader's.
	p, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: addr, Compress: comp}, Size: conns})
	if err != nil {
		return 0, err
	}
	defer p.Stop(context.WithoutCancel(ctx))
	return benchParallel(lines, conns, func(share nntp.Range) (int64, error) {
		var n int64
		err := p.Do(ctx, func(c *nntp.Conn) error {
			if _, err := c.Group(ctx, benchNNTPGroup); err != nil {
				return err
			}
			var ranges []nntp.Range
			for lo := share.First; lo <= share.Last; lo += chunk {
				ranges = append(ranges, nntp.Range{First: lo, Last: min(lo+chunk-1, share.Last)})
			}
			return c.OverPipelined(ctx, ranges, func(_ nntp.Range, ov nntp.Overview) error {
				n++
				return nil
			})
		})
		return n, err
	})
}
