package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/events"
)

// eventsCollector exports the events routers' counters, summed; the gap
// markers by reason (the closed set events.Reasons), every reason present
// from the first scrape so a rate over it starts at zero.
type eventsCollector struct {
	routers  sources[*events.Router]
	extra    sources[EventsGapper]
	presence sources[*events.Presence]
}

// EventsGapper is a part beside the router that leaves gap markers of its
// own (the WebSocket gateway's queue overflows): its counts by reason.
type EventsGapper interface {
	EventsGaps() map[events.Reason]uint64
}

var (
	eventsChanges    = desc("events_changes_total", "Changes the events routers read from the persist change feeds.")
	eventsDelivered  = desc("events_deliveries_total", "Events delivered to subscriptions.")
	eventsCoalesced  = desc("events_coalesced_total", "Changes folded into another delivery of their subscription and subject.")
	eventsRateDrops  = desc("events_rate_dropped_total", "Events dropped under a delivery_rate_limit gap.")
	eventsGaps       = desc("events_gaps_total", "Gap markers delivered, by reason.", "reason")
	eventsSubs       = desc("events_subscriptions", "Subscriptions now.")
	eventsSessions   = desc("events_sessions", "Sessions (sockets) now.")
	eventsWatchers   = desc("events_stream_watchers", "Streams the routers watch now.")
	eventsAcks       = desc("events_acks_total", "Single deliveries acked.")
	eventsRedeliver  = desc("events_redeliveries_total", "Single deliveries handed out again after their lease ran out unacked.")
	eventsLeases     = desc("events_single_leases", "Single deliveries in flight now: handed out under a lease, not acked yet.")
	eventsBacklog    = desc("events_single_backlog", "Entries of single subscriptions waiting behind their delivery in flight now (backlog_overflow markers included).")
	presenceNow      = desc("events_presence_present", "(user, app) pairs with a connection to this region now.")
	presenceConns    = desc("events_presence_connections", "Connections counted for presence now.")
	presenceWrites   = desc("events_presence_writes_total", "Presence rows written: first connections and refreshes.")
	presenceRemoves  = desc("events_presence_removes_total", "Presence rows removed by a last connection's delayed leave.")
	presenceReloads  = desc("events_presence_reloads_total", "Delayed leaves called off by a connection coming back (a reload writes nothing).")
	presenceFailures = desc("events_presence_failures_total", "Presence row writes and removals the store refused.")
	presenceRefused  = desc("events_presence_refused_total", "Connections refused presence: their user had MaxPresenceApps other apps present here already.")
	regionEventsOut  = desc("events_region_events_out_total", "Event items sent to peer regions.")
	regionEventsIn   = desc("events_region_events_in_total", "Event items received from peer regions.")
	regionWatchesOut = desc("events_region_watches_out_total", "Watch items (add, drop, announcements) sent to peer regions.")
	regionNoWatch    = desc("events_region_nowatch_total", "Peer watches pruned on a peer's noWatch.")
	regionExpired    = desc("events_region_watches_expired_total", "Peer watches that expired unrenewed.")
	regionGapsOut    = desc("events_region_gap_markers_out_total", "Gap marker items sent to peers in place of shed or lost events.")
	regionRemote     = desc("events_region_remote_watches", "(anchor token, peer) pairs watched by peer regions now.")
	regionDelivOut   = desc("events_region_deliveries_out_total", "Delivery items of durable subscriptions sent to peer regions.")
	regionDelivIn    = desc("events_region_deliveries_in_total", "Delivery items received from peer regions.")
	regionNoSockOut  = desc("events_region_nosocket_answered_total", "Delivery items received for a user with no session here, answered noSocket.")
	regionNoSocket   = desc("events_region_nosocket_total", "(user, peer) pairs passed over on a peer's noSocket.")
	regionAcksOut    = desc("events_region_acks_out_total", "Acks of peers' single deliveries sent back to the region holding the lease.")
	regionAcksIn     = desc("events_region_acks_in_total", "Ack items from peers that settled a lease here.")
	regionAcksBad    = desc("events_region_acks_refused_total", "Ack items from peers for no delivery in flight here, or for one never handed to that peer.")
	regionRemoteBad  = desc("events_region_remote_refused_total", "Peers' announcements of a new anchor token refused: the peer watched MaxRemoteTokens here already.")
	regionEntriesBad = desc("events_region_remote_entries_refused_total", "Peers' single deliveries not handed to a session: the peer had MaxRemoteEntries remembered here already.")
	regionBumpsOut   = desc("events_region_bumps_out_total", "Bump items (presence, subscription) sent to peer regions.")
	regionBumpsIn    = desc("events_region_bumps_in_total", "Bump items received from peer regions.")
	eventsDescs      = []*prometheus.Desc{eventsChanges, eventsDelivered, eventsCoalesced, eventsRateDrops, eventsGaps, eventsSubs, eventsSessions, eventsWatchers,
		eventsAcks, eventsRedeliver, eventsLeases, eventsBacklog, presenceNow, presenceConns, presenceWrites, presenceRemoves, presenceReloads, presenceFailures, presenceRefused, regionEventsOut, regionEventsIn, regionWatchesOut, regionNoWatch, regionExpired, regionGapsOut, regionRemote,
		regionDelivOut, regionDelivIn, regionNoSockOut, regionNoSocket, regionAcksOut, regionAcksIn, regionAcksBad, regionRemoteBad, regionEntriesBad, regionBumpsOut, regionBumpsIn}
)

// AddEventsRouter exports r.
func (r *Registry) AddEventsRouter(er *events.Router) { r.events.routers.add(er) }

// AddEventsGaps exports the gap markers g leaves, under events_gaps_total.
func (r *Registry) AddEventsGaps(g EventsGapper) { r.events.extra.add(g) }

// AddEventsPresence exports p's counts under events_presence_*.
func (r *Registry) AddEventsPresence(p *events.Presence) { r.events.presence.add(p) }

func (c *eventsCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, eventsDescs...) }

func (c *eventsCollector) Collect(ch chan<- prometheus.Metric) {
	if ps := c.presence.snapshot(); len(ps) > 0 {
		var sum events.PresenceStats
		for _, p := range ps {
			s := p.Stats()
			sum.Present += s.Present
			sum.Connections += s.Connections
			sum.Writes += s.Writes
			sum.Removes += s.Removes
			sum.Reloads += s.Reloads
			sum.Failures += s.Failures
			sum.Refused += s.Refused
		}
		gauge(ch, presenceNow, float64(sum.Present))
		gauge(ch, presenceConns, float64(sum.Connections))
		counter(ch, presenceWrites, float64(sum.Writes))
		counter(ch, presenceRemoves, float64(sum.Removes))
		counter(ch, presenceReloads, float64(sum.Reloads))
		counter(ch, presenceFailures, float64(sum.Failures))
		counter(ch, presenceRefused, float64(sum.Refused))
	}
	rs := c.routers.snapshot()
	if len(rs) == 0 {
		return
	}
	var sum events.RouterStats
	var reg events.RegionStats
	gaps := map[events.Reason]uint64{}
	for _, r := range rs {
		g := r.RegionStats()
		reg.EventsOut += g.EventsOut
		reg.EventsIn += g.EventsIn
		reg.WatchesOut += g.WatchesOut
		reg.NoWatch += g.NoWatch
		reg.Expired += g.Expired
		reg.GapMarkers += g.GapMarkers
		reg.Remote += g.Remote
		reg.DeliveriesOut += g.DeliveriesOut
		reg.DeliveriesIn += g.DeliveriesIn
		reg.NoSocketOut += g.NoSocketOut
		reg.NoSocket += g.NoSocket
		reg.AcksOut += g.AcksOut
		reg.AcksIn += g.AcksIn
		reg.AcksRefused += g.AcksRefused
		reg.RemoteRefused += g.RemoteRefused
		reg.RemoteEntriesRefused += g.RemoteEntriesRefused
		reg.BumpsOut += g.BumpsOut
		reg.BumpsIn += g.BumpsIn
		s := r.Stats()
		sum.Changes += s.Changes
		sum.Deliveries += s.Deliveries
		sum.Coalesced += s.Coalesced
		sum.RateDrops += s.RateDrops
		sum.Acks += s.Acks
		sum.Redelivered += s.Redelivered
		sum.Subs += s.Subs
		sum.Sessions += s.Sessions
		sum.Watches += s.Watches
		sum.Leases += s.Leases
		sum.Backlog += s.Backlog
		for k, v := range s.Gaps {
			gaps[k] += v
		}
	}
	for _, g := range c.extra.snapshot() {
		for k, v := range g.EventsGaps() {
			gaps[k] += v
		}
	}
	counter(ch, eventsChanges, float64(sum.Changes))
	counter(ch, eventsDelivered, float64(sum.Deliveries))
	counter(ch, eventsCoalesced, float64(sum.Coalesced))
	counter(ch, eventsRateDrops, float64(sum.RateDrops))
	for _, reason := range events.Reasons {
		counter(ch, eventsGaps, float64(gaps[reason]), string(reason))
	}
	gauge(ch, eventsSubs, float64(sum.Subs))
	gauge(ch, eventsSessions, float64(sum.Sessions))
	gauge(ch, eventsWatchers, float64(sum.Watches))
	counter(ch, eventsAcks, float64(sum.Acks))
	counter(ch, eventsRedeliver, float64(sum.Redelivered))
	gauge(ch, eventsLeases, float64(sum.Leases))
	gauge(ch, eventsBacklog, float64(sum.Backlog))
	counter(ch, regionEventsOut, float64(reg.EventsOut))
	counter(ch, regionEventsIn, float64(reg.EventsIn))
	counter(ch, regionWatchesOut, float64(reg.WatchesOut))
	counter(ch, regionNoWatch, float64(reg.NoWatch))
	counter(ch, regionExpired, float64(reg.Expired))
	counter(ch, regionGapsOut, float64(reg.GapMarkers))
	gauge(ch, regionRemote, float64(reg.Remote))
	counter(ch, regionDelivOut, float64(reg.DeliveriesOut))
	counter(ch, regionDelivIn, float64(reg.DeliveriesIn))
	counter(ch, regionNoSockOut, float64(reg.NoSocketOut))
	counter(ch, regionNoSocket, float64(reg.NoSocket))
	counter(ch, regionAcksOut, float64(reg.AcksOut))
	counter(ch, regionAcksIn, float64(reg.AcksIn))
	counter(ch, regionAcksBad, float64(reg.AcksRefused))
	counter(ch, regionRemoteBad, float64(reg.RemoteRefused))
	counter(ch, regionEntriesBad, float64(reg.RemoteEntriesRefused))
	counter(ch, regionBumpsOut, float64(reg.BumpsOut))
	counter(ch, regionBumpsIn, float64(reg.BumpsIn))
}
