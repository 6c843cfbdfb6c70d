package work

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// BenchmarkPrefetch spools 4 ranges of 20,000 articles over 4 connections
// and reports its lines/s next to nntptest.RawOver's on 4 connections of
// the same server (the least a reader can do), and their ratio.
//
// With delay=0 everything shares the machine's CPUs (the NNTP server's
// line generation, NATS, persist's compression and SQLite): the rate is
// the CPU's. A delay before each answer stands for a remote server: the
// rate is then the server's, and shows what the prefetcher's pipelining
// (the next chunk fetched while persist stores the last) keeps of it.
func BenchmarkPrefetch(b *testing.B) {
	for _, d := range []time.Duration{0, 5 * time.Millisecond} {
		b.Run(fmt.Sprintf("delay=%v", d), func(b *testing.B) { benchPrefetch(b, d) })
	}
}

func benchPrefetch(b *testing.B, delay time.Duration) {
	const ranges, size, conns = 4, 20_000, 4
	e := newPFEnv(b, ranges*size, conns)
	e.srv.SetFaults(nntptest.Faults{Delay: delay})
	ctx := context.Background()

	var raw float64
	{
		var wg sync.WaitGroup
		b.ResetTimer()
		start := b.Elapsed()
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				per := int64(ranges * size / conns)
				if _, err := nntptest.RawOver(ctx, e.srv.Addr(), pfGroup, int64(i)*per+1, int64(i+1)*per, ChunkDefault, false); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		raw = ranges * size / (b.Elapsed() - start).Seconds()
	}

	var lines int64
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := uint64(i*ranges + 1)
		e.putRanges(b, id, ranges, size, KindHistory)
		p, err := NewPrefetcher(e.st, e.pool, PrefetchConfig{Ahead: ranges, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ts, err := p.Tick(ctx)
		if err != nil || ts.Spooled != ranges {
			b.Fatalf("tick: %+v, %v", ts, err)
		}
		lines += ts.Articles
		b.StopTimer()
		for j := range ranges {
			if err := e.st.DropSpool(ctx, id+uint64(j)); err != nil {
				b.Fatal(err)
			}
			// Leased, so the next round's Ahead is free again.
			v, err := e.st.Range(ctx, id+uint64(j))
			if err != nil {
				b.Fatal(err)
			}
			v.Val.State = StateLeased
			if _, err := e.st.PutRange(ctx, v.Val, v.Seq); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	rate := float64(lines) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "lines/s")
	b.ReportMetric(raw, "raw-lines/s")
	b.ReportMetric(rate/raw, "x-raw")
}
