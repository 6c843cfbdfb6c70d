package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/web/dashboard"
	"github.com/switchyard-dev/switchyard/web/metrics"
)

// forwardParts are a region's links to its peers: a signed sender and the
// queue in front of it (started before the router, which pushes to the
// queue), and the receiver of the peers' batches (listening once the
// router runs).
type forwardParts struct {
	peers  []string
	queue  *forward.PeerQueue
	router atomic.Pointer[events.Router] // set once made: the sender's replies and the receiver's items go to it
	log    *slog.Logger
	ln     net.Listener // the receiver's, once it listens
}

// startForward starts the sender and the queue to Events.Peers. Its parts
// log as role forward; the queue names its role itself, so it is given
// the fleet's logger (a second "role" would be a duplicate key).
func (f *Fleet) startForward(ctx context.Context) (*forwardParts, error) {
	ec := f.cfg.Events
	log := lifecycle.Logger(f.log, "forward")
	fw := &forwardParts{peers: slices.Sorted(maps.Keys(ec.Peers)), log: log}
	sender, err := forward.NewSender(forward.SenderConfig{
		Self: ec.Region, Secret: ec.Secrets[ec.Region], Peers: ec.Peers, Logger: log,
		OnReply: func(peer string, rep forward.Reply) {
			if r := fw.router.Load(); r != nil {
				r.OnReply(peer, rep)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	// What the queue sheds or loses becomes gap markers: per stream for
	// events, per subscription for broadcast deliveries; a `single`
	// delivery stays leased at home and comes again.
	losses := events.NewQueueLosses(forward.GapConfig{Logger: log})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From: ec.Region, Send: sender.Send, Logger: f.log,
		OnOverflow: losses.Overflow, OnTaken: losses.Taken, OnLost: losses.Lost,
	})
	if err != nil {
		return nil, err
	}
	// Stopped in reverse: the queue drains through the sender, then the
	// sender stops.
	if err := f.start(ctx, "forward sender", sender); err != nil {
		return nil, err
	}
	if err := f.start(ctx, "forward queue", q); err != nil {
		return nil, err
	}
	fw.queue = q
	if f.http != nil {
		f.http.addMetrics(func(m *metrics.Registry) {
			m.AddForwardQueue(q, fw.peers)
			m.AddForwardGaps(losses)
			m.AddForwardSender(sender)
		})
	}
	return fw, nil
}

// listen serves the peers' batches on Events.ForwardListen, into r.
func (fw *forwardParts) listen(ctx context.Context, f *Fleet, r *events.Router) error {
	ec := f.cfg.Events
	peerSecrets := make(map[string][]byte, len(fw.peers))
	for _, p := range fw.peers {
		peerSecrets[p] = ec.Secrets[p]
	}
	rc, err := forward.NewReceiver(forward.ReceiverConfig{Self: ec.Region, Peers: peerSecrets, Sink: r.Sink(), Logger: fw.log})
	if err != nil {
		return err
	}
	srv := forward.NewServer(rc, forward.ServerConfig{})
	var served chan error
	start := func(context.Context) error {
		ln, err := net.Listen("tcp", ec.ForwardListen)
		if err != nil {
			return fmt.Errorf("forward receiver: %w", err)
		}
		fw.ln = ln
		served = make(chan error, 1)
		go func() {
			err := srv.Serve(ln)
			if !errors.Is(err, http.ErrServerClosed) {
				// The listener failed: the peers' batches are refused
				// from now on, and nothing here would listen again.
				f.roleEnded("forward receiver", fmt.Errorf("serve %s: %w", ec.ForwardListen, err))
			}
			served <- err
		}()
		return nil
	}
	stop := func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	if err := f.start(ctx, "forward receiver", lifecycle.Funcs("forward receiver", start, stop)); err != nil {
		return err
	}
	if f.http != nil {
		f.http.addMetrics(func(m *metrics.Registry) { m.AddForwardReceiver(rc) })
	}
	return nil
}

// dashboard is the dashboard's view of the peers: the queue to each, and
// the tokens each watches here.
func (fw *forwardParts) dashboard(ec EventsConfig, r *events.Router) []dashboard.Peer {
	rs := r.RegionStats()
	out := make([]dashboard.Peer, 0, len(fw.peers))
	for _, p := range fw.peers {
		st := fw.queue.PeerStats(p)
		out = append(out, dashboard.Peer{
			Region: ec.Region, Name: p, URL: ec.Peers[p], Queued: st.HeldItems, InFlight: st.InFlightBatches,
			Batches: st.Batches, Items: st.SentItems, Shed: st.Shed, Lost: st.LostBatches, Watches: rs.RemoteByPeer[p],
		})
	}
	return out
}
