package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// Spread writes: spreadStreams streams (one per scope, 3 keys each, as a
// small account's) behind an open-stream cap of spreadMaxOpen, a tenth of
// them, written by spreadClients clients.
const spreadStreams, spreadMaxOpen, spreadClients = 2000, 200, 16

// BenchmarkSpreadWrites measures keyed sets of 16 clients, each on its own
// connection and persist client, to random streams among ten times the
// open-stream cap: most sets find their stream closed, so they open it and
// evict another. The anchor, in the same run and on the same server, is the
// same clients writing to random streams among half the cap, which all stay
// open ("hot"); the ratio spread/hot is what to compare between builds.
//
// layout=packs keeps the streams in 4 packs (Config.Packs) behind the same
// cap: an open there is a lookup on the pack's connection.
func BenchmarkSpreadWrites(b *testing.B) {
	for _, l := range []struct {
		name      string
		exclusive bool
		packs     int
	}{{"locking=normal", false, 0}, {"locking=exclusive", true, 0}, {"layout=packs", false, 4}} {
		b.Run(l.name, func(b *testing.B) { benchSpreadWrites(b, l.exclusive, l.packs) })
	}
}

// benchSpreadWrites is BenchmarkSpreadWrites on a server with
// ExclusiveFiles or not, and packs or not.
func benchSpreadWrites(b *testing.B, exclusive bool, packs int) {
	e := testnats.Server(b, testnats.Options{})
	srvConn := testnats.Conn(b, e)
	dir := b.TempDir()
	srv, err := New(Config{Conn: srvConn, ID: "0", IDs: []string{"0"}, DataDir: dir, MaxOpenStreams: spreadMaxOpen, ExclusiveFiles: exclusive, Packs: packs})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Stop(context.Background()) })
	// The balancer's part, for one server: every scope is "0"'s.
	owner, err := srvConn.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = owner.Unsubscribe() })
	kvs := make([][]*persist.KV, spreadClients) // per client, per stream
	for c := range kvs {
		pc, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(b, e), IDs: []string{"0"}, Timeout: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pc.Close() })
		kvs[c] = make([]*persist.KV, spreadStreams)
		for i := range kvs[c] {
			kvs[c][i] = pc.KV(fmt.Sprintf("a%d", i), "kv")
		}
	}
	value := make([]byte, 64)
	// run has every client make per sets to random streams among the
	// first n (or, with each, to every stream once per key) and returns
	// the sets per second.
	run := func(b *testing.B, per, n int, each bool) float64 {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, spreadClients)
		for c := range spreadClients {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(c), uint64(n)))
				for i := range per {
					s, k := r.IntN(n), r.IntN(3)
					if each {
						s, k = (c+i*spreadClients)%n, (c+i*spreadClients)/n
					}
					if _, err := kvs[c][s].Set(context.Background(), fmt.Sprintf("k%d", k), value, persist.SetOptions{}); err != nil {
						errs <- fmt.Errorf("stream a%d: %w", s, err)
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
		return float64(per*spreadClients) / time.Since(start).Seconds()
	}
	create := run(b, spreadStreams*3/spreadClients, spreadStreams, true)
	b.Run(fmt.Sprintf("streams=%d/open=%d", spreadStreams, spreadMaxOpen), func(b *testing.B) {
		per := max(b.N/spreadClients, 1)
		hot := run(b, per, spreadMaxOpen/2, false)
		spread := run(b, per, spreadStreams, false)
		b.ReportMetric(spread, "spread-set/s")
		b.ReportMetric(hot, "hot-set/s")
		b.ReportMetric(spread/hot, "ratio")
		b.ReportMetric(create, "create-set/s")
		// The disk the streams take once written this way, as du
		// counts it (the 8 MiB disk reserve left out), per stream:
		// right after the load, and once the closer compacted what it
		// closed quickly.
		b.StopTimer()
		disk := func() float64 { return float64(duKiB(b, dir)-store.ReserveBytesDefault/1024) / spreadStreams }
		b.ReportMetric(disk(), "disk-KiB/stream")
		settle(b, srv)
		b.ReportMetric(disk(), "settled-disk-KiB/stream")
	})
}

// settle waits (for at most two minutes) until srv's closer has nothing
// left to close or compact.
func settle(b *testing.B, srv *Server) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		srv.mu.Lock()
		done := srv.toClose.n == 0 && len(srv.toCompact) == 0 && len(srv.closing) == 0
		srv.mu.Unlock()
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond) // a benchmark's wait, not a test's
	}
	b.Log("the closer did not settle in 2 minutes")
}

// duKiB is what du -sk says of dir.
func duKiB(tb testing.TB, dir string) int64 {
	out, err := exec.Command("du", "-sk", dir).Output()
	if err != nil {
		tb.Fatalf("du %s: %v", dir, err)
	}
	f := strings.Fields(string(out))
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		tb.Fatalf("du %s: %q", dir, out)
	}
	return n
}
