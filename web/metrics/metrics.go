// Package metrics exports every part of a switchyard process to Prometheus.
//
// The parts themselves (persist/server, persist, placement, forward, nntp,
// work, usenet, events) do not import Prometheus: they keep atomic counters behind
// Stats snapshots, or call a small observer hook, and the collectors here
// read those snapshots at scrape time or feed histograms from the hooks.
// A process makes one Registry, adds each part it runs, and mounts Handler
// on /metrics.
//
// Labels are bounded by construction: commands, codes, states, reasons,
// server ids, peer and pool names and roles from the configuration. Scope,
// stream, key and group names never become labels.
package metrics

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace is the first word of every metric name.
const Namespace = "switchyard"

// Registry holds a process's metrics: the Go runtime's and process's, and
// those of every part added to it. Its methods are safe for concurrent use;
// parts are normally added while the process starts.
type Registry struct {
	reg *prometheus.Registry

	persist  *persistCollector
	watch    *watchCollector
	balancer *balancerCollector
	forward  *forwardCollector
	nntp     *nntpCollector
	work     *workCollector
	usenet   *usenetCollector
	events   *eventsCollector
}

// New returns a registry with the Go and process collectors and the
// collectors of every part, each exporting nothing until a part is added.
func New() *Registry {
	r := &Registry{
		reg:      prometheus.NewRegistry(),
		persist:  newPersistCollector(),
		watch:    &watchCollector{},
		balancer: &balancerCollector{},
		forward:  &forwardCollector{},
		nntp:     &nntpCollector{},
		work:     &workCollector{},
		usenet:   &usenetCollector{},
		events:   &eventsCollector{},
	}
	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.persist, r.watch, r.balancer, r.forward, r.nntp, r.work, r.usenet, r.events,
	)
	return r
}

// Registerer is where other parts register metrics of their own (such as
// NewznabRequests); what they register is served by Handler too.
func (r *Registry) Registerer() prometheus.Registerer { return r.reg }

// Gatherer reads everything registered, as Handler serves it.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the exposition format on GET.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// desc makes a metric description under Namespace.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
}

// sources is a list of parts added to a collector.
type sources[T any] struct {
	mu   sync.Mutex // protects list
	list []T
}

func (s *sources[T]) add(v T) {
	s.mu.Lock()
	s.list = append(s.list, v)
	s.mu.Unlock()
}

func (s *sources[T]) snapshot() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]T(nil), s.list...)
}

// describe sends every desc.
func describe(ch chan<- *prometheus.Desc, ds ...*prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
