package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// nntpGroup is the one group the NNTP benchmark reads.
const nntpGroup = "alt.binaries.bench"

// Defaults of NNTPConfig.
const (
	NNTPLinesDefault  = 200_000
	NNTPChunkDefault  = 20_000
	NNTPRoundsDefault = 3
)

// NNTPConfig shapes the NNTP benchmark: OVER throughput of nntp.Conn
// against a raw line reader (nntptest.RawOver) on the same server.
type NNTPConfig struct {
	// Lines is the overview lines read per run. Zero means
	// NNTPLinesDefault; at least 1000.
	Lines int64
	// Chunk is the articles per OVER command. Zero means NNTPChunkDefault.
	Chunk int64
	// Rounds is the runs per case, raw and ours taking turns; the best of
	// each counts. Zero means NNTPRoundsDefault.
	Rounds int
	// Progress shows each case's rounds, both readers counted (a run's
	// lines are added when it ends). Nil means none.
	Progress Progress
}

func (c *NNTPConfig) withDefaults() {
	if c.Lines == 0 {
		c.Lines = NNTPLinesDefault
	}
	if c.Chunk == 0 {
		c.Chunk = NNTPChunkDefault
	}
	if c.Rounds == 0 {
		c.Rounds = NNTPRoundsDefault
	}
}

func (c *NNTPConfig) validate() error {
	if c.Lines < 1000 || c.Chunk < 1 || c.Rounds < 1 {
		return errors.New("bench nntp: lines must be at least 1000, chunk and rounds positive")
	}
	return nil
}

// RunNNTP starts the NNTP test server with one group of cfg.Lines articles
// and reads its whole overview with the raw reader and with ours, with and
// without COMPRESS DEFLATE, over 1 and 4 connections, writing one line per
// case (the best of cfg.Rounds rounds each, and the ratio ours/raw) on out.
func RunNNTP(ctx context.Context, cfg NNTPConfig, out io.Writer) error {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	lines, chunk, rounds := cfg.Lines, cfg.Chunk, cfg.Rounds
	s := nntptest.New(nntptest.Config{})
	s.AddGroup(nntpGroup, lines)
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
			m := cfg.Progress.start(fmt.Sprintf("compression %s, %d conns", mode, conns), 2*int64(rounds)*lines, "lines")
			var bestRaw, bestOurs float64
			for range rounds {
				raw, err := nntpRaw(ctx, s.Addr(), lines, chunk, conns, deflate)
				if err != nil {
					m.Done()
					return fmt.Errorf("raw reader: %w", err)
				}
				m.Add(lines)
				ours, err := nntpOurs(ctx, s.Addr(), lines, chunk, conns, deflate)
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

// nntpShares splits 1..lines into conns contiguous parts.
func nntpShares(lines int64, conns int) []nntp.Range {
	per := (lines + int64(conns) - 1) / int64(conns)
	var out []nntp.Range
	for lo := int64(1); lo <= lines; lo += per {
		out = append(out, nntp.Range{First: lo, Last: min(lo+per-1, lines)})
	}
	return out
}

// nntpParallel runs fn once per share concurrently and returns lines/s
// over the wall time of all of them.
func nntpParallel(lines int64, conns int, fn func(r nntp.Range) (int64, error)) (float64, error) {
	var wg sync.WaitGroup
	var total atomic.Int64
	errs := make(chan error, conns)
	start := time.Now()
	for _, r := range nntpShares(lines, conns) {
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

func nntpRaw(ctx context.Context, addr string, lines, chunk int64, conns int, deflate bool) (float64, error) {
	return nntpParallel(lines, conns, func(r nntp.Range) (int64, error) {
		return nntptest.RawOver(ctx, addr, nntpGroup, r.First, r.Last, chunk, deflate)
	})
}

func nntpOurs(ctx context.Context, addr string, lines, chunk int64, conns int, deflate bool) (float64, error) {
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
	return nntpParallel(lines, conns, func(share nntp.Range) (int64, error) {
		var n int64
		err := p.Do(ctx, func(c *nntp.Conn) error {
			if _, err := c.Group(ctx, nntpGroup); err != nil {
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
