//go:build unix

package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// linDuration is how long TestLinearizableKV runs its clients. The default
// keeps it CI-sized; -lin.duration=10m is a real soak.
var linDuration = flag.Duration("lin.duration", 18*time.Second, "how long TestLinearizableKV runs its clients against the killed, paused and restarted server")

// linOpKind is one operation of the linearizability test's model.
type linOpKind uint8

const (
	linGet linOpKind = iota
	linSet
	linCAS
	linDelete
)

func (k linOpKind) String() string {
	return [...]string{"get", "set", "cas", "delete"}[k]
}

// linInput is what a client asked. Values are unique per write, so a value
// names the write that stored it.
type linInput struct {
	Op    linOpKind
	Key   string
	Value string // set, cas: the value written
	// cas: the seq the key must be at (0: must not exist) and the value the
	// client saw at that seq.
	Prev      uint64
	PrevValue string
}

// linOutput is what the client heard back. Unknown means no answer (a
// timeout, a connection lost, the server killed): the operation may or may
// not have happened.
type linOutput struct {
	Unknown bool
	OK      bool   // get: found; cas: applied; delete: the key existed
	Seq     uint64 // get, set, cas: the message's seq
	Value   string // get
}

// linState is one key: absent, or present with the value of one write and
// its seq, 0 when that write's answer was lost (so its seq is not known).
type linState struct {
	Exists bool
	Seq    uint64
	Value  string
}

// casApplies says whether a cas on st succeeds: the key is absent for
// Prev 0, else holds the write the client saw at Prev (values are unique,
// so that write has exactly that seq).
func casApplies(st linState, in linInput) bool {
	if in.Prev == 0 {
		return !st.Exists
	}
	return st.Exists && st.Value == in.PrevValue
}

// linStep is the key-value register of one key. Seqs grow with commit
// order, so a write linearized after the key's current row must get a
// larger seq.
func linStep(state, input, output any) []any {
	st, in, out := state.(linState), input.(linInput), output.(linOutput)
	newer := func(seq uint64) bool { return !st.Exists || st.Seq == 0 || seq > st.Seq }
	switch in.Op {
	case linGet:
		if !out.OK {
			if st.Exists {
				return nil
			}
			return []any{st}
		}
		if !st.Exists || st.Value != out.Value || (st.Seq != 0 && st.Seq != out.Seq) {
			return nil
		}
		return []any{linState{Exists: true, Seq: out.Seq, Value: out.Value}}
	case linSet:
		if out.Unknown {
			return []any{st, linState{Exists: true, Value: in.Value}}
		}
		if !newer(out.Seq) {
			return nil
		}
		return []any{linState{Exists: true, Seq: out.Seq, Value: in.Value}}
	case linCAS:
		applies := casApplies(st, in)
		switch {
		case out.Unknown && applies:
			return []any{st, linState{Exists: true, Value: in.Value}}
		case out.Unknown || (!out.OK && !applies):
			return []any{st}
		case out.OK && applies && newer(out.Seq) && out.Seq > in.Prev:
			return []any{linState{Exists: true, Seq: out.Seq, Value: in.Value}}
		}
		return nil
	case linDelete:
		switch {
		case out.Unknown && st.Exists:
			return []any{st, linState{}}
		case out.Unknown || (!out.OK && !st.Exists):
			return []any{st}
		case out.OK && st.Exists:
			return []any{linState{}}
		}
		return nil
	}
	return nil
}

// linModel checks each key's history on its own (a key is a register).
var linModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{linState{}} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		var res string
		switch {
		case out.Unknown:
			res = "unknown"
		case in.Op == linGet && out.OK:
			res = fmt.Sprintf("%s@%d", out.Value, out.Seq)
		case in.Op == linGet:
			res = "not found"
		case in.Op == linDelete:
			res = fmt.Sprintf("existed=%v", out.OK)
		case out.OK || in.Op == linSet:
			res = fmt.Sprintf("seq %d", out.Seq)
		default:
			res = "wrong-last-sequence"
		}
		switch in.Op {
		case linSet:
			return fmt.Sprintf("set(%s, %s) -> %s", in.Key, in.Value, res)
		case linCAS:
			return fmt.Sprintf("cas(%s, %s, prev %d %s) -> %s", in.Key, in.Value, in.Prev, in.PrevValue, res)
		}
		return fmt.Sprintf("%s(%s) -> %s", in.Op, in.Key, res)
	},
	DescribeState: func(state any) string {
		st := state.(linState)
		if !st.Exists {
			return "absent"
		}
		return fmt.Sprintf("%s@%d", st.Value, st.Seq)
	},
}

// linClient is one client of a linRun: its own NATS connection, its own
// history, and what it last saw of each key (to aim its CAS).
type linClient struct {
	id   int
	kv   *persist.KV
	rng  *rand.Rand
	seen map[string]linState
	ops  []porcupine.Operation
	n    int // writes so far, for unique values
}

// random picks one operation on keys: its input, and whether a write
// carries a msgID.
func (c *linClient) random(keys []string) (in linInput, msgID bool) {
	in.Key = keys[c.rng.IntN(len(keys))]
	switch r := c.rng.IntN(10); {
	case r < 4:
		in.Op = linGet
	case r < 6:
		in.Op = linSet
	case r < 8:
		in.Op = linCAS
	default:
		in.Op = linDelete
	}
	if in.Op == linSet || in.Op == linCAS {
		in.Value = c.value()
		// Half the writes carry a msgID, which makes them retried after a
		// timeout; the others fail at the first timeout.
		msgID = c.rng.IntN(2) == 0
	}
	if in.Op == linCAS {
		if s := c.seen[in.Key]; s.Exists && c.rng.IntN(4) != 0 {
			in.Prev, in.PrevValue = s.Seq, s.Value
		}
	}
	return in, msgID
}

// value is a value no other write of the run has.
func (c *linClient) value() string {
	c.n++
	return fmt.Sprintf("c%d-%d", c.id, c.n)
}

// do runs one random operation and records it.
func (c *linClient) do(ctx context.Context, start time.Time, keys []string) {
	in, msgID := c.random(keys)
	c.run(ctx, start, in, msgID)
}

// run runs in (a write with in.Value as its msgID when msgID is set) and
// records it, unless it is a get that got no answer, which did nothing;
// it returns what the client heard and whether it was recorded. Call and
// return times are nanoseconds since start; an unknown outcome's return
// time is set to the end of the history later.
func (c *linClient) run(ctx context.Context, start time.Time, in linInput, msgID bool) (linOutput, bool) {
	key := in.Key
	var opts persist.SetOptions
	if msgID {
		opts.MsgID = in.Value
	}
	if in.Op == linCAS {
		prev := in.Prev
		opts.PrevSeq = &prev
	}
	call := time.Since(start).Nanoseconds()
	var out linOutput
	var err error
	switch in.Op {
	case linGet:
		var m *persist.Message
		m, err = c.kv.Get(ctx, key)
		switch {
		case err == nil:
			out = linOutput{OK: true, Seq: m.Seq, Value: string(m.Value)}
		case errors.Is(err, persist.ErrNotFound):
			err = nil
		default:
			return linOutput{Unknown: true}, false // a read without an answer did nothing: not recorded
		}
	case linSet, linCAS:
		var res persist.SetResult
		res, err = c.kv.Set(ctx, key, []byte(in.Value), opts)
		switch {
		case err == nil:
			out = linOutput{OK: true, Seq: res.Seq}
		case in.Op == linCAS && errors.Is(err, persist.ErrWrongLastSequence):
			err = nil
		}
	case linDelete:
		out.OK, err = c.kv.Delete(ctx, key)
	}
	ret := time.Since(start).Nanoseconds()
	if err != nil {
		out = linOutput{Unknown: true}
	}
	switch {
	case out.Unknown:
		delete(c.seen, key)
	case in.Op == linDelete:
		c.seen[key] = linState{}
	case out.OK && in.Op == linGet:
		c.seen[key] = linState{Exists: true, Seq: out.Seq, Value: out.Value}
	case out.OK:
		c.seen[key] = linState{Exists: true, Seq: out.Seq, Value: in.Value}
	case in.Op == linGet:
		c.seen[key] = linState{}
	}
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	return out, true
}

// linKV is the KV stream name of scope for one client of a linRun: its own
// NATS connection to e, and a persist client whose attempts time out after
// timeout. Attempts covers a restart or a move for the operations that
// may be retried.
func linKV(t *testing.T, e *embedded.Server, scope string, timeout time.Duration) *persist.KV {
	t.Helper()
	pc, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, e), Timeout: timeout, Attempts: 10})
	if err != nil {
		t.Fatal(err)
	}
	return pc.KV(scope, "kv")
}

// linRun is a group of linClients doing random operations on the same keys
// until Stop, and any scripted clients a test adds (Client): the history
// of all of them is checked together (Check).
type linRun struct {
	t     *testing.T
	ctx   context.Context
	start time.Time
	keys  []string
	cs    []*linClient // random clients, then scripted ones

	random int          // the first random clients of cs
	done   atomic.Bool  // the random clients stop after their current operation
	count  atomic.Int64 // operations the random clients finished
	gate   sync.RWMutex // each operation holds it shared; Hold takes it whole
	wg     sync.WaitGroup
}

// startLinRun starts n random clients on keys, client i on the KV kv(i)
// returns. ctx bounds the whole run.
func startLinRun(t *testing.T, ctx context.Context, n int, keys []string, kv func(i int) *persist.KV) *linRun {
	t.Helper()
	r := &linRun{t: t, ctx: ctx, start: time.Now(), keys: keys, random: n}
	for i := range n {
		seed := rand.Uint64()
		t.Logf("client %d: seed %d", i, seed)
		c := &linClient{id: i, kv: kv(i), rng: rand.New(rand.NewPCG(seed, uint64(i))), seen: map[string]linState{}}
		r.cs = append(r.cs, c)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for !r.done.Load() && ctx.Err() == nil {
				r.gate.RLock()
				c.do(ctx, r.start, keys)
				r.gate.RUnlock()
				r.count.Add(1)
			}
		}()
	}
	return r
}

// Client adds a client the test drives itself (with linClient.run, on
// r.start's clock) on kv; its operations join the history.
func (r *linRun) Client(kv *persist.KV) *linClient {
	c := &linClient{id: len(r.cs), kv: kv, rng: rand.New(rand.NewPCG(1, uint64(len(r.cs)))), seen: map[string]linState{}}
	r.cs = append(r.cs, c)
	return c
}

// Answered is the number of operations the random clients finished.
func (r *linRun) Answered() int64 { return r.count.Load() }

// WaitAnswered waits until the random clients finished n operations.
func (r *linRun) WaitAnswered(n int64) {
	r.t.Helper()
	testwait.Until(r.t, fmt.Sprintf("%d operations answered", n), func() (bool, string) {
		got := r.count.Load()
		return got >= n, fmt.Sprintf("%d answered", got)
	})
}

// Hold returns once no random client is in an operation; none starts
// another until Release.
func (r *linRun) Hold() { r.gate.Lock() }

// Release lets the random clients go on after Hold.
func (r *linRun) Release() { r.gate.Unlock() }

// Stop ends the random clients after their current operation.
func (r *linRun) Stop() {
	r.t.Helper()
	r.done.Store(true)
	r.wg.Wait()
	if r.ctx.Err() != nil {
		r.t.Fatal("clients did not stop")
	}
}

// History reads every key once more, after everything else, to pin the
// end state (through kv), and returns every client's operations, those
// with an unknown outcome pending to the end. It fails the test when some
// kind of operation never got an answer: the run checked nothing about it.
func (r *linRun) History(kv *persist.KV, events string) []porcupine.Operation {
	r.t.Helper()
	last := r.Client(kv)
	for _, k := range r.keys {
		for tries := 0; ; tries++ {
			if tries == 10 {
				r.t.Fatalf("final get of %s never answered", k)
			}
			if _, ok := last.run(r.ctx, r.start, linInput{Op: linGet, Key: k}, false); ok {
				break
			}
		}
	}
	end := time.Since(r.start).Nanoseconds() + 1
	var history []porcupine.Operation
	perKind := map[linOpKind]int{}
	unknown := 0
	for _, c := range r.cs {
		for _, op := range c.ops {
			if op.Output.(linOutput).Unknown {
				op.Return = end
				unknown++
			}
			perKind[op.Input.(linInput).Op]++
			history = append(history, op)
		}
	}
	r.t.Logf("%d operations (%d get, %d set, %d cas, %d delete), %d with unknown outcome, %s, %v",
		len(history), perKind[linGet], perKind[linSet], perKind[linCAS], perKind[linDelete], unknown, events, time.Since(r.start).Round(time.Millisecond))
	for _, k := range []linOpKind{linGet, linSet, linCAS, linDelete} {
		if perKind[k] == 0 {
			r.t.Fatalf("no %s operation answered: the run checked nothing about it", k)
		}
	}
	return history
}

// checkLinearizable fails t unless porcupine finds history linearizable
// under linModel; an illegal history is drawn into the test's artifact
// directory.
func checkLinearizable(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(linModel.ToModel(), history, 5*time.Minute)
	t.Logf("check: %s in %v", res, time.Since(checkStart).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(t.ArtifactDir(), "linearizability.html")
		if err := porcupine.VisualizePath(linModel.ToModel(), info, path); err != nil {
			t.Errorf("visualize: %v", err)
		}
		t.Fatalf("history is not linearizable; see %s (keep it with -artifacts)", path)
	default:
		t.Fatalf("the checker gave up (%s) before finding a linearization", res)
	}
}

// TestLinearizableKV: concurrent clients do get, set, compare-and-set and
// delete on a few keys of one KV stream while the persist server (a
// `switchyard persist serve` process) is killed with SIGKILL and restarted,
// or paused with SIGSTOP for longer than the clients' timeout (so it serves
// requests whose clients already gave up and retried), several times. Every
// operation is recorded with its call and return time; one whose answer
// never came is recorded as possibly applied, pending to the end of the
// history. Porcupine then checks that each key's history is linearizable:
// some order of the operations, each taking effect between its call and its
// return, explains every answer. It catches answers a retry got wrong (a
// retried delete saying the key did not exist), lost or doubled writes
// across a kill, and stale reads.
func TestLinearizableKV(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	const clients = 8
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	// Chaos events: kill, pause, pause, kill, pause, pause, kill... Pauses
	// are the ones that make a lost answer to an applied request, so they
	// come more often.
	events := max(7, int(*linDuration/(5*time.Second/2)))
	// One second per attempt makes an answer lost to a kill time out soon.
	const clientTimeout = time.Second
	sp := startServeProc(t)

	// A generous bound: the clients stop on Stop; this only ends a run
	// that hangs.
	ctx, cancel := context.WithTimeout(context.Background(), *linDuration+2*time.Minute)
	defer cancel()
	run := startLinRun(t, ctx, clients, keys, func(int) *persist.KV { return linKV(t, sp.NATS, "project-lin", clientTimeout) })

	// Kill or pause the server at even intervals over the run, each time
	// once the clients got answers since the previous event.
	every := *linDuration / time.Duration(events+1)
	kills, pauses := 0, 0
	for ev := range events {
		at := run.Answered() + 100
		next := run.start.Add(every * time.Duration(ev+1))
		// The event is due at `next` and only once the server has served
		// since the last one.
		testwait.Until(t, fmt.Sprintf("chaos event %d due", ev), func() (bool, string) {
			n := run.Answered()
			return !time.Now().Before(next) && n >= at, fmt.Sprintf("%d of %d operations answered", n, at)
		})
		if ev%3 == 0 {
			sp.Restart()
			kills++
			continue
		}
		sp.Pause()
		// A pause of 1.5 client timeouts, paced by a timer: every request
		// sent meanwhile times out once and is retried (or given up), and
		// the server then serves the first attempt and the retry.
		pace(ctx, 3*clientTimeout/2)
		sp.Resume()
		pauses++
	}
	pace(ctx, time.Until(run.start.Add(*linDuration))) // the rest of the run, after the last event
	run.Stop()
	checkLinearizable(t, run.History(run.cs[0].kv, fmt.Sprintf("%d kills, %d pauses", kills, pauses)))
}

// TestLinModel checks the model on small hand-made histories, so that
// TestLinearizableKV passing means something: each row is linearizable or
// not on purpose.
func TestLinModel(t *testing.T) {
	t.Parallel()
	const end = 100
	op := func(call, ret int64, in linInput, out linOutput) porcupine.Operation {
		if out.Unknown {
			ret = end
		}
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	set := func(v string) linInput { return linInput{Op: linSet, Key: "k", Value: v} }
	get := linInput{Op: linGet, Key: "k"}
	del := linInput{Op: linDelete, Key: "k"}
	found := func(seq uint64, v string) linOutput { return linOutput{OK: true, Seq: seq, Value: v} }
	unknown := linOutput{Unknown: true}
	cases := []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"set then get", true, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, get, found(1, "a"))}},
		{"get a wrong seq", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, get, found(2, "a"))}},
		{"stale read", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, set("b"), linOutput{Seq: 2}), op(4, 5, get, found(1, "a"))}},
		{"seq going back", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 2}), op(2, 3, set("b"), linOutput{Seq: 1})}},
		{"delete of a present key says absent", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, del, linOutput{})}},
		{"concurrent deletes: one says absent", true, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 5, del, linOutput{OK: true}), op(3, 6, del, linOutput{})}},
		{"unknown set applied", true, []porcupine.Operation{op(0, 0, set("a"), unknown), op(1, 2, get, found(7, "a"))}},
		{"unknown set not applied", true, []porcupine.Operation{op(0, 0, set("a"), unknown), op(1, 2, get, linOutput{})}},
		{"unknown set applied, then gone", false, []porcupine.Operation{op(0, 0, set("a"), unknown), op(1, 2, get, found(7, "a")), op(3, 4, get, linOutput{})}},
		{"unknown delete", true, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 0, del, unknown), op(3, 4, get, linOutput{})}},
		{"unknown delete, key back", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 0, del, unknown), op(3, 4, get, linOutput{}), op(5, 6, get, found(1, "a"))}},
		{"cas applies", true, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, linInput{Op: linCAS, Key: "k", Value: "b", Prev: 1, PrevValue: "a"}, linOutput{OK: true, Seq: 2})}},
		{"cas refused wrongly", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, linInput{Op: linCAS, Key: "k", Value: "b", Prev: 1, PrevValue: "a"}, linOutput{})}},
		{"cas on absent applied wrongly", false, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, linInput{Op: linCAS, Key: "k", Value: "b"}, linOutput{OK: true, Seq: 2})}},
		{"other keys do not interfere", true, []porcupine.Operation{op(0, 1, set("a"), linOutput{Seq: 1}), op(2, 3, linInput{Op: linDelete, Key: "other"}, linOutput{}), op(4, 5, get, found(1, "a"))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := porcupine.CheckOperations(linModel.ToModel(), tc.ops); got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}
