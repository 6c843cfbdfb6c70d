package bench

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// The Go benchmarks measure one side each; run them together and compare
// with benchstat, or use `switchyard bench persist` for the ratio table.

func benchEnv(b *testing.B) *PersistEnv {
	b.Helper()
	env, err := StartPersistEnv(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(env.Close)
	return env
}

func BenchmarkPersistSet(b *testing.B) {
	env := benchEnv(b)
	c, err := env.Client()
	if err != nil {
		b.Fatal(err)
	}
	kv := c.KV("bench", "set")
	value := make([]byte, 128)
	ctx := context.Background()
	b.SetBytes(int64(len(value)))
	i := 0
	for b.Loop() {
		if _, err := kv.Set(ctx, "k"+strconv.Itoa(i%1000), value, persist.SetOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkJetStreamKVPut(b *testing.B) {
	env := benchEnv(b)
	nc, err := env.Conn()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	kv, err := jsKV(ctx, nc, "bench")
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 128)
	b.SetBytes(int64(len(value)))
	i := 0
	for b.Loop() {
		if _, err := kv.Put(ctx, "k"+strconv.Itoa(i%1000), value); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestRunPersistSmoke runs the side-by-side harness briefly so it cannot rot:
// both sides must complete work and the table must name both.
func TestRunPersistSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark harness")
	}
	for _, durable := range []bool{false, true} {
		var out strings.Builder
		res, err := RunPersist(context.Background(), PersistConfig{Duration: 200 * time.Millisecond, Clients: []int{1, 4}, Batch: 100, Dir: t.TempDir(), Durable: durable}, &out)
		if err != nil {
			t.Fatal(err)
		}
		// set at 1 and 4 clients, setMany, pipelined sets.
		if len(res) != 4 {
			t.Fatalf("durable %v: %d results, want 4:\n%s", durable, len(res), out.String())
		}
		for _, r := range res {
			if r.Ours <= 0 || r.Anchor <= 0 {
				t.Errorf("durable %v: %s: ours %.0f anchor %.0f", durable, r.Workload, r.Ours, r.Anchor)
			}
		}
		if durable && !strings.Contains(out.String(), "durable tier") {
			t.Errorf("durable run does not say so:\n%s", out.String())
		}
		// The server's clock is wired: the 1-client level's set is split.
		if !strings.Contains(out.String(), "a lone set (1 client): ") {
			t.Errorf("durable %v: no lone set line:\n%s", durable, out.String())
		}
		// The durable run bounds its set ratios by persist without fsync,
		// one line per client level; the default run has nothing to bound.
		if got, want := strings.Count(out.String(), "bound: persist set without any fsync"), map[bool]int{false: 0, true: 2}[durable]; got != want {
			t.Errorf("durable %v: %d bound lines, want %d:\n%s", durable, got, want, out.String())
		}
	}
}

// BenchmarkPersistSetParallel runs 16 concurrent clients (8 per core on the
// 2-core reference machine), each on its own connection: group commit's case.
func BenchmarkPersistSetParallel(b *testing.B) {
	env := benchEnv(b)
	value := make([]byte, 128)
	var next atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		c, err := env.Client()
		if err != nil {
			b.Error(err)
			return
		}
		kv := c.KV("bench", "set-parallel")
		id := next.Add(1)
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			if _, err := kv.Set(ctx, "k"+strconv.FormatInt(id, 10)+"-"+strconv.Itoa(i%1000), value, persist.SetOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPersistSetMany writes batches of 1,000 128-byte messages; one op
// is one batch.
func BenchmarkPersistSetMany(b *testing.B) {
	env := benchEnv(b)
	c, err := env.Client()
	if err != nil {
		b.Fatal(err)
	}
	s := c.Stream("bench", "setmany")
	msgs := make([]persist.Entry, 1000)
	for i := range msgs {
		msgs[i].Value = make([]byte, 128)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.SetMany(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRunPersistAuth: the secured environment serves every workload (users,
// permissions and TLS as up --auth sets them) and the table has a row each.
func TestRunPersistAuth(t *testing.T) {
	var out bytes.Buffer
	res, err := RunPersistAuth(context.Background(), PersistConfig{Duration: 200 * time.Millisecond, Clients: []int{1, 4}, Batch: 100, Dir: t.TempDir()}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3:\n%s", len(res), out.String())
	}
	for _, r := range res {
		if r.Ours <= 0 || r.Anchor <= 0 {
			t.Errorf("%s: no operations measured (%v secure, %v open)", r.Workload, r.Ours, r.Anchor)
		}
	}
	if !strings.Contains(out.String(), "auth + TLS") {
		t.Errorf("table without the secured side:\n%s", out.String())
	}
}
