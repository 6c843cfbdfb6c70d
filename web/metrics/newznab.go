package metrics

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// NewznabRequests registers on reg, and returns, the counter of the Newznab
// API's requests by function (the t= parameter) and code (NewznabCode: "ok"
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

// NewznabCode is the code label of a Newznab answer: "ok" for success
// (code 0), as the other request counters say, else the Newznab error code
// ("100", "429", ...).
func NewznabCode(code int) string {
	if code == 0 {
		return codeOK
	}
	return strconv.Itoa(code)
}
