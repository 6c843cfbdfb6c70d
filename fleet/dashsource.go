package fleet

import (
	"context"
	"sync"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/web/dashboard"
	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/work"
)

// dashParts are the parts of a process that its dashboard shows, added as
// the roles start (alongside their metrics): the process's
// dashboard.Source.
type dashParts struct {
	mu       sync.Mutex // protects the parts
	servers  []dashServer
	pools    []dashPool
	work     *work.Store
	counters *usenet.Counters
	index    *search.Index
	// watchers reads the watchers added to the metrics, summed by role.
	watchers func() []metrics.WatchSum
	// peers reads the peer regions and the queues to them.
	peers func() []dashboard.Peer

	// The releases, cached by the index's last seq: searched again only
	// when the index changed. Used by the hub's tick goroutine only.
	relSeq uint64
	rel    *dashboard.Releases
}

type dashServer struct {
	id  string
	srv *server.Server
}

type dashPool struct {
	name  string
	p     *nntp.Pool
	grant func() int
}

var _ dashboard.Source = (*dashParts)(nil)

func (d *dashParts) addServer(id string, srv *server.Server) {
	d.mu.Lock()
	d.servers = append(d.servers, dashServer{id, srv})
	d.mu.Unlock()
}

// addWork adds the source's store and the pool (with its share's grant)
// that fetches for it.
func (d *dashParts) addWork(st *work.Store, pool string, p *nntp.Pool, grant func() int) {
	d.mu.Lock()
	d.work = st
	d.pools = append(d.pools, dashPool{pool, p, grant})
	d.mu.Unlock()
}

func (d *dashParts) setCounters(c *usenet.Counters) {
	d.mu.Lock()
	d.counters = c
	d.mu.Unlock()
}

func (d *dashParts) setIndex(ix *search.Index) {
	d.mu.Lock()
	d.index = ix
	d.mu.Unlock()
}

// Members reads each persist server's Stats and readiness (no I/O).
func (d *dashParts) Members() []dashboard.Member {
	d.mu.Lock()
	servers := append([]dashServer(nil), d.servers...)
	d.mu.Unlock()
	var out []dashboard.Member
	for _, s := range servers {
		st := s.srv.Stats()
		m := dashboard.Member{ID: s.id, OpenStreams: st.OpenStreams, OpenBytes: st.OpenBytes, Commits: st.Commits, CommitFailures: st.CommitFailures, FeedPublished: st.FeedPublished, FeedLocal: st.FeedLocal}
		if err := s.srv.Ready(); err != nil {
			m.NotReady = err.Error()
		}
		out = append(out, m)
	}
	return out
}

// Pools reads each pool's Stats (no I/O).
func (d *dashParts) Pools() []dashboard.Pool {
	d.mu.Lock()
	pools := append([]dashPool(nil), d.pools...)
	d.mu.Unlock()
	var out []dashboard.Pool
	for _, p := range pools {
		s := p.p.Stats()
		grant := -1
		if p.grant != nil {
			grant = p.grant()
		}
		out = append(out, dashboard.Pool{Name: p.name, Size: s.Size, Allowed: s.Allowed, InUse: s.InUse, Idle: s.Idle, Grant: grant, Gated: s.Gated, Commands: s.Commands, BytesRead: s.BytesRead, Errors: s.Errors})
	}
	return out
}

// Peers reads the peer regions, when the events layer has some.
func (d *dashParts) Peers() []dashboard.Peer {
	d.mu.Lock()
	f := d.peers
	d.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

func (d *dashParts) setPeers(f func() []dashboard.Peer) {
	d.mu.Lock()
	d.peers = f
	d.mu.Unlock()
}

// Watchers reads the watchers the roles added to the metrics (the search
// index's follower, the WebSocket gateway's), summed by role.
func (d *dashParts) Watchers() []dashboard.Watcher {
	if d.watchers == nil {
		return nil
	}
	var out []dashboard.Watcher
	for _, s := range d.watchers() {
		out = append(out, dashboard.Watcher{Role: s.Role, Watchers: s.Watchers, Resyncs: s.Stats.Resyncs, Gaps: s.Stats.Gaps, Lag: s.Stats.Lag})
	}
	return out
}

// Totals reads the usenet indexer's counters.
func (d *dashParts) Totals() (dashboard.Totals, bool) {
	d.mu.Lock()
	c := d.counters
	d.mu.Unlock()
	if c == nil {
		return dashboard.Totals{}, false
	}
	s := c.Stats()
	return dashboard.Totals{Articles: s.Articles, Ranges: s.Ranges, Releases: s.Releases, Published: s.Published}, true
}

// Work reads the source's status from persist, as `work status` does.
func (d *dashParts) Work(ctx context.Context) (*work.Status, error) {
	d.mu.Lock()
	st := d.work
	d.mu.Unlock()
	if st == nil {
		return nil, nil
	}
	s, err := st.Status(ctx)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Releases reads the newest releases from the local search index (one
// indexed query; usenet.Store.List would read the whole releases stream),
// and only when the index has changed since the last read.
func (d *dashParts) Releases(ctx context.Context, limit int) (*dashboard.Releases, error) {
	d.mu.Lock()
	ix := d.index
	d.mu.Unlock()
	if ix == nil {
		return nil, nil
	}
	seq := ix.LastSeq()
	if d.rel != nil && seq == d.relSeq {
		return d.rel, nil
	}
	res, err := ix.Search(ctx, search.Query{Limit: limit})
	if err != nil {
		return nil, err
	}
	rel := &dashboard.Releases{Total: res.Total, Items: []dashboard.Release{}}
	for _, r := range res.Releases {
		rel.Items = append(rel.Items, dashboard.Release{ID: r.ID, Name: r.Name, Category: r.Category, CategoryName: usenet.CategoryName(r.Category), Size: r.Size, Date: r.Date, Files: r.FileCount(), Password: r.Password})
	}
	d.rel, d.relSeq = rel, seq
	return rel, nil
}
