package fleet

import (
	"context"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/web/metrics"
)

// startPersist starts the servers of Persist.Serve, each on a connection
// of its own (user server-ID), in order.
func (f *Fleet) startPersist(ctx context.Context) error {
	p := f.cfg.Persist
	for _, id := range p.Serve {
		nc, err := f.connect(ctx, "switchyard-persist-"+id, auth.RoleServer+"-"+id)
		if err != nil {
			return err
		}
		scfg := server.Config{
			Conn: nc, ID: id, IDs: p.IDs, Placement: p.Placement, Service: f.cfg.Service,
			DataDir: p.DataDir, Archive: p.Archive, ArchiveEvery: p.ArchiveEvery, Sync: p.Sync,
			Logger: f.log.With("persist_id", id), Observer: f.http.persistObserver(id),
			MaxOpenStreams: p.MaxOpenStreams, ExclusiveFiles: p.ExclusiveFiles, Packs: p.Packs,
			MaxQueue: p.MaxQueue, MaxQueueBytes: p.MaxQueueBytes,
		}
		if f.nats != nil {
			// The watchers of this process (events, the gateways) then
			// get its feed without the bus.
			if scfg.FeedInterest, err = f.nats.Interest(nc); err != nil {
				return err
			}
		}
		if scfg.MaxOpenStreams == 0 {
			scfg.MaxOpenStreams = server.DefaultMaxOpenStreams(len(p.Serve))
			if p.Packs > 0 {
				scfg.MaxOpenStreams = server.PackedMaxOpenStreamsDefault / max(1, len(p.Serve))
			}
		}
		if p.Tune != nil {
			p.Tune(&scfg)
		}
		srv, err := server.New(scfg)
		if err != nil {
			return err
		}
		if p.OnNew != nil {
			p.OnNew(srv)
		}
		if err := f.start(ctx, "persist-"+id, srv); err != nil {
			return err
		}
		f.servers = append(f.servers, srv)
		f.http.addPersistServer(id, srv)
	}
	return nil
}

// startBalancer starts the balancer of Persist.IDs (user balancer).
func (f *Fleet) startBalancer(ctx context.Context) error {
	if !f.cfg.Balancer {
		return nil
	}
	nc, err := f.connect(ctx, "switchyard-balancer", auth.RoleBalancer)
	if err != nil {
		return err
	}
	b, err := placement.NewBalancer(placement.BalancerConfig{
		Conn: nc, IDs: f.cfg.Persist.IDs, Placement: f.cfg.Persist.Placement, Service: f.cfg.Service,
		Logger: f.log,
	})
	if err != nil {
		return err
	}
	if err := f.start(ctx, "balancer", b); err != nil {
		return err
	}
	f.http.addMetrics(func(r *metrics.Registry) { r.AddBalancer(b) })
	return nil
}
