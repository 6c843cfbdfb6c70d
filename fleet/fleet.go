// Package fleet composes switchyard's roles into one process: the bus
// (an embedded NATS server or a connection to an external one), persist
// servers, the balancer, the work pipeline (demo NNTP provider,
// coordinator, workers, settle sweep), the Newznab API and the HTTP side
// (metrics, health, dashboard, watch gateway).
//
// `switchyard up` runs all of them from one Config; each role command
// (persist serve, balancer, coordinator run, worker run, usenet serve) runs
// the one it names; the benchmarks and test helpers start what they
// measure. There is one start order, in Start, and the stop order is its
// reverse, under one deadline: a new role is added in one place.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/usenet/postproc"
)

// StopTimeoutDefault is how long Stop waits, all roles together, when the
// caller's context has no deadline: the workers' own bound
// (WorkerStopWaitDefault), the coordinator's chunks in flight and the
// persist servers' drain of the requests in flight all fit in it.
const StopTimeoutDefault = 30 * time.Second

// Config is what one process runs. The zero value runs nothing but the bus
// connection; each section turns a role on.
type Config struct {
	// Logger is the parent of every role's logger (each adds role=NAME).
	// Nil means slog.Default().
	Logger *slog.Logger

	// Service is the first subject token of the persist service. "" means
	// bus.DefaultService.
	Service string

	// NATS says where the bus is: embedded in this process or external.
	NATS NATSConfig

	// Persist runs persist servers and, with Balancer, the balancer.
	Persist PersistConfig

	// Balancer runs the balancer for Persist.IDs and Persist.Placement.
	Balancer bool

	// Work runs the work pipeline: coordinator shard and workers of one
	// source.
	Work WorkConfig

	// API serves the usenet indexer's Newznab API on the HTTP side.
	API APIConfig

	// HTTP is the process's HTTP side. Addr "" means none: the roles then
	// get no metrics hooks and pay nothing for them.
	HTTP HTTPConfig

	// Events configures the events layer that HTTP.Events serves.
	Events EventsConfig
}

// PersistConfig says which persist servers run here.
type PersistConfig struct {
	// IDs are all persist server ids, in the order every party agrees on.
	// The balancer answers with them.
	IDs []string

	// Serve are the ids of the servers this process runs (each one of
	// IDs). Empty means none.
	Serve []string

	// Placement maps a scope to its owner. Nil means placement.Rendezvous.
	Placement placement.Func

	// DataDir holds the SQLite files (shared by the servers of this
	// process).
	DataDir string

	// MaxOpenStreams is each server's open-stream cap (see
	// server.Config.MaxOpenStreams). Zero means
	// server.DefaultMaxOpenStreams(len(Serve)): the process's descriptor
	// and memory budgets shared by its servers.
	MaxOpenStreams int

	// MaxQueue and MaxQueueBytes bound the requests each server holds
	// (see server.Config). Zero means the server's defaults.
	MaxQueue      int
	MaxQueueBytes int64

	// Sync makes every stream of these servers synchronous=FULL (see
	// server.Config.Sync).
	Sync bool

	// ExclusiveFiles locks each stream file for as long as it is open
	// (see server.Config.ExclusiveFiles): for servers whose scopes do
	// not move to a server of another process on the same DataDir.
	ExclusiveFiles bool

	// Packs keeps new streams in that many shared files (see
	// server.Config.Packs); 0 gives each stream a file.
	Packs int

	// Archive and ArchiveEvery: see server.Config.
	Archive      string
	ArchiveEvery time.Duration

	// Tune, if set, adjusts each server's config before it is made (the
	// benchmarks' and tests' knobs: open-stream caps, queue sizes...).
	Tune func(*server.Config)

	// OnNew, if set, runs on each server after it is made and before it
	// starts: the place for a test's hooks set on the server itself,
	// which Tune's config cannot reach.
	OnNew func(*server.Server)
}

func (c *Config) withDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Service == "" {
		c.Service = bus.DefaultService
	}
	if c.Persist.Placement == nil {
		c.Persist.Placement = placement.Rendezvous
	}
	c.Work.withDefaults()
}

func (c *Config) validate() error {
	if (c.Balancer || len(c.Persist.Serve) > 0) && len(c.Persist.IDs) == 0 {
		return errors.New("fleet: persist servers and the balancer need Persist.IDs")
	}
	for _, id := range c.Persist.Serve {
		if !slices.Contains(c.Persist.IDs, id) {
			return fmt.Errorf("fleet: persist server %q is not one of the ids %q", id, c.Persist.IDs)
		}
	}
	if len(c.Persist.Serve) > 0 && c.Persist.DataDir == "" {
		return errors.New("fleet: persist servers need Persist.DataDir")
	}
	if c.API.Dir != "" && c.HTTP.Addr == "" {
		return errors.New("fleet: the Newznab API needs an HTTP side (HTTP.Addr)")
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	if len(c.Events.Peers) > 0 && !c.HTTP.Events {
		return errors.New("fleet: regions (Events.Peers) join the events API: it needs HTTP.Events")
	}
	if len(c.Events.Peers) > 0 && c.HTTP.Addr == "" {
		// Else the events layer, and the forward receiver with it, would
		// not start, and the peers' batches would be refused.
		return errors.New("fleet: regions (Events.Peers) need an HTTP side (HTTP.Addr)")
	}
	if err := c.Events.validate(); err != nil {
		return err
	}
	return c.Work.validate()
}

// Fleet is the running set of roles of one process.
type Fleet struct {
	cfg   Config
	log   *slog.Logger
	group lifecycle.Group

	nats    *embedded.Server // nil on an external bus
	busURL  string
	http    *httpSide // nil without an HTTP side
	servers []*server.Server
	work    workInfo
	api     apiInfo
	// apiPersist is the persist client the API and the watch gateway share.
	apiPersist *persist.Client
	postproc   *postproc.Processor // nil without one
	// beforeStop, a test hook, runs in Stop once /readyz says stopping and
	// before the first role stops.
	beforeStop func()
	// forward is the region's links to its peers, nil without peers.
	forward *forwardParts

	// quitting is set once Stop, or a failed Start's cleanup, begins: a
	// role ending from then on was stopped, it did not fail.
	quitting atomic.Bool
	ended    chan struct{} // closed by the first role that ended on its own (Done)
	endOnce  sync.Once
	endErr   error // why ended was closed; written once, before the close
}

// Start starts every role of cfg in the one order, the list below — the
// HTTP side (so /readyz answers while the rest come up), the dashboard, the
// bus, the persist servers, the balancer, the work pipeline (demo provider,
// coordinator, the workers' connections, settle sweep, workers), the
// Newznab API and the watch gateway — and returns once all serve. A role's
// bus connection is started before it (just before, but for the
// coordinator's, which the demo provider may open earlier to read the work
// state), so it closes after it. On
// failure it stops what started and returns the error, with a
// *CleanupError joined to it when that stop failed too. ctx bounds
// starting only: the roles run until Stop, or until one ends on its own
// (Done).
func Start(ctx context.Context, cfg Config) (_ *Fleet, err error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, ended: make(chan struct{})}
	f.group.Logger = cfg.Logger
	defer func() {
		if err != nil {
			f.quitting.Store(true)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeoutDefault)
			defer cancel()
			if serr := f.group.Stop(sctx); serr != nil {
				// The caller must hear of it: a command stopped by a
				// signal while starting exits 0 only when what had
				// started stopped cleanly.
				err = errors.Join(err, &CleanupError{Err: serr})
			}
		}
	}()
	// The one start order of every process; Stop is its reverse. A new
	// role is a new line here.
	steps := []struct {
		name  string
		start func(context.Context) error
	}{
		{"http", f.startHTTP},
		{"dashboard", f.startDashboard},
		{"nats", f.startBus},
		{"persist", f.startPersist},
		{"balancer", f.startBalancer},
		{"demo-nntp", f.startDemo},
		{"coordinator", f.startCoordinator},
		{"postprocess", f.startPostProcess},
		{"worker connections", f.startWorkerStores},
		{"settle", f.startSettle},
		{"workers", f.startWorkers},
		{"api", f.startAPI},
		{"watch", f.startWatch},
		{"events", f.startEvents},
	}
	for _, s := range steps {
		f.log.Debug("fleet: start", "step", s.name)
		if err := s.start(ctx); err != nil {
			return nil, err
		}
	}
	f.http.rolesStarted()
	return f, nil
}

// Stop stops every role in the reverse of the start order: the events
// gateway, presence and router, the watch gateway and the API, the workers (all at once, each finishing its range
// within Work.WorkerStopWait), the settle sweep, the coordinator, the demo
// provider, the balancer, the persist servers (answering the requests in
// flight), the bus connections, the NATS server, the dashboard and last the
// HTTP side. All share ctx's deadline (StopTimeoutDefault if it has none).
// The first error is returned, the others logged. Stop twice is a no-op.
// From its start /readyz answers 503 "roles: stopping" until the HTTP
// side, last, stops: a load balancer polling it takes the process out of
// rotation while the slower roles finish.
func (f *Fleet) Stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, StopTimeoutDefault)
		defer cancel()
	}
	f.quitting.Store(true)
	f.http.stopping()
	if f.beforeStop != nil {
		f.beforeStop()
	}
	return f.group.Stop(ctx)
}

// CleanupError is part of Start's error when stopping what had started
// failed too (a role's Stop returned an error): what the failed start
// leaves may not be clean (requests in flight answered unavailable, files
// not closed).
type CleanupError struct{ Err error }

func (e *CleanupError) Error() string { return "stop after a failed start: " + e.Err.Error() }

func (e *CleanupError) Unwrap() error { return e.Err }

// Done is closed when a role ended on its own after it started, while
// the process was to go on running it: a bus connection closed for good
// (its credentials refused on reconnecting), the forward receiver's
// listener that stopped serving, the search index's follower that failed,
// the HTTP side's server that stopped serving (its listener failed or was
// closed under it). The process then no longer does what its Config asks,
// and /readyz says so from then on (roles: failed; unless the HTTP side
// is what ended, and nothing answers): the caller stops the other roles
// (Stop) and exits non-zero, so that a supervisor restarts it. It may be
// closed already when Start returns. Roles ending because Stop stops them
// do not close it.
func (f *Fleet) Done() <-chan struct{} { return f.ended }

// Err is why Done was closed: the first role that ended on its own, by
// name, and its error. Nil while Done is open.
func (f *Fleet) Err() error {
	select {
	case <-f.ended:
		return f.endErr
	default:
		return nil
	}
}

// roleEnded records that role ended on its own with err, and logs it
// under the role's name, unless the fleet is stopping. The first one
// closes Done; the later ones are logged only.
func (f *Fleet) roleEnded(role string, err error) {
	if f.quitting.Load() {
		return
	}
	lifecycle.Logger(f.log, role).Error("role ended on its own: the process no longer runs it", "err", err)
	f.endOnce.Do(func() {
		f.endErr = fmt.Errorf("role %s ended: %w", role, err)
		close(f.ended)
	})
}

// Roles lists the running members in start order (what Stop stops, in
// reverse).
func (f *Fleet) Roles() []string { return f.group.Names() }

// NATS is the embedded NATS server, nil on an external bus.
func (f *Fleet) NATS() *embedded.Server { return f.nats }

// BusURL is the URL of the bus: the embedded server's client URL, or the
// external server a role connected to (credentials redacted).
func (f *Fleet) BusURL() string { return f.busURL }

// HTTPURL is the base URL of the HTTP side, "" without one.
func (f *Fleet) HTTPURL() string { return f.http.url() }

// Servers are the persist servers running here, in Persist.Serve order.
func (f *Fleet) Servers() []*server.Server { return f.servers }

// start makes svc a member: started now, stopped by Stop in reverse order.
func (f *Fleet) start(ctx context.Context, name string, svc lifecycle.Service) error {
	return f.group.Start(ctx, name, svc)
}
