package dashboard

import (
	"context"

	"github.com/switchyard-dev/switchyard/work"
)

// Source is what a dashboard shows: each method returns one part's
// snapshot now. The hub calls them from its one tick goroutine, once per
// tick, never concurrently; they must not block beyond ctx (the reads that
// need I/O, Work and Releases, get a bounded one) and should be cheap:
// Members, Pools, Watchers and Totals read counters, Work and Releases are
// read only while a dashboard is connected.
//
// A part the process does not run returns nothing (nil, or ok false), and
// the snapshot then has no such section: the page never shows a
// placeholder for what does not exist.
type Source interface {
	// Members are the persist servers of the process.
	Members() []Member
	// Pools are the NNTP connection pools of the process.
	Pools() []Pool
	// Watchers are the stream watchers of the process, by role.
	Watchers() []Watcher
	// Totals are the process's running counts; ok is false without an
	// indexer.
	Totals() (t Totals, ok bool)
	// Work is the status of the source the process works on; nil without
	// one.
	Work(ctx context.Context) (*work.Status, error)
	// Releases are the newest limit releases; nil without an indexer.
	Releases(ctx context.Context, limit int) (*Releases, error)
	// Peers are the regions the process's region is joined to, with the
	// forward queue to each; nil for a region of its own.
	Peers() []Peer
}

// Funcs is a Source made of funcs, any of them nil for a part the process
// does not run.
type Funcs struct {
	MembersFunc  func() []Member
	PoolsFunc    func() []Pool
	WatchersFunc func() []Watcher
	TotalsFunc   func() (Totals, bool)
	WorkFunc     func(context.Context) (*work.Status, error)
	ReleasesFunc func(context.Context, int) (*Releases, error)
	PeersFunc    func() []Peer
}

var _ Source = Funcs{}

// Peers calls PeersFunc.
func (f Funcs) Peers() []Peer {
	if f.PeersFunc == nil {
		return nil
	}
	return f.PeersFunc()
}

// Members calls MembersFunc.
func (f Funcs) Members() []Member {
	if f.MembersFunc == nil {
		return nil
	}
	return f.MembersFunc()
}

// Pools calls PoolsFunc.
func (f Funcs) Pools() []Pool {
	if f.PoolsFunc == nil {
		return nil
	}
	return f.PoolsFunc()
}

// Watchers calls WatchersFunc.
func (f Funcs) Watchers() []Watcher {
	if f.WatchersFunc == nil {
		return nil
	}
	return f.WatchersFunc()
}

// Totals calls TotalsFunc.
func (f Funcs) Totals() (Totals, bool) {
	if f.TotalsFunc == nil {
		return Totals{}, false
	}
	return f.TotalsFunc()
}

// Work calls WorkFunc.
func (f Funcs) Work(ctx context.Context) (*work.Status, error) {
	if f.WorkFunc == nil {
		return nil, nil
	}
	return f.WorkFunc(ctx)
}

// Releases calls ReleasesFunc.
func (f Funcs) Releases(ctx context.Context, limit int) (*Releases, error) {
	if f.ReleasesFunc == nil {
		return nil, nil
	}
	return f.ReleasesFunc(ctx, limit)
}

// Member is one persist server of the fleet. The server counts the streams
// it has open (its cache), not the scopes it owns: placement decides
// ownership per request, so open streams are what it holds now.
type Member struct {
	ID string `json:"id"`
	// NotReady is why the server cannot take writes, "" when it can.
	NotReady       string `json:"not_ready,omitempty"`
	OpenStreams    int    `json:"open_streams"`
	OpenBytes      int64  `json:"open_bytes"`
	Commits        uint64 `json:"commits"`
	CommitFailures uint64 `json:"commit_failures"`
	FeedPublished  uint64 `json:"feed_published"`
	// FeedLocal counts the feed messages handed to watchers of the
	// server's own process without the bus (up).
	FeedLocal uint64 `json:"feed_local"`
}

// Pool is one NNTP connection pool and the grant its share gives it.
type Pool struct {
	Name    string `json:"name"`
	Size    int    `json:"size"`
	Allowed int    `json:"allowed"`
	InUse   int    `json:"in_use"`
	Idle    int    `json:"idle"`
	// Grant is what the connection share grants; -1 when the pool has no
	// share.
	Grant     int   `json:"grant"`
	Gated     bool  `json:"gated,omitempty"`
	Commands  int64 `json:"commands"`
	BytesRead int64 `json:"bytes_read"`
	Errors    int64 `json:"errors"`
}

// Watcher is the watchers of one role, summed.
type Watcher struct {
	Role     string `json:"role"`
	Watchers int    `json:"watchers"`
	Resyncs  uint64 `json:"resyncs"`
	Gaps     uint64 `json:"gaps"`
	Lag      uint64 `json:"lag"`
}

// Totals are running counts of the indexer; the throughput chart is the
// rate of Articles.
type Totals struct {
	Articles  int64 `json:"articles"`
	Ranges    int64 `json:"ranges"`
	Releases  int64 `json:"releases"`
	Published int64 `json:"published"`
}

// Releases are the newest releases and how many there are in all.
type Releases struct {
	Total int       `json:"total"`
	Items []Release `json:"items"`
}

// Release is one line of the newest releases.
type Release struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Category     int    `json:"category"`
	CategoryName string `json:"category_name"`
	Size         int64  `json:"size"`
	Date         int64  `json:"date"` // unix seconds
	Files        int    `json:"files"`
	// Password is the Newznab password attr post-processing found: 0
	// none, 1 passworded, 2 potentially (an archive inside the archive).
	Password int `json:"password,omitempty"`
}
