package nntp

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// The OVER benchmarks read the same 20,000-line range through our client
// and through nntptest.RawOver (read lines until the dot, nothing else) from
// the same server; compare their lines/s.
const benchLines = 20000

func benchServer(b *testing.B) *nntptest.Server {
	s := nntptest.Start(b)
	s.AddGroup(testGroup, benchLines)
	return s
}

func BenchmarkOver(b *testing.B) {
	s := benchServer(b)
	for _, comp := range []Compression{CompressOff, CompressDeflate, CompressGzip} {
		b.Run(comp.String(), func(b *testing.B) {
			ctx := context.Background()
			c, err := Dial(ctx, Config{Addr: s.Addr(), Compress: comp})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Group(ctx, testGroup); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var n int64
			for b.Loop() {
				if err := c.Over(ctx, 1, benchLines, func(Overview) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

func BenchmarkOverRaw(b *testing.B) {
	s := benchServer(b)
	for _, deflate := range []bool{false, true} {
		b.Run(fmt.Sprintf("deflate=%v", deflate), func(b *testing.B) {
			var n int64
			for b.Loop() {
				got, err := nntptest.RawOver(context.Background(), s.Addr(), testGroup, 1, benchLines, benchLines, deflate)
				if err != nil {
					b.Fatal(err)
				}
				n += got
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
