package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/nntp"
)

// nntpCollector exports NNTP pools by the pool name the process gives them
// (such as "coordinator-1/1": a role, never a group).
type nntpCollector struct {
	pools sources[namedPool]
}

type namedPool struct {
	name  string
	p     *nntp.Pool
	grant func() int
}

var (
	nntpSize        = desc("nntp_pool_size", "Connections the pool may open (its size, set from its share).", "pool")
	nntpAllowed     = desc("nntp_pool_allowed", "The size, or less while the too-many-connections gate is down.", "pool")
	nntpConns       = desc("nntp_pool_connections", "Connections held towards the provider, by state.", "pool", "state")
	nntpGrant       = desc("nntp_pool_grant", "Connections the share table grants this process.", "pool")
	nntpGated       = desc("nntp_pool_gated", "1 while the pool backs off after a too-many-connections refusal.", "pool")
	nntpCommands    = desc("nntp_commands_total", "Commands sent on the pool's connections (setup included).", "pool")
	nntpErrors      = desc("nntp_errors_total", "Failed dials and connections closed broken.", "pool")
	nntpDials       = desc("nntp_dials_total", "Connections opened.", "pool")
	nntpBytes       = desc("nntp_read_bytes_total", "Bytes read from the provider (after TLS, before decompression).", "pool")
	nntpTooMany     = desc("nntp_too_many_connections_total", "Too-many-connections refusals (502 and the like): each lowers the gate for a while.", "pool")
	nntpWaits       = desc("nntp_pool_waits_total", "Acquisitions that waited for a free connection.", "pool")
	nntpWaitSeconds = desc("nntp_pool_wait_seconds_total", "Total time acquisitions waited.", "pool")
	nntpDescs       = []*prometheus.Desc{nntpSize, nntpAllowed, nntpConns, nntpGrant, nntpGated, nntpCommands, nntpErrors, nntpDials, nntpBytes, nntpTooMany, nntpWaits, nntpWaitSeconds}
)

// AddNNTPPool exports p under pool=name; grant, if not nil, reports the
// connections its share grants (work.Share.Granted).
func (r *Registry) AddNNTPPool(name string, p *nntp.Pool, grant func() int) {
	r.nntp.pools.add(namedPool{name, p, grant})
}

func (c *nntpCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, nntpDescs...) }

func (c *nntpCollector) Collect(ch chan<- prometheus.Metric) {
	for _, np := range c.pools.snapshot() {
		s, n := np.p.Stats(), np.name
		gauge(ch, nntpSize, float64(s.Size), n)
		gauge(ch, nntpAllowed, float64(s.Allowed), n)
		gauge(ch, nntpConns, float64(s.InUse), n, "in_use")
		gauge(ch, nntpConns, float64(s.Idle), n, "idle")
		gauge(ch, nntpConns, float64(s.Closing), n, "closing")
		if np.grant != nil {
			gauge(ch, nntpGrant, float64(np.grant()), n)
		}
		gated := 0.0
		if s.Gated {
			gated = 1
		}
		gauge(ch, nntpGated, gated, n)
		counter(ch, nntpCommands, float64(s.Commands), n)
		counter(ch, nntpErrors, float64(s.Errors), n)
		counter(ch, nntpDials, float64(s.Dials), n)
		counter(ch, nntpBytes, float64(s.BytesRead), n)
		counter(ch, nntpTooMany, float64(s.TooMany), n)
		counter(ch, nntpWaits, float64(s.Waits), n)
		counter(ch, nntpWaitSeconds, s.WaitTime.Seconds(), n)
	}
}
