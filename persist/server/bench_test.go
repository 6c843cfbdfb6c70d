package server

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// BenchmarkSetVsKVPut measures persist set against JetStream KV put on the
// same embedded NATS in the same run (128-byte values, 1 and 16 concurrent
// clients, each client its own connection) and reports both rates and their
// ratio. The anchor is JetStream; the ratio is what matters, not ops/s.
func BenchmarkSetVsKVPut(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			e := testnats.Server(b, testnats.Options{JetStream: true})
			srv, err := New(Config{Conn: testnats.Conn(b, e), ID: "0", IDs: []string{"0"}, DataDir: b.TempDir(), Sync: os.Getenv("BENCH_SYNC") != ""})
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer srv.Stop(context.Background())
			conns := make([]*nats.Conn, clients)
			kvs := make([]jetstream.KeyValue, clients)
			for i := range conns {
				conns[i] = testnats.Conn(b, e)
				js, err := jetstream.New(conns[i])
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					if _, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "bench"}); err != nil {
						b.Fatal(err)
					}
				}
				if kvs[i], err = js.KeyValue(context.Background(), "bench"); err != nil {
					b.Fatal(err)
				}
			}
			value := make([]byte, 128)
			run := func(op func(c, i int) error) float64 {
				per := max(b.N/clients, 1)
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for c := range clients {
					wg.Go(func() {
						for i := range per {
							if err := op(c, i); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				return float64(per*clients) / time.Since(start).Seconds()
			}
			b.ResetTimer()
			persistRate := run(func(c, i int) error {
				m := nats.NewMsg(bus.APISubject(bus.DefaultService, "hub", "0"))
				m.Header.Set(persist.HdrCmd, persist.CmdSet)
				m.Header.Set(persist.HdrStream, "bench")
				m.Header.Set(persist.HdrKey, fmt.Sprintf("k%d-%d", c, i%1000))
				m.Data = value
				r, err := conns[c].RequestMsg(m, 10*time.Second)
				if err == nil && r.Header.Get(persist.HdrError) != "" {
					err = fmt.Errorf("%s: %s", r.Header.Get(persist.HdrError), r.Data)
				}
				return err
			})
			kvRate := run(func(c, i int) error {
				_, err := kvs[c].Put(context.Background(), fmt.Sprintf("k%d-%d", c, i%1000), value)
				return err
			})
			b.ReportMetric(persistRate, "set/s")
			b.ReportMetric(kvRate, "kvput/s")
			b.ReportMetric(persistRate/kvRate, "ratio")
			b.ReportMetric(float64(srv.commits.Load()), "commits")
		})
	}
}
