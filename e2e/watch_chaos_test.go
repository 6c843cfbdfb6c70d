package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// chaosWatcher records what one watcher's callback saw, compactly: the seq
// and a hash of the value of every set, in delivery order.
type chaosWatcher struct {
	mu     sync.Mutex
	seqs   []uint64
	hashes []uint32
	errs   []string
	w      *persist.Watcher
}

func (c *chaosWatcher) fn(ev persist.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Kind {
	case persist.EventSet:
		if n := len(c.seqs); n > 0 && ev.Msg.Seq <= c.seqs[n-1] {
			c.errs = append(c.errs, fmt.Sprintf("set %d after %d", ev.Msg.Seq, c.seqs[n-1]))
		}
		c.seqs = append(c.seqs, ev.Msg.Seq)
		c.hashes = append(c.hashes, hash32(ev.Msg.Value))
	case persist.EventDelete:
		c.errs = append(c.errs, fmt.Sprintf("delete of %v in a stream that never deletes", ev.Seqs))
	}
}

func hash32(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}

// chaosSets is the number of sets of TestWatchChaos: the full figure of the
// issue in a normal run, a quarter under the race detector, which slows the
// server process (a race-built binary) and the 50 watchers five to ten
// times over: every watcher re-reads the whole stream after each restart.
// The kills, the cut and the checks are the same in both.
func chaosSets() int {
	if raceEnabled {
		return 5000
	}
	return 20000
}

// TestWatchChaos: 50 watchers follow one stream while writers do 20,000
// sets; the persist server (a `switchyard persist serve` process) is killed
// with SIGKILL and restarted twice, and one watcher's own NATS connection is
// cut mid-way. At the end every watcher's callback has seen exactly the
// stored sequence, each seq once, in order, with the right values.
func TestWatchChaos(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts server processes")
	}
	total, batch := chaosSets(), 25
	const watchers, writers = 50, 4
	sp := startServeProc(t)
	e, nc := sp.NATS, sp.Conn

	const scope, name = "project-chaos", "feed"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// 49 watchers share one connection; the last has its own, through a
	// proxy the test cuts.
	wnc := testnats.Conn(t, e)
	proxy := startCutProxy(t, e.ClientURL())
	pnc := proxy.conn(t)
	shared, err := persist.NewClient(persist.ClientConfig{Conn: wnc})
	if err != nil {
		t.Fatal(err)
	}
	own, err := persist.NewClient(persist.ClientConfig{Conn: pnc})
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]*chaosWatcher, watchers)
	for i := range ws {
		c := shared
		if i == watchers-1 {
			c = own
		}
		ws[i] = &chaosWatcher{}
		// A short idle check catches a tail lost to the last kill.
		w, err := c.Stream(scope, name).Watch(ctx, persist.WatchOptions{IdleCheck: 500 * time.Millisecond}, ws[i].fn)
		if err != nil {
			t.Fatal(err)
		}
		ws[i].w = w
		defer func() { _ = w.Stop(context.Background()) }()
	}

	// A request the kill swallowed costs the writer this timeout.
	writer, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 3 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	stream := writer.Stream(scope, name)
	var (
		acked atomic.Int64
		wg    sync.WaitGroup
		werr  atomic.Value
	)
	per := total / writers
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i += batch {
				msgs := make([]persist.Entry, min(batch, per-i))
				for k := range msgs {
					id := fmt.Sprintf("w%d-%d", g, i+k)
					msgs[k] = persist.Entry{MsgID: id, Value: []byte(id)}
				}
				for {
					// Every message has a msgID, so a retry after a kill
					// never stores one twice.
					res, err := stream.SetMany(ctx, msgs)
					if err == nil {
						for _, r := range res {
							if r.Err != nil {
								werr.Store(fmt.Errorf("set refused: %w", r.Err))
								return
							}
						}
						acked.Add(int64(len(msgs)))
						break
					}
					if ctx.Err() != nil {
						return
					}
					pace(ctx, 5*time.Millisecond)
				}
			}
		}()
	}

	start := time.Now()
	for step, at := range []int64{int64(total) / 4, int64(total) / 2, int64(total) * 3 / 4} {
		testwait.For(t, fmt.Sprintf("%d sets acknowledged", at), func() bool { return acked.Load() >= at })
		t.Logf("%v: %d acknowledged, step %d", time.Since(start), acked.Load(), step)
		if step == 1 {
			proxy.cut()
			continue
		}
		sp.Restart()
	}
	wg.Wait()
	if err, _ := werr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("writers did not finish: %d of %d acknowledged", acked.Load(), total)
	}

	t.Logf("%v: writers done", time.Since(start))
	// The writer's sequence, as stored.
	var want []uint64
	var wantHash []uint32
	if _, err := stream.Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		want = append(want, m.Seq)
		wantHash = append(wantHash, hash32(m.Value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != total {
		t.Fatalf("stored %d messages, want %d", len(want), total)
	}
	last := want[len(want)-1]
	for i, w := range ws {
		testwait.Until(t, fmt.Sprintf("watcher %d at seq %d", i, last), func() (bool, string) {
			got := w.w.LastSeq()
			return got >= last, fmt.Sprintf("seq %d", got)
		})
		if err := w.w.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		for _, e := range w.errs {
			t.Errorf("watcher %d: %s", i, e)
		}
		if !slices.Equal(w.seqs, want) {
			t.Errorf("watcher %d: saw %d sets, want %d (first difference at %d)", i, len(w.seqs), len(want), firstDiff(w.seqs, want))
		} else if !slices.Equal(w.hashes, wantHash) {
			t.Errorf("watcher %d: values differ from the stored ones", i)
		}
		w.mu.Unlock()
	}
	if r := ws[watchers-1].w.Resyncs(); r == 0 {
		t.Errorf("the cut watcher never resynced")
	}
	t.Logf("%d sets, %d watchers; resyncs of watcher 0: %d, of the cut one: %d", total, watchers, ws[0].w.Resyncs(), ws[watchers-1].w.Resyncs())
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// cutProxy forwards TCP connections to a target and can cut every open one
// at once, as a network failure would; new connections keep working.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool // connections are refused (see Down)
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, targetURL string) *cutProxy {
	t.Helper()
	host := targetURL[len("nats://"):]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: host}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

// conn connects to NATS through the proxy, reconnecting at once after a
// cut; it is closed when the test ends.
func (p *cutProxy) conn(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.IgnoreDiscoveredServers())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Down cuts every connection and refuses new ones until Up, as a network
// that stays down would.
func (p *cutProxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.cut()
}

// Up accepts connections again after Down.
func (p *cutProxy) Up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// cut closes every connection open now.
func (p *cutProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
