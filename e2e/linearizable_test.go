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

// linClient is one client of TestLinearizableKV: its own NATS connection,
// its own history, and what it last saw of each key (to aim its CAS).
type linClient struct {
	id   int
	kv   *persist.KV
	rng  *rand.Rand
	seen map[string]linState
	ops  []porcupine.Operation
	n    int // writes so far, for unique values
}

// do runs one random operation and records it. Call and return times are
// nanoseconds since start; an unknown outcome's return time is set to the
// end of the history later.
func (c *linClient) do(ctx context.Context, start time.Time, keys []string) {
	key := keys[c.rng.IntN(len(keys))]
	in := linInput{Key: key}
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
	var opts persist.SetOptions
	if in.Op == linSet || in.Op == linCAS {
		c.n++
		in.Value = fmt.Sprintf("c%d-%d", c.id, c.n)
		if c.rng.IntN(2) == 0 {
			// Half the writes carry a msgID, which makes them retried after a
			// timeout; the others fail at the first timeout.
			opts.MsgID = in.Value
		}
	}
	if in.Op == linCAS {
		if s := c.seen[key]; s.Exists && c.rng.IntN(4) != 0 {
			in.Prev, in.PrevValue = s.Seq, s.Value
		}
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
			return // a read without an answer did nothing: not recorded
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
	const clientTimeout = time.Second
	sp := startServeProc(t)

	var (
		done  atomic.Bool  // the clients stop after their current operation
		count atomic.Int64 // operations answered, for pacing the kills
		wg    sync.WaitGroup
	)
	// A generous bound: the clients stop on `done`; this only ends a run
	// that hangs.
	ctx, cancel := context.WithTimeout(context.Background(), *linDuration+2*time.Minute)
	defer cancel()
	start := time.Now()
	cs := make([]*linClient, clients)
	for i := range cs {
		// Attempts covers a restart for the operations that may be
		// retried; one second per attempt makes an answer lost to a kill
		// time out soon.
		pc, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, sp.NATS), Timeout: clientTimeout, Attempts: 10})
		if err != nil {
			t.Fatal(err)
		}
		seed := rand.Uint64()
		t.Logf("client %d: seed %d", i, seed)
		cs[i] = &linClient{id: i, kv: pc.KV("project-lin", "kv"), rng: rand.New(rand.NewPCG(seed, uint64(i))), seen: map[string]linState{}}
		wg.Add(1)
		go func(c *linClient) {
			defer wg.Done()
			for !done.Load() && ctx.Err() == nil {
				c.do(ctx, start, keys)
				count.Add(1)
			}
		}(cs[i])
	}

	// Kill or pause the server at even intervals over the run, each time
	// once the clients got answers since the previous event.
	every := *linDuration / time.Duration(events+1)
	kills, pauses := 0, 0
	for ev := range events {
		at := count.Load() + 100
		next := start.Add(every * time.Duration(ev+1))
		// The event is due at `next` and only once the server has served
		// since the last one.
		testwait.Until(t, fmt.Sprintf("chaos event %d due", ev), func() (bool, string) {
			n := count.Load()
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
	pace(ctx, time.Until(start.Add(*linDuration))) // the rest of the run, after the last event
	done.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("clients did not stop")
	}

	// One last read of every key, after everything else, pins the end state.
	last := &linClient{id: clients, kv: cs[0].kv, rng: rand.New(rand.NewPCG(1, 2)), seen: map[string]linState{}}
	for _, k := range keys {
		before := len(last.ops)
		for tries := 0; len(last.ops) == before; tries++ {
			if tries == 10 {
				t.Fatalf("final get of %s never answered", k)
			}
			last.do(ctx, start, []string{k})
		}
	}

	end := time.Since(start).Nanoseconds() + 1
	var history []porcupine.Operation
	perKind := map[linOpKind]int{}
	unknown := 0
	for _, c := range append(cs, last) {
		for _, op := range c.ops {
			if op.Output.(linOutput).Unknown {
				op.Return = end
				unknown++
			}
			perKind[op.Input.(linInput).Op]++
			history = append(history, op)
		}
	}
	t.Logf("%d operations (%d get, %d set, %d cas, %d delete), %d with unknown outcome, %d kills, %d pauses, %v",
		len(history), perKind[linGet], perKind[linSet], perKind[linCAS], perKind[linDelete], unknown, kills, pauses, time.Since(start).Round(time.Millisecond))
	for _, k := range []linOpKind{linGet, linSet, linCAS, linDelete} {
		if perKind[k] == 0 {
			t.Fatalf("no %s operation answered: the run checked nothing about it", k)
		}
	}

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
