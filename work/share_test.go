package work_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

// shareStore is a fresh source's store on its own persist environment.
func shareStore(t *testing.T) *work.Store {
	t.Helper()
	env := testpersist.Start(t, 1)
	st, err := work.NewStore(env.Client(), "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// shareServer is an NNTP server that would accept far more connections
// than the shares' limit, so that an overshoot shows in its Peak.
func shareServer(t *testing.T, maxConns int) *nntptest.Server {
	t.Helper()
	s := nntptest.Start(t, nntptest.Config{MaxConns: maxConns, PartSize: 2000})
	s.AddGroup("alt.test", 100)
	return s
}

func sharePool(t *testing.T, s *nntptest.Server, gateRestore time.Duration) *nntp.Pool {
	t.Helper()
	p, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: s.Addr()}, Size: 4, GateRestore: gateRestore, HealthEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return p
}

// shareRoundSeen is what one participant's loop saw at the end of a round.
type shareRoundSeen struct {
	granted, using int
	end            time.Time
}

// shareParticipant is one process: a Share and its pool, a loop running rounds
// and workers keeping the pool busy.
type shareParticipant struct {
	name  string
	share *work.Share
	pool  *nntp.Pool

	cancelLoop, cancelWork context.CancelFunc
	loopDone, workDone     chan struct{}

	mu      sync.Mutex
	history []shareRoundSeen
	errs    []error
}

func (p *shareParticipant) rounds() []shareRoundSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]shareRoundSeen(nil), p.history...)
}

func (p *shareParticipant) nrounds() int { return len(p.rounds()) }

func (p *shareParticipant) fail(err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// joinShare starts a participant: its loop runs a round every cfg.Every, and
// workers goroutines run commands through its pool without pause.
func joinShare(t *testing.T, st *work.Store, s *nntptest.Server, cfg work.ShareConfig, workers int) *shareParticipant {
	t.Helper()
	pool := sharePool(t, s, 0)
	sh, err := work.NewShare(st, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &shareParticipant{name: cfg.Name, share: sh, pool: pool, loopDone: make(chan struct{}), workDone: make(chan struct{})}
	loopCtx, cancelLoop := context.WithCancel(context.Background())
	workCtx, cancelWork := context.WithCancel(context.Background())
	p.cancelLoop, p.cancelWork = cancelLoop, cancelWork
	go func() {
		defer close(p.loopDone)
		tick := time.NewTicker(cfg.Every)
		defer tick.Stop()
		for {
			res, err := sh.Round(loopCtx)
			if loopCtx.Err() != nil {
				return
			}
			if err != nil {
				p.fail(fmt.Errorf("round: %w", err))
			}
			p.mu.Lock()
			p.history = append(p.history, shareRoundSeen{granted: res.Granted, using: sh.Using(), end: time.Now()})
			p.mu.Unlock()
			select {
			case <-loopCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for workCtx.Err() == nil {
				// workCtx only ends a wait for a connection: a command in
				// flight finishes, as a stopping process lets it (one cut
				// short would be counted by the server until it noticed).
				err := pool.Do(workCtx, func(c *nntp.Conn) error {
					_, err := c.Group(context.Background(), "alt.test")
					return err
				})
				if err != nil && workCtx.Err() == nil {
					p.fail(fmt.Errorf("command: %w", err))
				}
			}
		}()
	}
	go func() { wg.Wait(); close(p.workDone) }()
	t.Cleanup(p.stop)
	return p
}

// stop ends the loop and the workers (idempotent).
func (p *shareParticipant) stop() {
	p.cancelLoop()
	<-p.loopDone
	p.cancelWork()
	<-p.workDone
}

// leave is how a process leaves: its loop ends, then Leave shrinks the pool
// to nothing while the workers still ask for connections, so that the
// commands in flight finish and their connections close under an entry
// Leave keeps renewed, and only then do the workers stop.
func (p *shareParticipant) leave(t *testing.T) {
	t.Helper()
	p.cancelLoop()
	<-p.loopDone
	if err := p.share.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.stop()
}

// die is how a process dies: its connections and its heartbeats end
// together, as the kernel closes a dead process's sockets. The workers
// stop (commands in flight finish) and the pool closes while the loop
// still renews the entry; then the loop ends. Ending the loop first would
// leave the connections open after the last heartbeat for as long as the
// machine takes to close them, and the others, rightly dropping the entry
// once its TTL passed, would grow into connections still open.
func (p *shareParticipant) die(t *testing.T) {
	t.Helper()
	p.cancelWork()
	<-p.workDone
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.pool.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	p.stop()
}

func (p *shareParticipant) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, err := range p.errs {
		t.Errorf("%s: %v", p.name, err)
	}
}

// shareConverged: every participant's last round shows the grant want gives
// it, and its Using equals it.
func shareConverged(ps []*shareParticipant, want map[string]int) bool {
	for _, p := range ps {
		h := p.rounds()
		if len(h) == 0 || h[len(h)-1].granted != want[p.name] || h[len(h)-1].using != want[p.name] {
			return false
		}
	}
	return true
}

// grantsByName re-keys grants (keyed by entry ID, see Grants) by the
// entries' names, for tests whose names are unique.
func grantsByName(tbl []work.ShareEntry, grants map[string]int) map[string]int {
	out := make(map[string]int, len(tbl))
	for _, e := range tbl {
		out[e.Name] = grants[e.ID]
	}
	return out
}

// watchShareTable reads the table until stopped and reports the first time the
// entries' Using add up to more than limit.
func watchShareTable(t *testing.T, st *work.Store, limit int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			tbl, err := st.ShareTable(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("watch table: %v", err)
				}
				return
			}
			sum := 0
			for _, e := range tbl.Val {
				sum += e.Using
			}
			if sum > limit {
				t.Errorf("table at seq %d: Using adds up to %d, above the limit %d: %+v", tbl.Seq, sum, limit, tbl.Val)
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// TestShareParticipants runs three participants against one server whose
// own limit is far above theirs, each with a busy pool, joining, leaving
// and dying over time. The server never sees more connections than the
// limit, the table's Using never adds up to more, the grants are those of
// Grants at every stage, a leave is taken up by the others within two
// rounds, and a dead shareParticipant is dropped once its TTL has passed, not
// before.
func TestShareParticipants(t *testing.T) {
	t.Parallel()
	const limit = 6
	st := shareStore(t)
	srv := shareServer(t, 100)
	// Slow answers keep the connections busy: a shrink has commands in
	// flight to wait for.
	srv.SetFaults(nntptest.Faults{Delay: 40 * time.Millisecond})
	// Short rounds for quick convergence, but a TTL the guarantee holds
	// for: a round may take up to a second (shareRoundMin) and a process
	// shrinks its pool only after failing for half the TTL, so below two
	// seconds a participant merely slowed down by a loaded machine would
	// be dropped by the others while it still holds its connections (with
	// a TTL of three 50 ms rounds the table added up to 10 under load).
	every, ttl := 50*time.Millisecond, 2*time.Second
	cfgs := map[string]work.ShareConfig{
		"coordinator": {Name: "coordinator", Priority: work.PriorityCoordinator, Min: 1, Limit: limit, Every: every, TTL: ttl},
		"prober":      {Name: "prober", Priority: work.PriorityProber, Min: 1, Limit: limit, Every: every, TTL: ttl},
		"worker":      {Name: "worker", Priority: 4, Min: 2, Limit: limit, Every: every, TTL: ttl},
	}
	grants := func(names ...string) map[string]int {
		var es []work.ShareEntry
		for _, n := range names {
			c := cfgs[n]
			es = append(es, work.ShareEntry{Name: n, Priority: c.Priority, Min: c.Min, Max: c.Max})
		}
		return work.Grants(es, limit)
	}
	stopWatch := watchShareTable(t, st, limit)
	defer stopWatch()

	coord := joinShare(t, st, srv, cfgs["coordinator"], limit)
	testwait.For(t, "the coordinator alone to take the limit", func() bool {
		return shareConverged([]*shareParticipant{coord}, map[string]int{"coordinator": limit})
	})
	testwait.For(t, "its pool to fill", func() bool { return coord.pool.Stats().Open() == limit })

	prober := joinShare(t, st, srv, cfgs["prober"], limit)
	if want := grants("coordinator", "prober"); !maps.Equal(want, map[string]int{"coordinator": 4, "prober": 2}) {
		t.Fatalf("two-way split %v", want)
	}
	testwait.For(t, "coordinator and prober to split", func() bool {
		return shareConverged([]*shareParticipant{coord, prober}, grants("coordinator", "prober"))
	})

	worker := joinShare(t, st, srv, cfgs["worker"], limit)
	all := []*shareParticipant{coord, prober, worker}
	// Mins first (1+1+2), the 2 left by priority: one to the coordinator,
	// one to the prober (5 beats the coordinator's 10/3 and the worker's 4).
	if want := grants("coordinator", "prober", "worker"); !maps.Equal(want, map[string]int{"coordinator": 2, "prober": 2, "worker": 2}) {
		t.Fatalf("three-way split %v", want)
	}
	testwait.For(t, "all three to split", func() bool { return shareConverged(all, grants("coordinator", "prober", "worker")) })
	testwait.For(t, "the pools to be busy at their share", func() bool {
		return coord.pool.Stats().Open() == 2 && prober.pool.Stats().Open() == 2 && worker.pool.Stats().Open() == 2
	})
	tbl, got, err := coord.share.Table(context.Background())
	if err != nil || len(tbl) != 3 || !maps.Equal(grantsByName(tbl, got), grants("coordinator", "prober", "worker")) {
		t.Fatalf("Table: %+v %v %v", tbl, got, err)
	}

	// The prober leaves: within two rounds of each other shareParticipant the
	// coordinator and the worker hold the new split.
	// On a server slower than the TTL: the commands in flight and the
	// QUITs of a leave outlast the entry's last heartbeat by more than its
	// TTL, and the others must still not grow into them.
	srv.SetFaults(nntptest.Faults{Delay: ttl + ttl/2})
	prober.leave(t)
	srv.SetFaults(nntptest.Faults{Delay: 40 * time.Millisecond})
	if st := prober.pool.Stats(); st.Open() != 0 || st.Size != 0 {
		t.Fatalf("prober's pool after Leave: %+v", st)
	}
	after := grants("coordinator", "worker")
	if !maps.Equal(after, map[string]int{"coordinator": 3, "worker": 3}) {
		t.Fatalf("split after the leave %v", after)
	}
	for _, p := range []*shareParticipant{coord, worker} {
		r0 := p.nrounds()
		testwait.For(t, p.name+" to run two rounds", func() bool { return p.nrounds() >= r0+2 })
		if r := p.rounds()[r0+1]; r.granted != after[p.name] || r.using != after[p.name] {
			t.Errorf("%s two rounds after the leave: granted %d using %d, want %d", p.name, r.granted, r.using, after[p.name])
		}
	}

	// The worker dies: its connections go and its loop stops without
	// Leave. Its entry stays until its TTL has passed, then the
	// coordinator takes everything. Its entry carries the TTL the others
	// drop it by: read before it dies, since a slow machine may pass the
	// TTL before a read after; a heartbeat after the read only
	// makes the entry expire later.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seen, ttlMS int64
	tv, err := st.ShareTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tv.Val {
		if e.Name == "worker" {
			seen, ttlMS = e.Seen, e.TTL
		}
	}
	if seen == 0 || ttlMS != ttl.Milliseconds() {
		t.Fatalf("worker's entry %+v", tv.Val)
	}
	worker.die(t)
	testwait.For(t, "the coordinator to take the dead worker's share", func() bool {
		return shareConverged([]*shareParticipant{coord}, map[string]int{"coordinator": limit})
	})
	for _, r := range coord.rounds() {
		if r.granted == limit && r.end.UnixMilli() > seen && r.end.UnixMilli() < seen+ttlMS {
			t.Errorf("the coordinator took the worker's share at %d, before its entry (seen %d) expired", r.end.UnixMilli(), seen)
		}
	}
	tbl, _, err = coord.share.Table(ctx)
	if err != nil || len(tbl) != 1 || tbl[0].Name != "coordinator" {
		t.Fatalf("table after the worker died: %+v %v", tbl, err)
	}
	testwait.For(t, "the coordinator's pool to fill", func() bool { return coord.pool.Stats().Open() == limit })

	coord.stop()
	if err := coord.share.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	stopWatch()
	for _, p := range all {
		p.check(t)
	}
	if peak := srv.Stats().Peak; peak > limit {
		t.Fatalf("the server saw %d connections at once, limit %d", peak, limit)
	} else if peak < limit {
		t.Fatalf("peak %d: the pools never used the whole limit %d, the test proves nothing", peak, limit)
	}
	if tv, err := st.ShareTable(ctx); err != nil || len(tv.Val) != 0 {
		t.Fatalf("table after everyone left: %+v %v", tv, err)
	}
}

func TestNewShareConfig(t *testing.T) {
	t.Parallel()
	st, err := work.NewStore(nil, "src")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []work.ShareConfig{
		{Limit: 4},
		{Name: "a"},
		{Name: "a", Limit: 4, Min: -1},
		{Name: "a", Limit: 4, Min: 3, Max: 2},
		{Name: "a", Limit: 4, TTL: work.ShareTTLMax + time.Millisecond},
		{Name: "a", Limit: 4, Every: work.ShareTTLMax/3 + time.Millisecond},
	} {
		if _, err := work.NewShare(st, nil, cfg); !errors.Is(err, work.ErrShareConfig) {
			t.Errorf("NewShare(%+v): %v, want ErrShareConfig", cfg, err)
		}
	}
}

// TestShareReporter: a shareParticipant without a pool is counted like any
// other and its Using follows its grant; NewShare sizes a pool to zero so
// it opens nothing before its first grant; a too-many-connections refusal
// shows in the entry.
func TestShareReporter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := shareStore(t)
	// The provider refuses the third connection although the configured
	// limit says 4.
	srv := shareServer(t, 2)
	rep, err := work.NewShare(st, nil, work.ShareConfig{Name: "reporter", Priority: 1, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rep.Round(ctx); err != nil || res != (work.ShareResult{Was: 0, Granted: 4}) || rep.Using() != 4 {
		t.Fatalf("reporter alone: %+v %v, using %d", res, err, rep.Using())
	}

	pool := sharePool(t, srv, time.Hour)
	sh, err := work.NewShare(st, pool, work.ShareConfig{Name: "fetcher", Priority: 1, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if s := pool.Stats(); s.Size != 0 {
		t.Fatalf("pool before the first round: %+v", s)
	}
	// The reporter holds all 4: the fetcher is granted 2 but gets none
	// until the reporter gives them back.
	if res, err := sh.Round(ctx); err != nil || res.Granted != 2 || sh.Using() != 0 || pool.Stats().Size != 0 {
		t.Fatalf("fetcher's first round: %+v %v, using %d, pool %+v", res, err, sh.Using(), pool.Stats())
	}
	if res, err := rep.Round(ctx); err != nil || res != (work.ShareResult{Was: 4, Granted: 2}) || rep.Using() != 2 {
		t.Fatalf("reporter's second round: %+v %v, using %d", res, err, rep.Using())
	}
	if res, err := sh.Round(ctx); err != nil || res.Granted != 2 || sh.Using() != 2 || pool.Stats().Size != 2 {
		t.Fatalf("fetcher's second round: %+v %v, using %d, pool %+v", res, err, sh.Using(), pool.Stats())
	}

	// Another client of the account takes one of the server's two
	// connections: the fetcher's second dial is refused.
	other, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Acquire(ctx); !errors.Is(err, nntp.ErrTooManyConnections) {
		t.Fatalf("second connection: %v", err)
	}
	pool.Release(a)
	if _, err := sh.Round(ctx); err != nil {
		t.Fatal(err)
	}
	tbl, grants, err := sh.Table(ctx)
	if err != nil || len(tbl) != 2 || !maps.Equal(grantsByName(tbl, grants), map[string]int{"fetcher": 2, "reporter": 2}) {
		t.Fatalf("Table: %+v %v %v", tbl, grants, err)
	}
	if tbl[0].Name != "fetcher" || tbl[0].TooMany != 1 || tbl[1].TooMany != 0 {
		t.Fatalf("entries: %+v", tbl)
	}
	if err := rep.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := sh.Round(ctx); err != nil || res.Granted != 4 || sh.Using() != 4 {
		t.Fatalf("after the reporter left: %+v %v, using %d", res, err, sh.Using())
	}
}

// TestShareLeaveWaitsForInFlight: Leave shrinks the pool to zero at once
// but removes the entry, handing its connections on, only once the command
// in flight has finished and its connection is closed; until then it keeps
// the entry renewed with that connection (Every is the longest allowed,
// ShareTTLMax/3, here: the renewal is Leave's, no round runs).
func TestShareLeaveWaitsForInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := shareStore(t)
	srv := shareServer(t, 100)
	pool := sharePool(t, srv, 0)
	sh, err := work.NewShare(st, pool, work.ShareConfig{Name: "a", Limit: 3, Every: work.ShareTTLMax / 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Round(ctx); err != nil || sh.Using() != 3 {
		t.Fatalf("round: %v, using %d", err, sh.Using())
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan error, 1)
	go func() { left <- sh.Leave(ctx) }()
	testwait.For(t, "Leave to shrink the pool", func() bool { return pool.Stats().Size == 0 })
	// The connection in use still works.
	if _, err := c.Group(ctx, "alt.test"); err != nil {
		t.Fatal(err)
	}
	// While it waits, Leave renews the entry with what the pool still
	// holds: the connection in use, no grant.
	testwait.Until(t, "Leave to renew the entry with the connection in use", func() (bool, string) {
		tv, err := st.ShareTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(tv.Val) == 1 && tv.Val[0].Using == 1 && tv.Val[0].Granted == 0, fmt.Sprintf("%+v", tv.Val)
	})
	select {
	case err := <-left:
		t.Fatalf("Leave returned %v with a connection in use", err)
	default:
	}
	pool.Release(c)
	if err := <-left; err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().Active; n != 0 {
		t.Fatalf("after Leave the server has %d connections", n)
	}
	tv, err := st.ShareTable(ctx)
	if err != nil || len(tv.Val) != 0 || sh.Using() != 0 || sh.Granted() != 0 {
		t.Fatalf("table after Leave: %+v %v, using %d", tv, err, sh.Using())
	}
}

// TestShareFailingRoundsStopThePool: when rounds fail for half the TTL the
// pool is shrunk to zero (the others may soon drop the entry), not before;
// the next good round restores it.
func TestShareFailingRoundsStopThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := shareStore(t)
	srv := shareServer(t, 100)
	pool := sharePool(t, srv, 0)
	const ttl = 400 * time.Millisecond
	sh, err := work.NewShare(st, pool, work.ShareConfig{Name: "a", Limit: 2, Every: 100 * time.Millisecond, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Round(ctx); err != nil {
		t.Fatal(err)
	}
	ok := time.Now()
	dead, cancel := context.WithCancel(ctx)
	cancel() // every round fails, as with persist unreachable
	if _, err := sh.Round(dead); err == nil {
		t.Fatal("round with a dead context succeeded")
	}
	if s := pool.Stats().Size; s != 2 && time.Since(ok) < ttl/2 {
		t.Fatalf("one failed round at once shrank the pool to %d", s)
	}
	testwait.For(t, "failing rounds to shrink the pool", func() bool {
		_, _ = sh.Round(dead)
		return pool.Stats().Size == 0
	})
	if since := time.Since(ok); since < ttl/2 {
		t.Fatalf("pool shrunk %v after the last good round, before half the TTL", since)
	}
	if _, err := sh.Round(ctx); err != nil || pool.Stats().Size != 2 {
		t.Fatalf("good round: %v, pool %+v", err, pool.Stats())
	}
}

// TestShareSameName: two processes with the same Name (a shard started
// twice, or restarted while the old one still drains) are two
// participants: together they never hold more than the limit, neither
// adopts the other's entry, and one's Leave leaves the other's entry alone.
func TestShareSameName(t *testing.T) {
	t.Parallel()
	const limit = 4
	st := shareStore(t)
	srv := shareServer(t, 100)
	srv.SetFaults(nntptest.Faults{Delay: 10 * time.Millisecond})
	stopWatch := watchShareTable(t, st, limit)
	defer stopWatch()
	// A TTL the guarantee holds for (see TestShareParticipants).
	cfg := work.ShareConfig{Name: "coordinator", Priority: work.PriorityCoordinator, Limit: limit, Every: 50 * time.Millisecond, TTL: 2 * time.Second}
	a := joinShare(t, st, srv, cfg, limit)
	b := joinShare(t, st, srv, cfg, limit)
	half := map[string]int{"coordinator": limit / 2}
	testwait.For(t, "the two to split the limit", func() bool {
		return shareConverged([]*shareParticipant{a}, half) && shareConverged([]*shareParticipant{b}, half)
	})
	testwait.For(t, "both pools to be busy at their share", func() bool {
		return a.pool.Stats().Open() == limit/2 && b.pool.Stats().Open() == limit/2
	})
	ctx := context.Background()
	tbl, grants, err := a.share.Table(ctx)
	if err != nil || len(tbl) != 2 || tbl[0].ID == tbl[1].ID || len(grants) != 2 {
		t.Fatalf("table with two of one name: %+v %v %v", tbl, grants, err)
	}

	// b stops running rounds (as a process draining); a leaves. b's entry
	// stays, still counting b's connections.
	b.stop()
	a.stop()
	if err := a.share.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	tv, err := st.ShareTable(ctx)
	if err != nil || len(tv.Val) != 1 || tv.Val[0].Using != b.share.Using() || b.share.Using() != limit/2 {
		t.Fatalf("table after one of two of a name left: %+v %v, b using %d", tv, err, b.share.Using())
	}
	if res, err := b.share.Round(ctx); err != nil || res.Granted != limit || b.share.Using() != limit {
		t.Fatalf("b's round after a left: %+v %v, using %d", res, err, b.share.Using())
	}
	if err := b.share.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	stopWatch()
	a.check(t)
	b.check(t)
	if peak := srv.Stats().Peak; peak > limit {
		t.Fatalf("the server saw %d connections at once, limit %d", peak, limit)
	}
}

// TestShareStalenessByOwnClock: another host's entry is judged by whether
// its heartbeat changes, by this process's clock, not by comparing its Seen
// with the local wall clock. An entry whose Seen is an hour behind (its
// host's clock is) but that is renewed stays; one an hour ahead that is no
// longer renewed is dropped after its TTL, as is the first once its
// renewals stop.
func TestShareStalenessByOwnClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := shareStore(t)
	const ttl = 300 * time.Millisecond
	now := time.Now()
	behind := work.ShareEntry{Name: "behind", ID: "behind", Priority: 1, Using: 1, Seen: now.Add(-time.Hour).UnixMilli(), TTL: ttl.Milliseconds()}
	ahead := work.ShareEntry{Name: "ahead", ID: "ahead", Priority: 1, Using: 1, Seen: now.Add(time.Hour).UnixMilli(), TTL: ttl.Milliseconds()}
	if _, err := st.PutShareTable(ctx, []work.ShareEntry{ahead, behind}, 0); err != nil {
		t.Fatal(err)
	}
	// renew heartbeats "behind" as its host would, with its own clock.
	renew := func() {
		t.Helper()
		for {
			tv, err := st.ShareTable(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tv.Val {
				if tv.Val[i].ID == "behind" {
					tv.Val[i].Seen++
				}
			}
			if _, err := st.PutShareTable(ctx, tv.Val, tv.Seq); errors.Is(err, work.ErrConflict) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	sh, err := work.NewShare(st, nil, work.ShareConfig{Name: "a", Priority: 1, Limit: 3, Every: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	present := func() map[string]bool {
		t.Helper()
		if _, err := sh.Round(ctx); err != nil {
			t.Fatal(err)
		}
		tv, err := st.ShareTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, e := range tv.Val {
			m[e.ID] = true
		}
		return m
	}
	start := time.Now()
	tick := time.NewTicker(ttl / 6)
	defer tick.Stop()
	var aheadGone time.Duration
	for time.Since(start) < 3*ttl || aheadGone == 0 {
		renew()
		p := present()
		if !p["behind"] {
			t.Fatalf("the renewed entry was dropped %v after the first round", time.Since(start))
		}
		if !p["ahead"] && aheadGone == 0 {
			aheadGone = time.Since(start)
		}
		if p["ahead"] && aheadGone != 0 {
			t.Fatal("the unrenewed entry came back")
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the unrenewed entry was never dropped")
		}
		<-tick.C
	}
	if aheadGone < ttl {
		t.Fatalf("the unrenewed entry was dropped %v after it was first seen, before its TTL %v", aheadGone, ttl)
	}

	// "behind" stops being renewed: dropped once its TTL has passed.
	renew()
	stopped := time.Now()
	testwait.For(t, "the entry no longer renewed to be dropped", func() bool { return !present()["behind"] })
	if since := time.Since(stopped); since < ttl {
		t.Fatalf("dropped %v after its last renewal, before its TTL %v", since, ttl)
	}
}

// TestShareRoundDeadline: a round against a store that never answers (its
// requests swallowed, as by a hung server) ends by its deadline,
// min(Every, TTL/2) but at least a second, rather than after the store
// client's own retries (20 s here).
func TestShareRoundDeadline(t *testing.T) {
	t.Parallel()
	e := testnats.Server(t, testnats.Options{})
	silent := testnats.Conn(t, e)
	if _, err := silent.Subscribe(">", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, e)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	st, err := work.NewStore(c, "src")
	if err != nil {
		t.Fatal(err)
	}
	const every = time.Second
	sh, err := work.NewShare(st, nil, work.ShareConfig{Name: "a", Limit: 2, Every: every})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := sh.Round(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("round against a silent store: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > every+time.Second {
		t.Fatalf("the round took %v, its deadline is %v", d, every)
	}
}

// (Was: a share entry with a negative Using, or Usings whose sum overflowed, lowered what the others were counted as holding: a newcomer grew into connections another process still held, and the processes together held more than the limit.)
func TestShareCountsOthersWithinTheLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		using []int // the Using of the entries a broken or hostile writer added
	}{
		{"negative using", []int{-4}},
		{"usings that overflow the sum", []int{math.MaxInt, math.MaxInt}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := shareStore(t)
			holder, err := work.NewShare(st, nil, work.ShareConfig{Name: "holder", Priority: 1, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Round(ctx); err != nil || holder.Using() != 4 {
				t.Fatalf("holder alone: %v, using %d; want 4", err, holder.Using())
			}
			tbl, err := st.ShareTable(ctx)
			if err != nil {
				t.Fatal(err)
			}
			es := tbl.Val
			for i, u := range c.using {
				id := fmt.Sprintf("bogus%d", i)
				es = append(es, work.ShareEntry{Name: id, ID: id, Using: u, Seen: time.Now().UnixMilli(), TTL: time.Hour.Milliseconds()})
			}
			if _, err := st.PutShareTable(ctx, es, tbl.Seq); err != nil {
				t.Fatal(err)
			}
			pool := sharePool(t, shareServer(t, 100), time.Hour)
			sh, err := work.NewShare(st, pool, work.ShareConfig{Name: "newcomer", Priority: 1, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			// The holder still holds all 4: the newcomer is granted 2 but
			// may grow into none of them until the holder gives them back.
			if res, err := sh.Round(ctx); err != nil || res.Granted != 2 || sh.Using() != 0 || pool.Stats().Size != 0 {
				t.Fatalf("newcomer's round beside a holder of all 4: %+v %v, using %d, pool size %d; want granted 2, using 0, pool size 0",
					res, err, sh.Using(), pool.Stats().Size)
			}
		})
	}
}

// An entry's ttl_ms counts as at most ShareTTLMax: an entry no longer
// renewed leaves the table, and its connections go to the others, once
// ShareTTLMax has passed (by the participant's clock, moved here), not
// before, whatever TTL it claims.
// (Was: ttl_ms was read as written: an entry claiming ten years kept a dead participant's connections from the others for ten years, and one near math.MaxInt64 overflowed to a negative TTL that dropped the entry, live or not, at once.)
func TestShareBoundsEntryTTL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		ttl  int64 // the entry's ttl_ms
	}{
		{"ten years", (10 * 365 * 24 * time.Hour).Milliseconds()},
		{"math.MaxInt64", math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := shareStore(t)
			start := time.Now()
			pinned := work.ShareEntry{Name: "pinned", ID: "pinned", Priority: 1, Using: 2, Seen: start.UnixMilli(), TTL: c.ttl}
			if _, err := st.PutShareTable(ctx, []work.ShareEntry{pinned}, 0); err != nil {
				t.Fatal(err)
			}
			sh, err := work.NewShare(st, nil, work.ShareConfig{Name: "a", Priority: 1, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			at := start // Round runs on this goroutine only
			work.SetShareClock(sh, func() time.Time { return at })
			round := func(when string, wantPinned bool, wantUsing int) {
				t.Helper()
				if _, err := sh.Round(ctx); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				tv, err := st.ShareTable(ctx)
				if err != nil {
					t.Fatal(err)
				}
				present := slices.ContainsFunc(tv.Val, func(e work.ShareEntry) bool { return e.ID == "pinned" })
				if present != wantPinned || sh.Using() != wantUsing {
					t.Fatalf("%s: entry in the table %v, our using %d; want %v, %d (table %+v)", when, present, sh.Using(), wantPinned, wantUsing, tv.Val)
				}
			}
			round("first seen", true, 2)
			at = start.Add(work.ShareTTLMax)
			round("ShareTTLMax after it was first seen", true, 2)
			at = start.Add(work.ShareTTLMax + time.Millisecond)
			round("past ShareTTLMax", false, 4)
		})
	}
}
