package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/usenet"
)

// IndexConfig configures RunIndex. Zero fields take the documented
// defaults.
type IndexConfig struct {
	// Articles in the one group read. Zero means 1,000,000.
	Articles int64
	// RangeSize is how many lines one Batch gathers, as a worker does per
	// range. Zero means 20,000 (work.RangeSizeDefault).
	RangeSize int
	// Chunk is the articles per OVER command. Zero means 1,000.
	Chunk int64
}

func (c IndexConfig) withDefaults() IndexConfig {
	if c.Articles == 0 {
		c.Articles = 1_000_000
	}
	if c.RangeSize == 0 {
		c.RangeSize = 20_000
	}
	if c.Chunk == 0 {
		c.Chunk = 1_000
	}
	return c
}

// IndexResult is RunIndex's figures.
type IndexResult struct {
	// Raw is the test server's OVER rate on one connection, lines/s (no
	// parsing, nothing kept): the anchor.
	Raw float64
	// Ours is overview lines/s parsed (usenet.ArticleParser) and assembled
	// into binaries (usenet.Batch) on one goroutine, from memory.
	Ours float64
	// Binaries and Releases are what assembly found per range, summed.
	Binaries, Releases int
	// AllocsPerLine is the heap allocations per line parsed and assembled.
	AllocsPerLine float64
}

// Ratio is Ours/Raw.
func (r IndexResult) Ratio() float64 {
	if r.Raw == 0 {
		return 0
	}
	return r.Ours / r.Raw
}

const indexGroup = "alt.binaries.bench.index"

// RunIndex measures parsing and assembly beside the raw OVER rate of the
// test server in the same run and writes a table to w.
func RunIndex(ctx context.Context, cfg IndexConfig, w io.Writer) (IndexResult, error) {
	cfg = cfg.withDefaults()
	var res IndexResult
	srv := nntptest.New(nntptest.Config{Addr: "127.0.0.1:0"})
	srv.AddGroup(indexGroup, cfg.Articles)
	if err := srv.Start(ctx); err != nil {
		return res, err
	}
	defer srv.Stop(context.WithoutCancel(ctx))

	start := time.Now()
	n, err := nntptest.RawOver(ctx, srv.Addr(), indexGroup, 1, cfg.Articles, cfg.Chunk, false)
	if err != nil {
		return res, fmt.Errorf("raw over: %w", err)
	}
	res.Raw = float64(n) / time.Since(start).Seconds()

	lines, err := overLines(ctx, srv.Addr(), cfg.Articles, cfg.Chunk)
	if err != nil {
		return res, err
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start = time.Now()
	for off := 0; off < len(lines); off += cfg.RangeSize {
		b := usenet.NewBatch()
		var p usenet.ArticleParser // one per range, as the indexer has
		for _, l := range lines[off:min(off+cfg.RangeSize, len(lines))] {
			a, err := p.Parse(l, indexGroup)
			if err != nil {
				continue
			}
			b.Add(a)
		}
		bins := b.Binaries()
		res.Binaries += len(bins)
		rels := map[string]bool{}
		for _, bin := range bins {
			rels[bin.Release] = true
		}
		res.Releases += len(rels)
	}
	el := time.Since(start)
	runtime.ReadMemStats(&m1)
	res.Ours = float64(len(lines)) / el.Seconds()
	res.AllocsPerLine = float64(m1.Mallocs-m0.Mallocs) / float64(len(lines))

	fmt.Fprintf(w, "index: parse + assemble %d overview lines (batches of %d, one goroutine) vs raw OVER of the same server\n", len(lines), cfg.RangeSize)
	fmt.Fprintf(w, "%14s %16s %7s %10s %10s %12s\n", "raw lines/s", "ours lines/s", "ratio", "binaries", "releases", "allocs/line")
	fmt.Fprintf(w, "%14.0f %16.0f %6.2fx %10d %10d %12.1f\n", res.Raw, res.Ours, res.Ratio(), res.Binaries, res.Releases, res.AllocsPerLine)
	fmt.Fprintln(w, "target (not a test): ours >= 3x raw, so that indexing never limits ingest")
	return res, nil
}

// overLines reads the group's overview into memory, one copy per line.
func overLines(ctx context.Context, addr string, n, chunk int64) ([][]byte, error) {
	c, err := nntp.Dial(ctx, nntp.Config{Addr: addr})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Group(ctx, indexGroup); err != nil {
		return nil, err
	}
	lines := make([][]byte, 0, n)
	for first := int64(1); first <= n; first += chunk {
		if err := c.OverLines(ctx, first, min(first+chunk-1, n), func(l []byte) error {
			lines = append(lines, bytes.Clone(l))
			return nil
		}); err != nil {
			return nil, fmt.Errorf("over: %w", err)
		}
	}
	return lines, nil
}
