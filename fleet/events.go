package fleet

import (
	"context"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/web/eventsws"
	"github.com/switchyard-dev/switchyard/web/metrics"
)

// RegionDefault is the region a process serves when EventsConfig.Region
// is empty: one region, named for what it is.
const RegionDefault = "local"

// EventsConfig configures the events layer (docs/events.md).
type EventsConfig struct {
	// Region names this process's region: presence rows say where a user
	// is connected by it. "" means RegionDefault.
	Region string
}

// startEvents runs the events router over the API's persist client and
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
	r, err := events.NewRouter(events.RouterConfig{Client: c, Logger: log})
	if err != nil {
		return err
	}
	if err := f.start(ctx, "events router", r); err != nil {
		return err
	}
	region := f.cfg.Events.Region
	if region == "" {
		region = RegionDefault
	}
	p, err := events.NewPresence(events.PresenceConfig{Region: region, Store: events.PersistPresence{Client: c}, Logger: log})
	if err != nil {
		return err
	}
	// Presence has no goroutine of its own to start; stopping it cancels
	// the delayed leaves (their rows expire by TTL).
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
	})
	gw.Mount(f.http)
	return nil
}
