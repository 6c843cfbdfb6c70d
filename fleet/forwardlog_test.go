package fleet

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// recordHandler keeps every record's message and attributes, those its
// logger was made With included, as "key=value" strings.
type recordHandler struct {
	mu    *sync.Mutex
	recs  *[][]string
	attrs []string
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	line := append([]string{"msg=" + r.Message}, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		line = append(line, a.Key+"="+a.Value.String())
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, line)
	return nil
}

func (h recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := h
	n.attrs = append([]string(nil), h.attrs...)
	for _, a := range as {
		n.attrs = append(n.attrs, a.Key+"="+a.Value.String())
	}
	return n
}

func (h recordHandler) WithGroup(string) slog.Handler { return h }

// A region's forward queue logs as role forward, once.
// (Was: its logger was the events layer's, and its lines said
// role=events role=forward: a duplicate key in JSON logs.)
func TestForwardLogsOneRole(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var recs [][]string
	ctx := context.Background()
	f, err := Start(ctx, Config{
		Logger:  slog.New(recordHandler{mu: &mu, recs: &recs}),
		NATS:    NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist: PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: t.TempDir()},
		HTTP:    HTTPConfig{Addr: "127.0.0.1:0", Events: true},
		Events: EventsConfig{
			// Nothing listens on port 1: every batch to b is lost.
			Region: "a", Peers: map[string]string{"b": "http://127.0.0.1:1"}, ForwardListen: "127.0.0.1:0",
			Secrets: map[string][]byte{"a": []byte(strings.Repeat("a", 32)), "b": []byte(strings.Repeat("b", 32))},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop(ctx) })
	f.forward.queue.Push("b", &forward.Bump{UserID: 1, Generation: 1, Scope: "presence"})
	var lost []string
	testwait.For(t, "the lost batch logged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if r[0] == "msg=forward: batch lost" {
				lost = r
				return true
			}
		}
		return false
	})
	roles := 0
	for _, a := range lost {
		if strings.HasPrefix(a, "role=") {
			roles++
			if a != "role=forward" {
				t.Errorf("the queue's line says %s, want role=forward", a)
			}
		}
	}
	if roles != 1 {
		t.Fatalf("the queue's line %q has %d role attributes, want 1", lost, roles)
	}
}
