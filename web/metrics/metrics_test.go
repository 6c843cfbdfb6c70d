package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/work"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gather reads r and indexes the families by name.
func gather(t *testing.T, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value is the value of the series of family name with the given labels
// (name=value pairs); it fails the test when there is none.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	if fams[name] == nil {
		t.Fatalf("no family %s", name)
	}
	v, ok := lookup(fams, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// lookup is value without failing: false when the series is not there (yet).
func lookup(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if labelOf(m, labels[i]) != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// forbiddenLabels are the names whose values are unbounded.
var forbiddenLabels = []string{"scope", "stream", "key", "group", "subject"}

// checkLabels fails when a family carries a label named after an
// unbounded value.
func checkLabels(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, bad := range forbiddenLabels {
					if l.GetName() == bad {
						t.Errorf("%s has a %s label (%s)", name, bad, l.GetValue())
					}
				}
			}
		}
	}
}

// TestPersistMetrics: a real server's answers, commits and stats show up
// under its id, and a made-up command is counted as "other".
func TestPersistMetrics(t *testing.T) {
	t.Parallel()
	r := New()
	e, nc := testnats.Start(t)
	srv, err := server.New(server.Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: t.TempDir(), Observer: r.PersistObserver("0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	r.AddPersistServer("0", srv)
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: testnats.Conn(t, e), IDs: []string{"0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })

	c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	kv := c.KV("hub", "demo")
	for i := range 3 {
		if _, err := kv.Set(t.Context(), fmt.Sprintf("k%d", i), []byte("v"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Get(t.Context(), "missing"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	// A request whose answer would go elsewhere than an inbox is dropped
	// on arrival, before the request after it is answered.
	aimed := nats.NewMsg("persist.hub.api.0")
	aimed.Reply = "news.today"
	aimed.Header.Set(persist.HdrCmd, persist.CmdGet)
	aimed.Header.Set(persist.HdrStream, "demo")
	if err := nc.PublishMsg(aimed); err != nil {
		t.Fatal(err)
	}
	// A request whose caller gave up long ago is dropped when its turn
	// comes.
	late := nats.NewMsg("persist.hub.api.0")
	late.Reply = nats.NewInbox()
	late.Header.Set(persist.HdrCmd, persist.CmdGet)
	late.Header.Set(persist.HdrStream, "demo")
	late.Header.Set(persist.HdrSeq, "1")
	late.Header.Set(persist.HdrDeadline, "1")
	if err := nc.PublishMsg(late); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("persist.hub.api.0")
	m.Header.Set(persist.HdrCmd, "no-such-command")
	m.Header.Set(persist.HdrStream, "demo")
	if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	// A reply is counted (and timed) just after it is sent, so a reply may
	// reach this test before its count does: gather until every request is
	// in, then check the figures.
	var fams map[string]*dto.MetricFamily
	testwait.Until(t, "every request counted", func() (bool, string) {
		fams = gather(t, r)
		sets, _ := lookup(fams, "switchyard_persist_request_duration_seconds", "cmd", "set")
		bad, _ := lookup(fams, "switchyard_persist_requests_total", "cmd", "other", "code", "bad-request")
		dropped, _ := lookup(fams, "switchyard_persist_deadline_dropped_total", "server", "0")
		// The streams on disk are exported once the walk at start counted them.
		_, counted := lookup(fams, "switchyard_persist_streams", "server", "0")
		return sets >= 3 && bad >= 1 && dropped >= 1 && counted, fmt.Sprintf("set samples %v, bad-request %v, deadline dropped %v, streams counted %v", sets, bad, dropped, counted)
	})
	if got := value(t, fams, "switchyard_persist_requests_total", "server", "0", "cmd", "set", "code", "ok"); got != 3 {
		t.Errorf("set ok = %v, want 3", got)
	}
	if got := value(t, fams, "switchyard_persist_requests_total", "cmd", "get", "code", "not-found"); got != 1 {
		t.Errorf("get not-found = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_persist_requests_total", "cmd", "other", "code", "bad-request"); got != 1 {
		t.Errorf("other bad-request = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_persist_request_duration_seconds", "cmd", "set"); got != 3 {
		t.Errorf("set latency samples = %v, want 3", got)
	}
	if got := value(t, fams, "switchyard_persist_commit_batch_messages", "server", "0"); got < 1 {
		t.Errorf("commit batch samples = %v", got)
	}
	value(t, fams, "switchyard_persist_commit_duration_seconds", "server", "0")
	if got := value(t, fams, "switchyard_persist_commits_total", "server", "0"); got < 1 {
		t.Errorf("commits = %v", got)
	}
	if got := value(t, fams, "switchyard_persist_open_streams", "server", "0"); got != 1 {
		t.Errorf("open streams = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_persist_open_stream_bytes", "server", "0"); got <= 0 {
		t.Errorf("open stream bytes = %v", got)
	}
	if got := value(t, fams, "switchyard_persist_feed_messages_total", "server", "0"); got < 3 {
		t.Errorf("feed messages = %v, want at least 3", got)
	}
	if got := value(t, fams, "switchyard_persist_reply_refused_total", "server", "0"); got != 1 {
		t.Errorf("reply refused = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_persist_deadline_dropped_total", "server", "0"); got != 1 {
		t.Errorf("deadline dropped = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_persist_ready", "server", "0"); got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_persist_streams", "server", "0"); got != 1 {
		t.Errorf("streams = %v, want 1 (the stream demo)", got)
	}
	for _, n := range []string{"switchyard_persist_dedup_hits_total", "switchyard_persist_expired_messages_total", "switchyard_persist_commit_failures_total", "switchyard_persist_feed_publish_failures_total",
		"switchyard_persist_streams_rescued_total", "switchyard_persist_open_wait_closes_total", "switchyard_persist_streams_compacted_total", "switchyard_persist_streams_cold_closed_total",
		"switchyard_persist_compaction_backlog", "switchyard_persist_checkpoints_total", "switchyard_persist_checkpoint_failures_total",
		"switchyard_persist_queue_refused_total", "switchyard_persist_queued_request_bytes"} {
		value(t, fams, n, "server", "0")
	}
	checkLabels(t, fams)
}

type fakeWatcher persist.WatchStats

func (f fakeWatcher) Stats() persist.WatchStats { return persist.WatchStats(f) }

type fakeBalancer struct{ answers, resubs, refused uint64 }

func (f fakeBalancer) Stats() (uint64, uint64) { return f.answers, f.resubs }
func (f fakeBalancer) ReplyRefused() uint64    { return f.refused }

// TestWatchAndBalancerMetrics: watchers are summed by role (lag is the
// largest), balancers summed.
func TestWatchAndBalancerMetrics(t *testing.T) {
	t.Parallel()
	r := New()
	r.AddWatcher("search", fakeWatcher{Resyncs: 1, Gaps: 2, Lag: 5})
	r.AddWatcher("search", fakeWatcher{Resyncs: 2, Gaps: 1, Lag: 3})
	r.AddBalancer(fakeBalancer{answers: 7, resubs: 1, refused: 2})
	r.AddBalancer(fakeBalancer{answers: 3, refused: 1})
	fams := gather(t, r)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"switchyard_watch_watchers", 2},
		{"switchyard_watch_resyncs_total", 3},
		{"switchyard_watch_gaps_filled_total", 3},
		{"switchyard_watch_lag_seqs", 5},
	} {
		if got := value(t, fams, c.name, "role", "search"); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if got := value(t, fams, "switchyard_balancer_lookups_total"); got != 10 {
		t.Errorf("lookups = %v, want 10", got)
	}
	if got := value(t, fams, "switchyard_balancer_resubscribes_total"); got != 1 {
		t.Errorf("resubscribes = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_balancer_reply_refused_total"); got != 3 {
		t.Errorf("reply refused = %v, want 3", got)
	}
}

// TestForwardMetrics: a peer whose sends fail shows batches sent, send
// failures and gap markers; a receiver's rejections are counted by reason.
func TestForwardMetrics(t *testing.T) {
	t.Parallel()
	r := New()
	gaps := forward.NewGapPolicy(forward.GapConfig{Logger: discardLogger()})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From:       "eu",
		Send:       func(context.Context, *forward.Outbound) error { return errors.New("peer down") },
		OnOverflow: gaps.Overflow, OnLost: gaps.Lost, OnTaken: gaps.Taken,
		MaxQueued: 2,
		Logger:    discardLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.AddForwardQueue(q, []string{"us"})
	r.AddForwardGaps(gaps)
	for i := range 5 {
		q.Push("us", &forward.Delivery{UserID: 1, SubID: "s", Event: json.RawMessage(fmt.Sprintf(`{"id":"e%d","ts":1}`, i))})
	}
	q.Push("us", &forward.Delivery{UserID: 1, Event: json.RawMessage(`{"id":"x"}`)}) // no subId: refused at push
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	q.Flush("us")
	testwait.For(t, "a lost batch and its gap marker", func() bool {
		return q.PeerStats("us").LostBatches > 0 && gaps.Stats().Markers > 0
	})

	rc, err := forward.NewReceiver(forward.ReceiverConfig{Self: "us", Peers: map[string][]byte{"eu": []byte("secret")}, Sink: forward.SinkFuncs{}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	r.AddForwardReceiver(rc)
	rec := httptest.NewRecorder()
	rc.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`)))
	if rec.Code != http.StatusForbidden && rec.Code != http.StatusBadRequest {
		t.Fatalf("unsigned batch answered %d", rec.Code)
	}

	// A peer that takes the batch and answers with a reply nobody can
	// decode: delivered, its reply lost.
	garbled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("not json"))
	}))
	t.Cleanup(garbled.Close)
	snd, err := forward.NewSender(forward.SenderConfig{Self: "eu", Secret: []byte("secret"), Peers: map[string]string{"us": garbled.URL},
		OnReply: func(string, forward.Reply) {}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = snd.Stop(context.Background()) })
	r.AddForwardSender(snd)
	if err := snd.Send(t.Context(), &forward.Outbound{Peer: "us", Body: []byte(`{"from":"eu","items":[]}`)}); err != nil {
		t.Fatalf("a 2xx answer is a delivered batch: %v", err)
	}

	fams := gather(t, r)
	if got := value(t, fams, "switchyard_forward_sender_bad_replies_total"); got != 1 {
		t.Errorf("bad replies = %v, want 1", got)
	}
	// The item, and the gap marker made for it (no subId either).
	if got := value(t, fams, "switchyard_forward_invalid_items_total", "peer", "us"); got != 2 {
		t.Errorf("invalid = %v, want 2", got)
	}
	if got := value(t, fams, "switchyard_forward_pushed_items_total", "peer", "us"); got != 5 {
		t.Errorf("pushed = %v, want 5", got)
	}
	if got := value(t, fams, "switchyard_forward_dropped_items_total", "peer", "us"); got < 1 {
		t.Errorf("dropped = %v, want some (MaxQueued 2)", got)
	}
	if got := value(t, fams, "switchyard_forward_batches_sent_total", "peer", "us"); got < 1 {
		t.Errorf("batches = %v", got)
	}
	if got := value(t, fams, "switchyard_forward_send_failures_total", "peer", "us"); got < 1 {
		t.Errorf("send failures = %v", got)
	}
	if got := value(t, fams, "switchyard_forward_gap_markers_total"); got < 1 {
		t.Errorf("gap markers = %v", got)
	}
	value(t, fams, "switchyard_forward_queued_items", "peer", "us")
	value(t, fams, "switchyard_forward_queued_bytes", "peer", "us")
	rejected := value(t, fams, "switchyard_forward_receiver_rejections_total", "reason", "forbidden") +
		value(t, fams, "switchyard_forward_receiver_rejections_total", "reason", "bad_request")
	if rejected != 1 {
		t.Errorf("rejections = %v, want 1", rejected)
	}
	checkLabels(t, fams)
}

// TestNNTPAndUsenetMetrics: a pool's commands and bytes, its grant, and
// the usenet totals.
func TestNNTPAndUsenetMetrics(t *testing.T) {
	t.Parallel()
	s := nntptest.Start(t)
	s.AddGroup("alt.test", 100)
	p, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: s.Addr()}, Size: 1, HealthEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	r := New()
	r.AddNNTPPool("coordinator-1/1", p, func() int { return 4 })
	if err := p.Do(t.Context(), func(c *nntp.Conn) error {
		_, err := c.Group(t.Context(), "alt.test")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var uc usenet.Counters
	ri, err := usenet.Counted(&work.CountingIndexer{}, &uc).Begin(t.Context(), work.Range{ID: 1, Group: "alt.test", First: 1, Last: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.End(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.AddUsenet(&uc)

	fams := gather(t, r)
	pool := []string{"pool", "coordinator-1/1"}
	if got := value(t, fams, "switchyard_nntp_commands_total", pool...); got < 1 {
		t.Errorf("commands = %v", got)
	}
	if got := value(t, fams, "switchyard_nntp_read_bytes_total", pool...); got <= 0 {
		t.Errorf("bytes = %v", got)
	}
	if got := value(t, fams, "switchyard_nntp_pool_grant", pool...); got != 4 {
		t.Errorf("grant = %v, want 4", got)
	}
	if got := value(t, fams, "switchyard_nntp_pool_connections", "pool", "coordinator-1/1", "state", "idle"); got != 1 {
		t.Errorf("idle = %v, want 1", got)
	}
	for _, n := range []string{"switchyard_nntp_pool_size", "switchyard_nntp_errors_total", "switchyard_nntp_too_many_connections_total"} {
		value(t, fams, n, pool...)
	}
	if got := value(t, fams, "switchyard_usenet_ranges_indexed_total"); got != 1 {
		t.Errorf("usenet ranges = %v, want 1", got)
	}
	for _, n := range []string{"switchyard_usenet_releases_published_total", "switchyard_usenet_articles_indexed_total"} {
		value(t, fams, n)
	}
	checkLabels(t, fams)
}

// resultIndexer ends every range with res, its Group the range's, as the
// usenet indexer records its result.
type resultIndexer struct{ res usenet.RangeResult }

func (ix resultIndexer) Begin(_ context.Context, r work.Range) (work.RangeIndex, error) {
	ix.res.Group = r.Group
	return ix, nil
}

func (resultIndexer) Line(context.Context, int64, []byte) error { return nil }

func (ix resultIndexer) End(context.Context) (json.RawMessage, error) { return json.Marshal(ix.res) }

// gatherRanges counts one range of each group through usenet.Counted,
// every range ending with res, and gathers the usenet families.
func gatherRanges(t *testing.T, res usenet.RangeResult, groups ...string) map[string]*dto.MetricFamily {
	t.Helper()
	var uc usenet.Counters
	ix := usenet.Counted(resultIndexer{res}, &uc)
	for _, g := range groups {
		ri, err := ix.Begin(t.Context(), work.Range{ID: 1, Group: g, First: 1, Last: 3})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.End(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	r := New()
	r.AddUsenet(&uc)
	fams := gather(t, r)
	checkLabels(t, fams)
	return fams
}

// TestUnmatchedArticlesHaveNoGroupLabel: the articles an indexer left out
// are one total, whatever their groups: no group name becomes a label
// value (a provider has tens of thousands of groups, and they are the
// data's names). (Was: usenet_articles_unmatched_total{group}, a series
// per group; the test's unmatched count was 0, so no series showed it.)
func TestUnmatchedArticlesHaveNoGroupLabel(t *testing.T) {
	t.Parallel()
	fams := gatherRanges(t, usenet.RangeResult{Articles: 3, Unmatched: 3}, "alt.binaries.private-one", "alt.binaries.private-two")
	if got := value(t, fams, "switchyard_usenet_articles_unmatched_total"); got != 6 {
		t.Errorf("unmatched = %v, want 6 (3 in each group)", got)
	}
}

// (Was: the records a range left as they were for being too large for the bus
// were counted in its result only, in no metric.)
func TestUsenetRecordsTooLarge(t *testing.T) {
	t.Parallel()
	fams := gatherRanges(t, usenet.RangeResult{Articles: 5, ApplyResult: usenet.ApplyResult{TooLarge: 2}}, "alt.binaries.a", "alt.binaries.a")
	if got := value(t, fams, "switchyard_usenet_records_too_large_total"); got != 4 {
		t.Errorf("records too large = %v, want 4 (2 in each range)", got)
	}
}

// TestNewznabRequests: the constructor registers once; the counter is
// served with the rest.
func TestNewznabRequests(t *testing.T) {
	t.Parallel()
	r := New()
	c, err := NewznabRequests(r.Registerer())
	if err != nil {
		t.Fatal(err)
	}
	c.WithLabelValues("search", NewznabCode(0)).Inc()
	c.WithLabelValues("search", NewznabCode(100)).Inc()
	if _, err := NewznabRequests(r.Registerer()); err == nil {
		t.Fatal("a second registration succeeded")
	}
	fams := gather(t, r)
	// Success says "ok", as the other request counters do; an error its
	// Newznab code.
	if got := value(t, fams, "switchyard_newznab_requests_total", "function", "search", "code", "ok"); got != 1 {
		t.Fatalf("newznab requests ok = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_newznab_requests_total", "function", "search", "code", "100"); got != 1 {
		t.Fatalf("newznab requests 100 = %v, want 1", got)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// (Was: presence's refusals past events.MaxPresenceApps and a region's refusals of peers' `single` deliveries past MaxRemoteEntries were counted but not exported.)
func TestEventsRefusalMetrics(t *testing.T) {
	t.Parallel()
	r := New()
	c := persistenv.Start(t, 1).Client()

	p, err := events.NewPresence(events.PresenceConfig{Region: "eu", Store: events.PersistPresence{Client: c}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r.AddEventsPresence(p)
	for i := range events.MaxPresenceApps {
		if err := p.Join(t.Context(), "mia", fmt.Sprint("app", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := p.Join(t.Context(), "mia", "extra"); !errors.Is(err, events.ErrTooManyApps) {
			t.Fatalf("a connection of a %dth app: %v, want ErrTooManyApps", events.MaxPresenceApps+1, err)
		}
	}

	// The region's bump of alice's first session names her as the forward
	// wire does; a delivery for her names her the same way.
	bumps := make(chan *forward.Bump, 4)
	er, err := events.NewRouter(events.RouterConfig{Client: c, Logger: discardLogger(), Region: &events.RegionConfig{
		Self: "eu", Peers: []string{"us"}, MaxRemoteEntries: 1,
		Push: func(_ string, it forward.Item) {
			if b, ok := it.(*forward.Bump); ok {
				select {
				case bumps <- b:
				default:
				}
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := er.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = er.Stop(context.Background()) })
	r.AddEventsRouter(er)
	s := er.Open("alice", func(events.Delivery) {})
	t.Cleanup(s.Close)
	var alice int64
	select {
	case b := <-bumps:
		alice = b.UserID
	case <-time.After(testwait.Timeout):
		t.Fatal("no bump of alice's first session")
	}
	// `single` deliveries from us of two subscriptions: us may have one
	// remembered here, so the second is refused.
	for _, sub := range []string{"s0", "s1"} {
		er.Sink().Deliver(t.Context(), "us", &forward.Delivery{
			UserID: alice, SubID: "alice/" + sub, AckRequired: true, AckID: "project-1/jobs#1", Origin: "us",
			Event: json.RawMessage(`{"id":"project-1/jobs#1","subject":"project-1/jobs/k","op":"set","seq":1,"ts":1,"value":"v","attempt":1}`),
		})
	}

	testwait.Until(t, "the refused delivery counted", func() (bool, string) {
		st := er.RegionStats()
		return st.RemoteEntriesRefused >= 1, fmt.Sprintf("%+v", st)
	})
	fams := gather(t, r)
	if got := value(t, fams, "switchyard_events_region_remote_entries_refused_total"); got != 1 {
		t.Errorf("remote entries refused = %v, want 1", got)
	}
	if got := value(t, fams, "switchyard_events_presence_refused_total"); got != 2 {
		t.Errorf("presence refused = %v, want 2", got)
	}
	if got := value(t, fams, "switchyard_events_presence_present"); got != events.MaxPresenceApps {
		t.Errorf("presence present = %v, want %d", got, events.MaxPresenceApps)
	}
	checkLabels(t, fams)
}
