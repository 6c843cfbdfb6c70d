package persist_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// TestPipelineBatchWithinPayloadEscapes: a pipeline cuts its batches by an
// upper bound of each set's bytes, and the setMany body writes keys, msgIDs
// and headers JSON-escaped ('&', '<' and '>' take 6 bytes each). Counted
// at their raw length, a batch cut just under the max payload was over it
// on the wire, and every set of it failed too-large, though each fits
// alone (found by an audit).
func TestPipelineBatchWithinPayloadEscapes(t *testing.T) {
	t.Parallel()
	h, hold, p, first := heldPipeline(t, "escaped", persist.PipelineConfig{MaxPending: 4096, MaxRequests: 1})
	ctx := context.Background()

	// A URL-like header value with many '&' (each 6 bytes once escaped).
	// Sized so that MaxBatch (1,000) of them fill the max payload by the
	// estimate.
	limit := int(h.Conn().MaxPayload())
	url := "https://example.com/q?" + strings.Repeat("a=1&", limit/8000)
	value := make([]byte, limit/2000)
	per := 96 + len(value) + len("url") + len(url) + 8 // the pipeline's estimate
	n := min((limit-1024)/per, persist.PipelineMaxBatchDefault)
	fs := make([]*persist.SetFuture, n)
	for i := range fs {
		fs[i] = p.Set(ctx, value, persist.SetOptions{Headers: map[string]string{"url": url}})
	}
	t.Logf("n=%d limit=%d per=%d", n, limit, per)
	hold.open()
	if _, err := first.Result(); err != nil {
		t.Fatalf("first set: %v", err)
	}
	failed := 0
	var firstErr error
	for _, f := range fs {
		if _, err := f.Result(); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d pipelined sets failed (each alone is %d bytes, far under the max payload of %d): %v", failed, n, per, limit, firstErr)
	}
	// Each of them alone is fine.
	if _, err := h.stream("escaped").Set(ctx, value, persist.SetOptions{Headers: map[string]string{"url": url}}); err != nil {
		t.Fatalf("the same set alone: %v", err)
	}
}

// TestPipelineBatchWithinPayloadLongName: the room kept for the request's
// NATS headers counts the stream's name, which travels in Sy-Stream and
// may be MaxStreamNameBytes (4,000) long. With 1,024 bytes kept and a name
// of 2,000, two sets that each fit alone were batched into a request over
// the max payload, and both failed too-large.
func TestPipelineBatchWithinPayloadLongName(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("n", 2000) // MaxStreamNameBytes is 4,000
	h, hold, p, first := heldPipeline(t, name, persist.PipelineConfig{MaxRequests: 1})
	ctx := context.Background()

	limit := int(h.Conn().MaxPayload())
	value := make([]byte, (limit-1024)/2-96) // two fill the batch by the estimate
	a := p.Set(ctx, value, persist.SetOptions{})
	b := p.Set(ctx, value, persist.SetOptions{})
	hold.open()
	if _, err := first.Result(); err != nil {
		t.Fatalf("first set: %v", err)
	}
	for i, f := range []*persist.SetFuture{a, b} {
		if _, err := f.Result(); err != nil {
			t.Errorf("pipelined set %d of %d bytes (max payload %d): %s", i, len(value), limit, persist.CodeOf(err))
		}
	}
	if _, err := h.stream(name).Set(ctx, value, persist.SetOptions{}); err != nil {
		t.Fatalf("the same set alone: %s", persist.CodeOf(err))
	}
}

// heldPipeline is a pipeline on stream name whose first set's commit the
// server holds (until hold.open), so its one request stays out and every
// later set queues for the next batch.
func heldPipeline(t *testing.T, name string, cfg persist.PipelineConfig) (*harness, *commitGate, *persist.Pipeline, *persist.SetFuture) {
	t.Helper()
	hold := &commitGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *server.Config) { c.Observer = hold })
	t.Cleanup(hold.open)
	// A batch near the max payload takes seconds under the race detector
	// on a loaded machine: more than the default request timeout, which
	// this test does not measure.
	c, err := persist.NewClient(persist.ClientConfig{Conn: h.Conn(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p, err := c.Stream(h.scope, name).Pipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	hold.armed.Store(true)
	first := p.Set(context.Background(), []byte("first"), persist.SetOptions{})
	<-hold.entered
	return h, hold, p, first
}
