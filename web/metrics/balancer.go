package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// BalancerStatser is what a balancer offers: *placement.Balancer.
type BalancerStatser interface {
	Stats() (answers, resubscribes uint64)
	ReplyRefused() uint64
}

// balancerCollector exports the balancers of the process, summed.
type balancerCollector struct {
	balancers sources[BalancerStatser]
}

var (
	balancerLookups = desc("balancer_lookups_total", "Placement lookups ({service}.{scope}.id) answered.")
	balancerResubs  = desc("balancer_resubscribes_total", "Times the balancer subscribed again after an error.")
	balancerRefused = desc("balancer_reply_refused_total", "Questions left unanswered: their reply subject was missing or not an inbox.")
)

// AddBalancer exports b's lookups.
func (r *Registry) AddBalancer(b BalancerStatser) { r.balancer.balancers.add(b) }

func (c *balancerCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, balancerLookups, balancerResubs, balancerRefused)
}

func (c *balancerCollector) Collect(ch chan<- prometheus.Metric) {
	bs := c.balancers.snapshot()
	if len(bs) == 0 {
		return
	}
	var answers, resubs, refused uint64
	for _, b := range bs {
		a, r := b.Stats()
		answers += a
		resubs += r
		refused += b.ReplyRefused()
	}
	counter(ch, balancerLookups, float64(answers))
	counter(ch, balancerResubs, float64(resubs))
	counter(ch, balancerRefused, float64(refused))
}
