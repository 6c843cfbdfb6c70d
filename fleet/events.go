package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/web/dashboard"
	"github.com/switchyard-dev/switchyard/web/eventsws"
	"github.com/switchyard-dev/switchyard/web/metrics"
)

// RegionDefault is the region a process serves when EventsConfig.Region
// is empty: one region, named for what it is.
const RegionDefault = "local"

// EventsConfig configures the events layer (docs/events.md).
type EventsConfig struct {
	// Region names this process's region: presence rows say where a user
	// is connected by it, and peers know it by it. "" means RegionDefault
	// (and no peers).
	Region string
	// Peers maps each other region's name to the URL its forward receiver
	// listens on (http://HOST:PORT). Empty: a region of its own.
	Peers map[string]string
	// ForwardListen is the host:port this region's forward receiver
	// listens on for its peers' batches. Required with Peers.
	ForwardListen string
	// Secrets maps every region's name (this one's and each peer's) to
	// the secret it signs its batches with: the same map in every region.
	// Required with Peers.
	Secrets map[string][]byte
	// Window is the coalescing window of this region's router: one
	// delivery per (subscription, subject) per window. Zero means
	// events.CoalesceWindowDefault (250 ms, the seed system's);
	// events.NoCoalescing delivers each change at once.
	Window time.Duration
}

// minForwardSecret is the shortest signing secret a region accepts.
const minForwardSecret = 32

func (c EventsConfig) validate() error {
	if c.Window < 0 && c.Window != events.NoCoalescing {
		return fmt.Errorf("fleet: Events.Window %v is negative (events.NoCoalescing turns the window off)", c.Window)
	}
	if len(c.Peers) == 0 {
		if c.ForwardListen != "" {
			return errors.New("fleet: Events.ForwardListen without Peers")
		}
		return nil
	}
	if c.Region == "" {
		return errors.New("fleet: Events.Peers needs Events.Region: the name the peers know this region by")
	}
	if c.ForwardListen == "" {
		return errors.New("fleet: Events.Peers needs Events.ForwardListen")
	}
	for _, name := range append(slices.Sorted(maps.Keys(c.Peers)), c.Region) {
		if name == c.Region && c.Peers[name] != "" {
			return fmt.Errorf("fleet: region %q is among its own peers", name)
		}
		if len(c.Secrets[name]) < minForwardSecret {
			return fmt.Errorf("fleet: Events.Secrets: region %q has no secret of at least %d bytes", name, minForwardSecret)
		}
	}
	return nil
}

// startEvents runs the events router over the API's persist client, with
// durable subscriptions (rows in scope events, stream subscriptions), and
// mounts its WebSocket API (/ws/events, /ws/events.js, /events), with
// presence rows for the connections. Authorization is the watch
// gateway's: the bus's users under NATS.AuthDir, open otherwise.
func (f *Fleet) startEvents(ctx context.Context) error {
	if f.http == nil || !f.cfg.HTTP.Events {
		return nil
	}
	authz, c, err := f.gatewayParts(ctx)
	if err != nil {
		return err
	}
	log := lifecycle.Logger(f.log, "events")
	rcfg := events.RouterConfig{Client: c, Logger: log, Durable: &events.DurableConfig{}, Coalesce: f.cfg.Events.Window}
	var fw *forwardParts
	if len(f.cfg.Events.Peers) > 0 {
		if fw, err = f.startForward(ctx); err != nil {
			return err
		}
		rcfg.Region = &events.RegionConfig{Self: f.cfg.Events.Region, Peers: fw.peers, Push: fw.queue.Push}
		f.forward = fw
	}
	r, err := events.NewRouter(rcfg)
	if err != nil {
		return err
	}
	if fw != nil {
		fw.router.Store(r)
	}
	if err := f.start(ctx, "events router", r); err != nil {
		return err
	}
	if fw != nil {
		// Peers' batches are taken once the router runs; stopped before it.
		if err := fw.listen(ctx, f, r); err != nil {
			return err
		}
		f.http.parts.setPeers(func() []dashboard.Peer { return fw.dashboard(f.cfg.Events, r) })
	}
	region := f.cfg.Events.Region
	if region == "" {
		region = RegionDefault
	}
	p, err := events.NewPresence(events.PresenceConfig{Region: region, Store: events.PersistPresence{Client: c}, Logger: log})
	if err != nil {
		return err
	}
	// Presence refreshes its rows by itself from NewPresence on; stopping
	// it ends that and cancels the delayed leaves (their rows expire by
	// TTL).
	if err := f.start(ctx, "presence", lifecycle.Funcs("presence", func(context.Context) error { return nil },
		func(context.Context) error { p.Close(); return nil })); err != nil {
		return err
	}
	gw, err := eventsws.New(eventsws.Config{Router: r, Authorizer: authz, Presence: p, Hosts: f.http.hosts, Logger: log})
	if err != nil {
		return err
	}
	if err := f.start(ctx, "events gateway", gw); err != nil {
		return err
	}
	f.http.addMetrics(func(m *metrics.Registry) {
		m.AddEventsRouter(r)
		m.AddEventsGaps(gw)
		m.AddEventsPresence(p)
	})
	gw.Mount(f.http)
	return nil
}
