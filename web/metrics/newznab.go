package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// NewznabRequests registers on reg, and returns, the counter of the Newznab
// API's requests by function (the t= parameter) and code (the HTTP status,
// or the Newznab error code). The API's handler increments it; it must map
// a t= outside its known functions to "other", so that a client cannot
// make up label values.
func NewznabRequests(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "newznab_requests_total",
		Help: "Newznab API requests, by function and code.",
	}, []string{"function", "code"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("metrics: register newznab requests: %w", err)
	}
	return c, nil
}
