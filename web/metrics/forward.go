package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/forward"
)

// forwardCollector exports forward queues per configured peer, gap
// policies, senders and receivers (rejections by reason).
type forwardCollector struct {
	queues    sources[peerQueue]
	gaps      sources[GapCounter]
	senders   sources[*forward.Sender]
	receivers sources[*forward.Receiver]
}

type peerQueue struct {
	q     *forward.PeerQueue
	peers []string
}

var (
	fwdQueuedItems = desc("forward_queued_items", "Items held for the peer now, waiting for a batch.", "peer")
	fwdQueuedBytes = desc("forward_queued_bytes", "Encoded bytes of the items held for the peer.", "peer")
	fwdInFlight    = desc("forward_in_flight_batches", "Batches sent to the peer and not yet answered.", "peer")
	fwdPushed      = desc("forward_pushed_items_total", "Items pushed for the peer.", "peer")
	fwdBatches     = desc("forward_batches_sent_total", "Batches handed to the transport for the peer.", "peer")
	fwdSentItems   = desc("forward_sent_items_total", "Items in those batches.", "peer")
	fwdSentBytes   = desc("forward_sent_bytes_total", "Body bytes of the batches whose send returned.", "peer")
	fwdDropped     = desc("forward_dropped_items_total", "Items shed by the peer's bounds (handed to the overflow policy).", "peer")
	fwdFailures    = desc("forward_send_failures_total", "Batches whose send failed: lost, never resent (their events become gap markers, sent once the peer takes batches again; failures back off to one attempt per 5 s).", "peer")
	fwdLostItems   = desc("forward_lost_items_total", "Items in the failed batches.", "peer")
	fwdOversized   = desc("forward_oversized_items_total", "Items refused for encoding to more than the item limit.", "peer")
	fwdInvalid     = desc("forward_invalid_items_total", "Items refused at push because the peer's receiver would refuse them (forward.CheckItem).", "peer")

	fwdMarkers     = desc("forward_gap_markers_total", "Gap markers made for shed or lost deliveries.")
	fwdMarkersShed = desc("forward_gap_markers_shed_total", "Gap markers shed themselves (nothing else was left to shed).")

	fwdBadReplies = desc("forward_sender_bad_replies_total", "Batches a peer accepted (2xx) whose reply could not be read or decoded: the batch was delivered, its reply (noSocket, noWatch) lost.")

	fwdRecvBatches = desc("forward_receiver_batches_total", "Batches the receiver accepted and handed to its sink.")
	fwdRecvItems   = desc("forward_receiver_items_total", "Items in the accepted batches.")
	fwdRecvRejects = desc("forward_receiver_rejections_total", "Batches the receiver refused, by reason.", "reason")
	fwdRecvSelf    = desc("forward_receiver_ignored_total", "Batches signed as this region itself, answered and dropped: another region runs under the same name, or a peer URL points back here.")

	fwdDescs = []*prometheus.Desc{fwdQueuedItems, fwdQueuedBytes, fwdInFlight, fwdPushed, fwdBatches, fwdSentItems, fwdSentBytes, fwdDropped, fwdFailures, fwdLostItems, fwdOversized, fwdInvalid, fwdMarkers, fwdMarkersShed, fwdBadReplies, fwdRecvBatches, fwdRecvItems, fwdRecvRejects, fwdRecvSelf}
)

// AddForwardQueue exports q's counters for each of peers (the peer names of
// the configuration; a peer not listed is not exported).
func (r *Registry) AddForwardQueue(q *forward.PeerQueue, peers []string) {
	r.forward.queues.add(peerQueue{q, append([]string(nil), peers...)})
}

// GapCounter is what makes a forward queue's gap markers and counts them:
// a *forward.GapPolicy, or the events layer's QueueLosses built on one.
type GapCounter interface{ Stats() forward.GapStats }

// AddForwardGaps exports g's gap markers.
func (r *Registry) AddForwardGaps(g GapCounter) { r.forward.gaps.add(g) }

// AddForwardSender exports s's counters.
func (r *Registry) AddForwardSender(s *forward.Sender) { r.forward.senders.add(s) }

// AddForwardReceiver exports rc's accepted batches and rejections.
func (r *Registry) AddForwardReceiver(rc *forward.Receiver) { r.forward.receivers.add(rc) }

func (c *forwardCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, fwdDescs...) }

func (c *forwardCollector) Collect(ch chan<- prometheus.Metric) {
	for _, pq := range c.queues.snapshot() {
		for _, p := range pq.peers {
			s := pq.q.PeerStats(p)
			gauge(ch, fwdQueuedItems, float64(s.HeldItems), p)
			gauge(ch, fwdQueuedBytes, float64(s.HeldBytes), p)
			gauge(ch, fwdInFlight, float64(s.InFlightBatches), p)
			counter(ch, fwdPushed, float64(s.Pushed), p)
			counter(ch, fwdBatches, float64(s.Batches), p)
			counter(ch, fwdSentItems, float64(s.SentItems), p)
			counter(ch, fwdSentBytes, float64(s.SentBytes), p)
			counter(ch, fwdDropped, float64(s.Shed), p)
			counter(ch, fwdFailures, float64(s.LostBatches), p)
			counter(ch, fwdLostItems, float64(s.LostItems), p)
			counter(ch, fwdOversized, float64(s.Oversized), p)
			counter(ch, fwdInvalid, float64(s.Invalid), p)
		}
	}
	if gs := c.gaps.snapshot(); len(gs) > 0 {
		var markers, shed uint64
		for _, g := range gs {
			st := g.Stats()
			markers += st.Markers
			shed += st.MarkersShed
		}
		counter(ch, fwdMarkers, float64(markers))
		counter(ch, fwdMarkersShed, float64(shed))
	}
	if ss := c.senders.snapshot(); len(ss) > 0 {
		var bad uint64
		for _, s := range ss {
			bad += s.Stats().BadReplies
		}
		counter(ch, fwdBadReplies, float64(bad))
	}
	rs := c.receivers.snapshot()
	if len(rs) == 0 {
		return
	}
	var sum forward.ReceiverStats
	for _, r := range rs {
		st := r.Stats()
		sum.Accepted += st.Accepted
		sum.Items += st.Items
		sum.Ignored += st.Ignored
		sum.BadRequest += st.BadRequest
		sum.TooLarge += st.TooLarge
		sum.Forbidden += st.Forbidden
		sum.Replayed += st.Replayed
		sum.MethodDenied += st.MethodDenied
		sum.Stale += st.Stale
		sum.Abandoned += st.Abandoned
		sum.LengthRequired += st.LengthRequired
		sum.BusyPeer += st.BusyPeer
		sum.BusyTotal += st.BusyTotal
		sum.ReadTimeout += st.ReadTimeout
	}
	counter(ch, fwdRecvBatches, float64(sum.Accepted))
	counter(ch, fwdRecvItems, float64(sum.Items))
	counter(ch, fwdRecvSelf, float64(sum.Ignored))
	for _, r := range []struct {
		reason string
		n      uint64
	}{
		{"bad_request", sum.BadRequest}, {"too_large", sum.TooLarge}, {"forbidden", sum.Forbidden},
		{"replayed", sum.Replayed}, {"method", sum.MethodDenied}, {"stale", sum.Stale},
		{"abandoned", sum.Abandoned}, {"length_required", sum.LengthRequired},
		{"busy_peer", sum.BusyPeer}, {"busy_total", sum.BusyTotal}, {"read_timeout", sum.ReadTimeout},
	} {
		counter(ch, fwdRecvRejects, float64(r.n), r.reason)
	}
}
