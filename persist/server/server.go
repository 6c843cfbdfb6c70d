// Package server serves persist streams over NATS: one Server per member
// id answers "{service}.{scope}.api.{id}" for the scopes placement gives it,
// queues requests per stream, group-commits writes through a store.Storage
// and publishes every commit on the stream's change feed. Clients use
// package persist.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
	"github.com/switchyard-dev/switchyard/placement"
)

// Server defaults.
const (
	// OpenStreamMemory is what an open stream costs in memory, rounded
	// up from BenchmarkOpenStreamRSS (./persist/store: 204 KiB of resident
	// set per stream held open, 3 keys each, 2 KiB pages, every table;
	// 182 KiB for a new file without the tables it does not use, which
	// a stream using msgIDs, delete ids and TTLs has again): its SQLite
	// connection, schema, page cache, lookaside and the -shm mapping.
	OpenStreamMemory = 210 << 10
	// OpenStreamsMemoryDefault is the memory the open streams of a process
	// may take by default, shared by its servers: with OpenStreamMemory,
	// MaxOpenStreamsDefault streams.
	OpenStreamsMemoryDefault = 256 << 20
	// MaxOpenStreamsDefault is the most streams one server of a process
	// keeps open by default, its memory bound: OpenStreamsMemoryDefault
	// over OpenStreamMemory, 1,248 (about 256 MiB). DefaultMaxOpenStreams
	// lowers it to fit the process's file descriptors.
	MaxOpenStreamsDefault = OpenStreamsMemoryDefault / OpenStreamMemory
	// PackedMaxOpenStreamsDefault is the open-stream cap of one server of
	// a process when new streams go to packs (Config.Packs), shared by
	// its servers: a stream of a pack holds no descriptor and under a KiB
	// of memory while open (its handle; the pack's connection is shared),
	// so the cap is there to bound the handles, not files: 65,536 such
	// streams take about 50 MiB. Streams that kept a file of their own
	// count against it too; a data directory holding many of those is
	// better served with --max-open-streams set to the descriptor bound.
	PackedMaxOpenStreamsDefault = 1 << 16
	// DescriptorReserve is the part of the process's file descriptor limit
	// that DefaultMaxOpenStreams leaves for everything but stream files:
	// NATS and HTTP connections, archive copies, the data directory walks.
	DescriptorReserve = 256
	// IdleCloseDefault is how long an unused stream stays open.
	IdleCloseDefault = 5 * time.Minute
	// ExpireEveryDefault is the period of the TTL / max_age / idle timer.
	ExpireEveryDefault = time.Second
	// MaxQueueDefault bounds the requests waiting on one stream; more are
	// answered unavailable.
	MaxQueueDefault = 10000
	// MaxQueueBytesDefault bounds the bytes of the requests a server holds
	// queued or being served, over all its streams: 256 MiB, what the
	// subscription may hold before they are queued (subPendingBytes), so
	// that requests received take at most twice that. MaxQueue alone let a
	// stream hold 10,000 requests of the max payload (80 GiB under up's
	// 8 MiB), and every stream as much; a group commit needs far less (a
	// stream's full queue of 10,000 small sets counts about 17 MiB).
	MaxQueueBytesDefault = subPendingBytes
	// MaxCommitOpsDefault bounds the messages of one group-commit transaction.
	MaxCommitOpsDefault = 10000
)

// flushTimeout bounds Start's wait for the subscription to reach NATS when
// ctx has no deadline.
const flushTimeout = 5 * time.Second

// subPendingBytes bounds the requests the subscription holds before onMsg
// queues them: past it nats.go drops them (a slow consumer), unanswered.
const subPendingBytes = 256 << 20

// jobOverhead and opOverhead are what a queued request holds besides its
// message's bytes (nats.Msg.Size), as Config.MaxQueueBytes counts it: each
// request its message's header map, the decoded request, its job and its
// place in the queue; and each message it writes its store.WriteOp
// (80 bytes) and the strings decoded from its frame. Rounded up from the
// heap held by requests queued behind a held worker: 1,257 bytes per
// set of 123 bytes, 870 KB per setMany of 10,000 empty frames (40 KB),
// 1.2 MB per one of 10,000 keyed frames (169 KB).
const (
	jobOverhead = 1536
	opOverhead  = 112
)

// DefaultMaxOpenStreams is the open-stream cap for each of servers
// sharing one process when none is configured, the lower of two bounds,
// each shared by the servers: descriptors, the descriptor limit
// (store.NoFileLimit) less DescriptorReserve over store.FilesPerOpenStream;
// and memory, OpenStreamsMemoryDefault over OpenStreamMemory. At least 16.
// For one server: with a limit of 1,024, 256; with 4,000 or more, 1,248
// (about 256 MiB).
func DefaultMaxOpenStreams(servers int) int {
	return maxOpenStreamsFor(store.NoFileLimit(), servers)
}

func maxOpenStreamsFor(limit uint64, servers int) int {
	servers = max(1, servers)
	n := int64(MaxOpenStreamsDefault / servers)
	// A limit past int64 is RLIM_INFINITY (the BSDs' "unlimited"): no
	// bound, as 0 is, not a negative budget.
	if limit > 0 && limit <= math.MaxInt64 {
		budget := int64(limit) - DescriptorReserve
		n = min(n, budget/int64(servers)/store.FilesPerOpenStream)
	}
	return int(max(n, 16))
}

// WorkersDefault is the number of stream workers: twice the CPUs, at least 4.
func WorkersDefault() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// Config configures a Server.
type Config struct {
	// Conn is the NATS connection to serve on. Required.
	Conn *nats.Conn
	// ID is this server's member id. Required; must be one of IDs.
	ID string
	// IDs lists every member id, in the same order everywhere. Required.
	IDs []string
	// Placement maps a scope to its owner. Nil means placement.Rendezvous.
	// The server asks it when a request arrives and again just before the
	// request is applied (a request may wait in its stream's queue), so a
	// Placement whose answer changes at run time (one that reads a member
	// list kept up to date) turns away, wrong-owner, requests queued
	// before the scope moved. It must be safe for concurrent use.
	Placement placement.Func
	// Service is the first subject token. Empty means bus.DefaultService.
	Service string
	// DataDir holds one SQLite file per stream. Empty means the server keeps
	// ephemeral streams only and refuses the others with bad-request.
	DataDir string
	// Sync makes every stream synchronous=FULL (store.SQLiteConfig.Sync):
	// each group commit is fsynced before its writes are answered. False
	// leaves it to each stream's "sync" config (default NORMAL).
	Sync bool
	// ExclusiveFiles says the server is alone on DataDir: each stream file
	// is opened with locking_mode=EXCLUSIVE (store.SQLiteConfig.Exclusive),
	// which makes opens, closes and commits cheaper, and a stream
	// evicted and wanted again waits for its close before it reopens.
	// Another server sharing the directory could then not reach a stream
	// this one holds open: leave it false (the default) where servers
	// share one, or a scope may move between two on the same disk.
	ExclusiveFiles bool
	// Packs, if positive, keeps new streams in that many shared SQLite
	// files under DataDir/.packs (store.SQLiteConfig.Packs): a stream
	// there opens and closes without a file of its own, so a server
	// writing to many more streams than it can hold open stays fast. Fixed
	// for a data directory once it has packs; at most store.MaxPacks.
	// Packs are opened exclusively, as ExclusiveFiles does, so the
	// directory's packs are one server's at a time. Excludes Archive.
	Packs int
	// Logger receives errors of the background loops, with role=persist.
	// Nil means slog.Default().
	Logger *slog.Logger
	// MaxOpenStreams bounds the open streams, and so the file descriptors
	// they hold (store.FilesPerOpenStream each): the least recently used
	// idle one is closed to open another (a stream with queued work is
	// never closed), and when every open stream is busy an open is refused
	// with unavailable rather than exceed it. Zero means
	// DefaultMaxOpenStreams(1), derived from the descriptor limit.
	MaxOpenStreams int
	// IdleClose closes a stream unused this long. Zero means IdleCloseDefault.
	IdleClose time.Duration
	// ExpireEvery is how often open streams drop messages past their TTL or
	// max_age (they also expire on every write). Zero means ExpireEveryDefault.
	ExpireEvery time.Duration
	// Workers is the number of goroutines serving streams; one stream is
	// served by one worker at a time. Zero means WorkersDefault().
	Workers int
	// MaxQueue bounds the requests waiting on one stream. Zero means
	// MaxQueueDefault.
	MaxQueue int
	// MaxQueueBytes bounds the bytes of the requests the server holds
	// queued or being served, over all its streams, each counted at its
	// message's size (subject, reply, headers and body) plus what decoding
	// it took (jobOverhead, and opOverhead per message it writes) until
	// it is answered: a request that would go past it is answered
	// unavailable, as one past MaxQueue is. One request is always taken
	// when none is held, however large. (A request served on arrival,
	// on the subscription's goroutine, is not queued and not counted.)
	// Zero means MaxQueueBytesDefault.
	MaxQueueBytes int64
	// MaxCommitOps bounds the messages in one group-commit transaction. Zero
	// means MaxCommitOpsDefault.
	MaxCommitOps int
	// OnChange, if set, receives every commit's changes (sets, and deletes
	// whether asked for or caused by a limit, TTL or age), in order, after
	// the commit. It is called from the stream's worker and must not block
	// for long. Nil means changes are not reported.
	OnChange func(scope, stream string, ephemeral bool, changes []store.Change)
	// FeedInterest, if set, counts the subscriptions the NATS server of
	// Conn holds for a subject: set when that server runs in this process
	// (switchyard up). A feed message whose only listeners are watchers of
	// this process is then handed to them without the bus, and one with no
	// listener at all is not published (persist.DeliverFeedLocally). Nil
	// means every feed message is published.
	FeedInterest func(subject string) int
	// Storage stores the persistent streams. Nil means store.SQLite under
	// DataDir (with Archive).
	Storage store.Storage
	// Memory stores the ephemeral streams (Sy-Ephemeral: true). Nil means
	// store.NewMemory(), a private in-memory database per stream.
	Memory store.Storage
	// Archive, if set, is a directory holding a backup copy of every
	// persistent stream, laid out like DataDir: streams written since their
	// last backup are copied every ArchiveEvery and when closed, and a
	// stream whose archive copy is newer than its local file (or whose local
	// file is missing) is restored from it on open. Ephemeral streams are
	// never archived. Empty means no archive; it needs DataDir and the
	// default Storage.
	Archive string
	// ArchiveEvery is the backup period when Archive is set. Zero means
	// ArchiveEveryDefault.
	ArchiveEvery time.Duration
	// Observer, if set, hears of every answer and commit (see Observer).
	// Nil means none, at no cost.
	Observer Observer
}

func (c Config) withDefaults() Config {
	if c.Placement == nil {
		c.Placement = placement.Rendezvous
	}
	if c.Service == "" {
		c.Service = bus.DefaultService
	}
	if c.MaxOpenStreams == 0 {
		c.MaxOpenStreams = DefaultMaxOpenStreams(1)
		if c.Packs > 0 {
			c.MaxOpenStreams = PackedMaxOpenStreamsDefault
		}
	}
	if c.IdleClose == 0 {
		c.IdleClose = IdleCloseDefault
	}
	if c.ExpireEvery == 0 {
		c.ExpireEvery = ExpireEveryDefault
	}
	if c.Workers == 0 {
		c.Workers = WorkersDefault()
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = MaxQueueDefault
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = MaxQueueBytesDefault
	}
	if c.MaxCommitOps == 0 {
		c.MaxCommitOps = MaxCommitOpsDefault
	}
	if c.ArchiveEvery == 0 {
		c.ArchiveEvery = ArchiveEveryDefault
	}
	if c.Storage == nil {
		c.Storage = store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir, Archive: c.Archive, Sync: c.Sync, Exclusive: c.ExclusiveFiles, Packs: c.Packs})
	}
	if c.Memory == nil {
		c.Memory = store.NewMemory()
	}
	return c
}

func (c Config) validate() error {
	if c.Conn == nil {
		return errors.New("persist server: Conn is required")
	}
	if err := bus.ValidIDs(c.IDs); err != nil {
		return fmt.Errorf("persist server: %w", err)
	}
	if !slices.Contains(c.IDs, c.ID) {
		return fmt.Errorf("persist server: id %q is not in ids %v", c.ID, c.IDs)
	}
	// Not an inbox's name: the server answers on any inbox, and under such a
	// service every subject of its would pass for one (bus.ValidService).
	if err := bus.ValidService(c.Service); err != nil {
		return fmt.Errorf("persist server: service: %w", err)
	}
	if c.MaxOpenStreams < 0 || c.IdleClose < 0 || c.ExpireEvery < 0 || c.Workers < 0 || c.MaxQueue < 0 || c.MaxQueueBytes < 0 || c.MaxCommitOps < 0 || c.ArchiveEvery < 0 {
		return errors.New("persist server: limits must not be negative")
	}
	if err := c.validateArchive(); err != nil {
		return err
	}
	if c.Packs < 0 || c.Packs > store.MaxPacks {
		return fmt.Errorf("persist server: packs %d: want 0 (none) to %d", c.Packs, store.MaxPacks)
	}
	if c.Packs > 0 && c.Archive != "" {
		return errors.New("persist server: packs and an archive exclude each other (a stream of a pack has no file to copy)")
	}
	return nil
}

// Server serves the persist API of one member id: it subscribes
// "{service}.*.api.{id}", answers wrong-owner for scopes placement gives to
// another member, and keeps each stream it owns in Storage.
//
// Requests are queued per stream and served by a bounded pool of workers,
// one worker per stream at a time: consecutive writes waiting on a stream are
// committed in one transaction (group commit), and a slow stream holds only
// its own worker.
type Server struct {
	cfg  Config
	log  *slog.Logger
	base lifecycle.Base // Start and Stop by the one rule
	// closeOnce closes the streams and the storage once, whether or not
	// the server was started.
	closeOnce sync.Once

	mu      sync.Mutex // protects everything below it
	cond    *sync.Cond // workers wait on it for ready streams
	handles map[handleKey]*handle
	// sized counts the handles in handles that count toward the cache's
	// size (handle.sized): eviction keeps it, not len(handles), below
	// MaxOpenStreams less cacheReserve (evictLocked).
	sized int
	// idle lists the handles in the cache with nothing queued or being
	// served, least recently used first (cache.go).
	idle handleList
	// toClose lists the evicted handles waiting for the closer goroutine,
	// retired the same by stream; closeWork wakes the closer, closerQuit
	// tells it to finish (it closes what is queued first) and closerDone
	// is closed when it returned (nil before Start).
	toClose handleList
	retired map[handleKey]*handle
	// toCompact lists the streams closed quickly, whose WAL the closer
	// checkpoints when it has nothing to close (compacting: the same as a
	// set, so each is listed once).
	toCompact  []handleKey
	compacting map[handleKey]struct{}
	closeWork  *sync.Cond
	closerQuit bool
	closerDone chan struct{}
	// closing counts the evicted handles of each stream not yet closed:
	// waiting for the closer or being closed outside the lock
	// (finishClose); closed is broadcast as each finishes. A drop waits
	// for them before it removes the stream's files (serveDrop).
	closing map[handleKey]int
	closed  *sync.Cond
	// foundWAL lists the stream files the start's walk found with a WAL
	// left by a quick close, for the closer to compact (streamcount.go).
	foundWAL []foundWAL
	// resolving counts the closer's reads of a found stream's name, each
	// holding an open-stream slot (nextFoundLocked); takeSlot waits for
	// them as it does for closes, rather than refuse an open the slot
	// will have room for a moment later.
	resolving int
	ready     []*handle // streams with queued work, not being served
	// inService counts the streams a worker (or a subscription's
	// goroutine, inline) is serving now; with ready, what busyLocked sees.
	inService int
	quit      bool // workers exit once ready is empty
	sub       *nats.Subscription
	// refusing is set when Stop gave up waiting for the subscription's
	// drain: onMsg then closes bufferEmpty (once, emptyOnce) after the
	// last request the subscription held (refuseBuffered).
	refusing    atomic.Bool
	bufferEmpty chan struct{}
	emptyOnce   sync.Once

	wg      sync.WaitGroup // workers and the timer loop
	stopTim chan struct{}
	// count is the total of persistent streams (streamcount.go); the walk
	// that counts them at start ends when walkStop is called (closeStreams)
	// and closes walkDone (nil before Start or without a store.Lister).
	count    *streamCount
	walkStop context.CancelFunc
	walkDone chan struct{}

	// queuedBytes is what the requests queued or being served hold, as
	// MaxQueueBytes counts it (job.bytes): added under mu by enqueue,
	// taken back without it once they are answered.
	queuedBytes atomic.Int64

	// openStreams counts the streams whose storage is open, being opened
	// or still closing: the slots of openslots.go, at most MaxOpenStreams.
	openStreams atomic.Int64
	openPeak    atomic.Int64 // the most openStreams has been
	// openEphemeral counts the open streams of Memory: they take a slot
	// but hold no file descriptor.
	openEphemeral atomic.Int64
	// openPacked counts the open streams of packs (store.InPack): they
	// take a slot and hold no descriptor either.
	openPacked  atomic.Int64
	commits     atomic.Uint64  // write transactions committed, for tests and stats
	inlined     atomic.Uint64  // requests served on the subscription's goroutine (scheduler.go), for tests and stats
	gathered    atomic.Uint64  // sync commits that waited for more writers (gather), for tests
	coldCloses  atomic.Uint64  // streams closed once idle because their last request said Sy-Cold
	checkpoints atomic.Uint64  // WAL checkpoints run between requests (store.Checkpointer)
	ckptFails   atomic.Uint64  // and those that failed
	rescued     atomic.Uint64  // evicted streams taken back open before the closer reached them (cache.go)
	slotCloses  atomic.Uint64  // streams an open closed itself for want of a free slot (takeSlot)
	compacted   atomic.Uint64  // quickly closed streams compacted by the closer (cache.go)
	feed        *feedPublisher // publishes every commit's changes (feed.go)
	serverStats                // the rest of Stats (stats.go)

	// beforeWrite, if set (tests only), runs before each group commit with
	// the number of messages in it.
	beforeWrite func(n int)
	// now, if set (tests only), is the clock requests' deadlines are
	// checked against (admit); nil means time.Now.
	now func() time.Time
	// beforeScan, if set (tests only), runs on the walk's goroutine before
	// it counts each scope.
	beforeScan func(scope string)
	// compactMax is compactBacklog of the cap: how many streams wait for
	// compaction while requests are served (upkeepLocked).
	compactMax int
	// upkeepWaits, if set (tests only), is called (with mu held) each time
	// the closer leaves its upkeep for later because the server is busy.
	upkeepWaits func()
	// noCompact, if set (tests only), keeps the closer from compacting
	// streams closed quickly, so that they keep their WAL, and from taking
	// up those the start's walk found, so that they stay found.
	noCompact bool
	// gatherWait, if set (tests only), replaces how long a sync stream's
	// group commit waits for more writes (gather).
	gatherWait time.Duration
}

// handleKey names a stream: ephemeral streams are kept apart from the
// persistent ones of the same name, in Config.Memory (see Server.storage).
type handleKey struct {
	scope, name string
	ephemeral   bool
}

// handle is one stream's queue and, once opened, its storage. queue,
// scheduled, lastUsed and needsExpiry are guarded by Server.mu; st is touched
// only by the worker currently serving the handle (scheduled == true).
type handle struct {
	key            handleKey
	queue          []*job
	scheduled      bool // in ready or being served
	lastUsed       time.Time
	needsExpiry    bool
	expirePending  bool
	archivePending bool
	st             store.Stream
	bytes          int64 // st's Inventory().Bytes as counted in Server.openBytes
	// The idle or closer's list h is on (cache.go), and its neighbours
	// there; guarded by Server.mu.
	list       *handleList
	prev, next *handle
	// quickClose: the closer closes h quickly (evicted for room, not
	// idle); walKept: its close left the WAL for compaction (cache.go).
	quickClose, walKept bool
	// sized: h counts toward the cache's size (Server.sized), as its
	// stream is open or a write queued on it will open it; a handle of
	// reads only, of a stream that may not exist, does not, else reads
	// of made-up names would push open streams out of the cache. Guarded
	// by Server.mu; cleared when h leaves the cache (dropLocked).
	sized bool
	// cold: the last request served said none would follow soon (Sy-Cold),
	// so h is closed once idle instead of kept for IdleClose. Set by the
	// worker serving h, read by it in doneServing.
	cold bool

	// The group commit's gathering on a sync stream (gather): the most
	// writes of its recent commits (decaying), how long its last commit
	// took, and the wake-up of a worker waiting for more writes (waiting,
	// under Server.mu).
	peakOps    int
	commitTook time.Duration
	waiting    bool
	more       chan struct{}
}

// job is one request waiting on a stream (or an internal expiry run).
type job struct {
	msg     *nats.Msg
	req     *request
	expire  bool
	archive bool // back the stream up (archive.go)
	// checkpoint moves the stream's WAL into its database, queued when a
	// batch left it due and nothing else waited (store.Checkpointer).
	checkpoint bool
	start      time.Time // arrival, set only with an Observer (see Server.served)
	// bytes is what j counts in Server.queuedBytes until it is answered
	// (enqueue); 0 for the server's own jobs and a request served on
	// arrival.
	bytes int64
}

// New checks cfg and returns a server that is not yet serving.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: lifecycle.Logger(cfg.Logger, "persist"), handles: map[handleKey]*handle{}, closing: map[handleKey]int{}, retired: map[handleKey]*handle{}, compacting: map[handleKey]struct{}{}, count: newStreamCount(), bufferEmpty: make(chan struct{})}
	s.compactMax = compactBacklog(s.cfg.MaxOpenStreams)
	s.cond = sync.NewCond(&s.mu)
	s.closeWork = sync.NewCond(&s.mu)
	s.closed = sync.NewCond(&s.mu)
	s.feed = newFeedPublisher(cfg.Conn, cfg.Service, cfg.ID, s.log)
	s.feed.interest = cfg.FeedInterest
	user := cfg.OnChange
	s.cfg.OnChange = func(scope, stream string, ephemeral bool, changes []store.Change) {
		s.feed.publish(scope, stream, ephemeral, changes)
		if user != nil {
			user(scope, stream, ephemeral, changes)
		}
	}
	return s, nil
}

// Start subscribes and starts the workers; requests are accepted once it
// returns. It follows the lifecycle rules: on a running server it returns
// an error matching lifecycle.ErrStarted, on a stopped one
// lifecycle.ErrStopped; a failed Start may be tried again.
func (s *Server) Start(ctx context.Context) error {
	return s.base.Start(ctx, "persist server", s.start)
}

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A directory's packs are fixed in number: a server asking for
	// another count is refused before it serves anything.
	if sq, ok := s.cfg.Storage.(*store.SQLite); ok && s.cfg.DataDir != "" {
		n, err := sq.PackCount()
		if err != nil {
			return fmt.Errorf("persist server: %w", err)
		}
		// A storage with an archive does not look in packs (their streams
		// have no file to copy): it would serve the streams there as
		// missing.
		if n > 0 && s.cfg.Archive != "" {
			return fmt.Errorf("persist server: data directory %s keeps streams in packs, which an archive cannot copy: serve it without an archive", s.cfg.DataDir)
		}
	}
	subject := bus.ScopeSubject(s.cfg.Service, "*", "api", s.cfg.ID)
	sub, err := s.cfg.Conn.Subscribe(subject, s.onMsg)
	if err != nil {
		return fmt.Errorf("persist server: subscribe %s: %w", subject, err)
	}
	// Large setMany bursts must queue here rather than be dropped as a slow
	// consumer; MaxQueue and MaxQueueBytes are the real bounds.
	if err := sub.SetPendingLimits(-1, subPendingBytes); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("persist server: %w", err)
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	if err := s.cfg.Conn.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("persist server: flush subscription: %w", err)
	}
	s.sub = sub
	s.stopTim = make(chan struct{})
	for range s.cfg.Workers {
		s.wg.Add(1)
		go s.worker()
	}
	s.wg.Add(1)
	go s.timer()
	// The closer outlives the workers, which evict until they are done:
	// closeStreams stops it.
	s.closerDone = make(chan struct{})
	go s.closer()
	// The count of streams on disk runs beside the requests: a data
	// directory of a million streams takes seconds to list.
	if l, ok := s.cfg.Storage.(store.Lister); ok && s.cfg.DataDir != "" {
		wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		s.walkStop, s.walkDone = stop, make(chan struct{})
		go func() {
			defer close(s.walkDone)
			s.walkStreams(wctx, l)
		}()
	} else {
		s.count.fail()
	}
	return nil
}

// Stop stops taking requests, answers those already received (writes are
// committed and answered), then closes every stream. It is idempotent and
// safe without Start. When ctx ends first, requests still queued, or still
// waiting in the subscription, are answered unavailable, requests NATS had
// not yet delivered are dropped (their callers time out and retry), the
// streams are closed anyway, and Stop returns an
// error wrapping ctx.Err(); it returns nil only when everything received was
// served. A write a worker is committing is finished, not cut short, so Stop
// may return after ctx ends. A stopped server does not start again.
func (s *Server) Stop(ctx context.Context) error {
	first := s.base.Stop(ctx, s.drain)
	s.closeOnce.Do(func() {
		if err := s.closeStreams(); err != nil && first == nil {
			first = err
		}
	})
	return first
}

// drain is the first phase of Stop on a started server: it stops taking
// requests and serves (or, once ctx ends, fails) those received.
func (s *Server) drain(ctx context.Context) error {
	s.mu.Lock()
	sub := s.sub
	s.mu.Unlock()
	var first error
	gaveUp := false // ctx ended before every request was served
	// Drain: the server forgets the subscription, then every message
	// already delivered to us goes through onMsg into a queue.
	closed := sub.StatusChanged(nats.SubscriptionClosed)
	if !s.cfg.Conn.IsConnected() {
		// A drain ends with a flush whose PONG cannot come while the
		// connection is down: it would wait out ctx. Nothing queued for
		// us can be answered now either; the clients retry elsewhere.
		_ = sub.Unsubscribe()
	} else if err := sub.Drain(); err != nil {
		first = fmt.Errorf("persist server: drain: %w", err)
		_ = sub.Unsubscribe()
	} else {
		select {
		case <-closed:
		case <-ctx.Done():
			s.refuseBuffered(sub, closed)
			gaveUp = true
		}
	}
	close(s.stopTim)
	s.mu.Lock()
	s.quit = true
	if ctx.Err() != nil && s.failQueuedLocked() > 0 {
		gaveUp = true
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		if s.failQueuedLocked() > 0 {
			gaveUp = true
		}
		s.mu.Unlock()
		<-done // a worker finishes the batch it holds; it cannot be interrupted mid-commit
	}
	if gaveUp && first == nil {
		first = fmt.Errorf("persist server: stop: %w", ctx.Err())
	}
	return first
}

// refuseBuffered ends the subscription of a Stop whose ctx ended before its
// drain did. The requests still in the subscription's buffer, received but
// not yet handed to onMsg, would go with it unanswered, and their callers
// would wait out their timeouts not knowing that nothing was applied (a
// write without a msgID is then not retried). So quit is set first, which
// makes onMsg answer each unavailable at once, with no storage work
// (enqueue), and the subscription ends once its buffer is empty: the wait
// is for the request being handled now (a write served inline, whose commit
// Stop waits for anyway), not for the drain's end, which takes a flush and
// nats.go's polling. Requests NATS delivers after that are dropped with
// the subscription.
func (s *Server) refuseBuffered(sub *nats.Subscription, closed <-chan nats.SubStatus) {
	s.mu.Lock()
	s.quit = true
	s.mu.Unlock()
	s.refusing.Store(true)
	// A handler returning from now on sees refusing: if one is running,
	// its request is counted here and it reports the buffer empty.
	if n, _, err := sub.Pending(); err == nil && n > 0 {
		select {
		case <-closed:
		case <-s.bufferEmpty:
		}
	}
	_ = sub.Unsubscribe()
}

// noteBufferEmpty, deferred by onMsg, tells refuseBuffered when the request
// just handled was the last the subscription held.
func (s *Server) noteBufferEmpty() {
	if !s.refusing.Load() {
		return
	}
	// The request being handled counts as pending until onMsg returns.
	if n, _, err := s.sub.Pending(); err != nil || n <= 1 {
		s.emptyOnce.Do(func() { close(s.bufferEmpty) })
	}
}

// closeStreams is the last phase of Stop: it closes every stream and the
// storage, keeping the first error.
func (s *Server) closeStreams() error {
	var first error
	s.mu.Lock()
	walkStop, walkDone := s.walkStop, s.walkDone
	s.mu.Unlock()
	if walkStop != nil {
		walkStop()
		<-walkDone
	}
	s.stopCloser()
	s.mu.Lock()
	hs := make([]*handle, 0, len(s.handles))
	for _, h := range s.handles {
		s.idle.remove(h)
		hs = append(hs, h)
	}
	s.handles = map[handleKey]*handle{}
	s.sized = 0
	s.mu.Unlock()
	if err := s.closeAll(hs); err != nil {
		first = err
	}
	for _, st := range []store.Storage{s.cfg.Storage, s.cfg.Memory} {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// stopClosers bounds the streams Stop closes at once. A full close is
// mostly waiting for the disk (the WAL's checkpoint and its fsyncs), so a
// few at a time overlap those waits: one after another, a server with a
// thousand streams open took seconds to exit.
const stopClosers = 8

// closeAll closes hs fully, stopClosers at a time, and returns the first
// error. The streams are independent files; the closer and the workers
// close streams concurrently too.
func (s *Server) closeAll(hs []*handle) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next := make(chan *handle)
	for range min(stopClosers, len(hs)) {
		wg.Go(func() {
			for h := range next {
				if err := s.closeHandle(h); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, h := range hs {
		next <- h
	}
	close(next)
	wg.Wait()
	return first
}

// onMsg is the subscription handler. nats.go calls it serially, so it only
// decodes, checks ownership and queues; storage work happens in workers,
// which check ownership again, and the request's deadline, just before
// applying it (admit).
func (s *Server) onMsg(m *nats.Msg) {
	defer s.noteBufferEmpty()
	// The requester picks the reply subject, and allow_responses lets this
	// server publish there whatever its own permissions: anywhere but an
	// inbox ($JS.API.…, another scope's feed or API, a subject some tenant
	// reads) the answer would be a publish the requester aimed, made with
	// a server's identity. A request without a reply subject cannot be
	// answered, so a write would be done unconfirmed and a read for
	// nothing: both are dropped, and counted.
	if !bus.IsInbox(m.Reply) {
		s.replyRefused.Add(1)
		s.log.Debug("persist: request whose reply subject is not an inbox dropped", "subject", m.Subject, "reply", m.Reply)
		return
	}
	scope := bus.SubjectToken(m.Subject, 1)
	if scope == persist.ServerScope {
		s.serveServer(m)
		return
	}
	if !bus.ValidScope(scope) {
		s.replyError(m, persist.Errorf(persist.CodeBadRequest, "invalid scope %q", scope))
		return
	}
	if owner := s.cfg.Placement(s.cfg.IDs, scope); owner != s.cfg.ID {
		s.replyError(m, persist.Errorf(persist.CodeWrongOwner, "scope %q belongs to server %s, not %s", scope, owner, s.cfg.ID))
		return
	}
	req, err := decodeRequest(m)
	if err == nil && req.isWrite() {
		err = s.checkAnswerRoom(req.ops)
	}
	if err == nil && req.cmd == persist.CmdSetMany {
		err = s.checkSetManyAnswer(len(req.ops))
	}
	if err != nil {
		s.replyError(m, err)
		return
	}
	j := &job{msg: m, req: req}
	if s.cfg.Observer != nil {
		j.start = time.Now()
	}
	s.enqueue(handleKey{scope: req.scope, name: req.stream, ephemeral: req.ephemeral}, j)
}
