package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/placement"
)

// Server defaults.
const (
	// MaxOpenStreamsDefault bounds the open stream files of a server.
	MaxOpenStreamsDefault = 1000
	// IdleCloseDefault is how long an unused stream stays open.
	IdleCloseDefault = 5 * time.Minute
	// ExpireEveryDefault is the period of the TTL / max_age / idle timer.
	ExpireEveryDefault = time.Second
	// MaxQueueDefault bounds the requests waiting on one stream; more are
	// answered unavailable.
	MaxQueueDefault = 10000
	// MaxCommitOpsDefault bounds the messages of one group-commit transaction.
	MaxCommitOpsDefault = 10000
)

// flushTimeout bounds Start's wait for the subscription to reach NATS when
// ctx has no deadline.
const flushTimeout = 5 * time.Second

// WorkersDefault is the number of stream workers: twice the CPUs, at least 4.
func WorkersDefault() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// ServerConfig configures a Server.
type ServerConfig struct {
	// Conn is the NATS connection to serve on. Required.
	Conn *nats.Conn
	// ID is this server's member id. Required; must be one of IDs.
	ID string
	// IDs lists every member id, in the same order everywhere. Required.
	IDs []string
	// Placement maps a scope to its owner. Nil means placement.Rendezvous.
	Placement placement.Func
	// Service is the first subject token. Empty means bus.DefaultService.
	Service string
	// DataDir holds one SQLite file per stream. Empty means the server keeps
	// ephemeral streams only and refuses the others with bad-request.
	DataDir string
	// Logger receives errors of the background loops. Nil means slog.Default().
	Logger *slog.Logger
	// MaxOpenStreams bounds the open streams; the least recently used idle one
	// is closed beyond it (a stream with queued work is never closed). Zero
	// means MaxOpenStreamsDefault.
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
	// MaxCommitOps bounds the messages in one group-commit transaction. Zero
	// means MaxCommitOpsDefault.
	MaxCommitOps int
	// OnChange, if set, receives every commit's changes (sets, and deletes
	// whether asked for or caused by a limit, TTL or age), in order, after
	// the commit. It is called from the stream's worker and must not block
	// for long. Nil means changes are not reported.
	OnChange func(scope, stream string, ephemeral bool, changes []Change)
	// Storage stores the streams. Nil means SQLite under DataDir.
	Storage Storage
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
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.Placement == nil {
		c.Placement = placement.Rendezvous
	}
	if c.Service == "" {
		c.Service = bus.DefaultService
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxOpenStreams == 0 {
		c.MaxOpenStreams = MaxOpenStreamsDefault
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
	if c.MaxCommitOps == 0 {
		c.MaxCommitOps = MaxCommitOpsDefault
	}
	if c.ArchiveEvery == 0 {
		c.ArchiveEvery = ArchiveEveryDefault
	}
	if c.Storage == nil {
		c.Storage = &sqliteStorage{dir: c.DataDir, archive: c.Archive}
	}
	return c
}

func (c ServerConfig) validate() error {
	if c.Conn == nil {
		return errors.New("persist server: Conn is required")
	}
	if len(c.IDs) == 0 {
		return errors.New("persist server: IDs is required")
	}
	if !slices.Contains(c.IDs, c.ID) {
		return fmt.Errorf("persist server: id %q is not in ids %v", c.ID, c.IDs)
	}
	seen := map[string]bool{}
	for _, id := range c.IDs {
		if id == "" || seen[id] {
			return fmt.Errorf("persist server: ids must be distinct and non-empty, got %v", c.IDs)
		}
		seen[id] = true
	}
	if c.MaxOpenStreams < 0 || c.IdleClose < 0 || c.ExpireEvery < 0 || c.Workers < 0 || c.MaxQueue < 0 || c.MaxCommitOps < 0 || c.ArchiveEvery < 0 {
		return errors.New("persist server: limits must not be negative")
	}
	if err := c.validateArchive(); err != nil {
		return err
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
	cfg ServerConfig
	log *slog.Logger

	mu      sync.Mutex // protects everything below it
	cond    *sync.Cond // workers wait on it for ready streams
	handles map[handleKey]*handle
	ready   []*handle // streams with queued work, not being served
	quit    bool      // workers exit once ready is empty
	started bool
	stopped bool
	sub     *nats.Subscription

	wg      sync.WaitGroup // workers and the timer loop
	stopTim chan struct{}

	commits atomic.Uint64  // write transactions committed, for tests and stats
	feed    *feedPublisher // publishes every commit's changes (feed.go)

	// beforeWrite, if set (tests only), runs before each group commit with
	// the number of messages in it.
	beforeWrite func(n int)
}

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
	st             StreamStore
}

// job is one request waiting on a stream (or an internal expiry run).
type job struct {
	msg     *nats.Msg
	req     *request
	expire  bool
	archive bool // back the stream up (archive.go)
}

// NewServer checks cfg and returns a server that is not yet serving.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, handles: map[handleKey]*handle{}}
	s.cond = sync.NewCond(&s.mu)
	s.feed = newFeedPublisher(cfg.Conn, cfg.Service, cfg.ID, cfg.Logger)
	user := cfg.OnChange
	s.cfg.OnChange = func(scope, stream string, ephemeral bool, changes []Change) {
		s.feed.publish(scope, stream, ephemeral, changes)
		if user != nil {
			user(scope, stream, ephemeral, changes)
		}
	}
	return s, nil
}

// Start subscribes and starts the workers; requests are accepted once it
// returns.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errors.New("persist server: already started")
	}
	subject := bus.ScopeSubject(s.cfg.Service, "*", "api", s.cfg.ID)
	sub, err := s.cfg.Conn.Subscribe(subject, s.onMsg)
	if err != nil {
		return fmt.Errorf("persist server: subscribe %s: %w", subject, err)
	}
	// Large setMany bursts must queue here rather than be dropped as a slow
	// consumer; the per-stream MaxQueue is the real bound.
	if err := sub.SetPendingLimits(-1, 256<<20); err != nil {
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
	s.started = true
	s.stopTim = make(chan struct{})
	for range s.cfg.Workers {
		s.wg.Add(1)
		go s.worker()
	}
	s.wg.Add(1)
	go s.timer()
	return nil
}

// Stop stops taking requests, answers those already received (writes are
// committed and answered), then closes every stream. It is idempotent and
// safe without Start. When ctx ends first, requests still queued are answered
// unavailable and the streams are closed anyway.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	started, sub := s.started, s.sub
	s.mu.Unlock()
	var first error
	if started {
		// Drain: the server forgets the subscription, then every message
		// already delivered to us goes through onMsg into a queue.
		closed := sub.StatusChanged(nats.SubscriptionClosed)
		if err := sub.Drain(); err != nil {
			first = fmt.Errorf("persist server: drain: %w", err)
			_ = sub.Unsubscribe()
		} else {
			select {
			case <-closed:
			case <-ctx.Done():
				_ = sub.Unsubscribe()
			}
		}
		close(s.stopTim)
		s.mu.Lock()
		s.quit = true
		if ctx.Err() != nil {
			s.failQueuedLocked()
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.mu.Lock()
			s.failQueuedLocked()
			s.mu.Unlock()
			<-done // a worker finishes the batch it holds; it cannot be interrupted mid-commit
		}
	}
	s.mu.Lock()
	hs := make([]*handle, 0, len(s.handles))
	for _, h := range s.handles {
		hs = append(hs, h)
	}
	s.handles = map[handleKey]*handle{}
	s.mu.Unlock()
	for _, h := range hs {
		if err := closeHandle(h); err != nil && first == nil {
			first = err
		}
	}
	if err := s.cfg.Storage.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// failQueuedLocked answers every queued request unavailable.
func (s *Server) failQueuedLocked() {
	for _, h := range s.ready {
		for _, j := range h.queue {
			if j.msg != nil {
				s.replyError(j.msg, Errorf(CodeUnavailable, "server stopping"))
			}
		}
		h.queue = nil
		h.scheduled = false
	}
	s.ready = nil
}

func closeHandle(h *handle) error {
	if h.st == nil {
		return nil
	}
	err := h.st.Close()
	h.st = nil
	return err
}

// onMsg is the subscription handler. nats.go calls it serially, so it only
// decodes, checks ownership and queues; storage work happens in workers.
func (s *Server) onMsg(m *nats.Msg) {
	scope := bus.SubjectToken(m.Subject, 1)
	if !bus.ValidScope(scope) {
		s.replyError(m, Errorf(CodeBadRequest, "invalid scope %q", scope))
		return
	}
	if owner := s.cfg.Placement(s.cfg.IDs, scope); owner != s.cfg.ID {
		s.replyError(m, Errorf(CodeWrongOwner, "scope %q belongs to server %s, not %s", scope, owner, s.cfg.ID))
		return
	}
	req, err := decodeRequest(m)
	if err == nil && req.isWrite() {
		err = s.checkAnswerRoom(req.ops)
	}
	if err != nil {
		s.replyError(m, err)
		return
	}
	s.enqueue(handleKey{scope: req.scope, name: req.stream, ephemeral: req.ephemeral}, &job{msg: m, req: req})
}

// enqueue queues j on the stream of k and makes sure a worker will serve it.
func (s *Server) enqueue(k handleKey, j *job) {
	s.mu.Lock()
	if s.quit {
		s.mu.Unlock()
		s.replyError(j.msg, Errorf(CodeUnavailable, "server stopping"))
		return
	}
	h := s.handles[k]
	if h == nil {
		h = &handle{key: k}
		s.handles[k] = h
	}
	if len(h.queue) >= s.cfg.MaxQueue {
		s.mu.Unlock()
		s.replyError(j.msg, Errorf(CodeUnavailable, "stream has %d requests waiting; retry later", s.cfg.MaxQueue))
		return
	}
	h.queue = append(h.queue, j)
	h.lastUsed = time.Now()
	s.scheduleLocked(h)
	s.mu.Unlock()
}

func (s *Server) scheduleLocked(h *handle) {
	if !h.scheduled {
		h.scheduled = true
		s.ready = append(s.ready, h)
		s.cond.Signal()
	}
}

// worker serves ready streams until Stop.
func (s *Server) worker() {
	defer s.wg.Done()
	var spare []*job
	for {
		s.mu.Lock()
		for len(s.ready) == 0 && !s.quit {
			s.cond.Wait()
		}
		if len(s.ready) == 0 {
			s.mu.Unlock()
			return
		}
		h := s.ready[0]
		s.ready[0] = nil
		s.ready = s.ready[1:]
		jobs := h.queue
		h.queue = spare[:0]
		s.mu.Unlock()

		s.serve(h, jobs)
		needs := h.st != nil && h.st.NeedsExpiry()
		clear(jobs)

		s.mu.Lock()
		spare = jobs
		h.lastUsed = time.Now()
		h.needsExpiry = needs
		if len(h.queue) > 0 {
			s.ready = append(s.ready, h)
			s.cond.Signal()
		} else {
			h.scheduled = false
		}
		evict := s.evictLocked(time.Now(), false)
		s.mu.Unlock()
		s.closeAll(evict)
	}
}

// evictLocked removes idle streams from the cache: beyond MaxOpenStreams the
// least recently used first, and (when idle is set) those unused for
// IdleClose. Streams with queued or running work stay. The caller closes
// what it returns, outside the lock.
func (s *Server) evictLocked(now time.Time, idle bool) []*handle {
	var out []*handle
	if idle {
		for k, h := range s.handles {
			if !h.scheduled && now.Sub(h.lastUsed) >= s.cfg.IdleClose {
				delete(s.handles, k)
				out = append(out, h)
			}
		}
	}
	if excess := len(s.handles) - s.cfg.MaxOpenStreams; excess > 0 {
		var idleHs []*handle
		for _, h := range s.handles {
			if !h.scheduled {
				idleHs = append(idleHs, h)
			}
		}
		slices.SortFunc(idleHs, func(a, b *handle) int { return a.lastUsed.Compare(b.lastUsed) })
		for _, h := range idleHs[:min(excess, len(idleHs))] {
			delete(s.handles, h.key)
			out = append(out, h)
		}
	}
	return out
}

func (s *Server) closeAll(hs []*handle) {
	for _, h := range hs {
		if err := closeHandle(h); err != nil {
			s.log.Warn("persist: close stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
		}
	}
}

// timer runs expiry on open streams and closes idle ones.
func (s *Server) timer() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ExpireEvery)
	defer t.Stop()
	var archiveC <-chan time.Time // nil (never ready) without an archive
	if s.cfg.Archive != "" {
		at := time.NewTicker(s.cfg.ArchiveEvery)
		defer at.Stop()
		archiveC = at.C
	}
	for {
		select {
		case <-s.stopTim:
			return
		case <-archiveC:
			s.mu.Lock()
			s.queueArchivesLocked()
			s.mu.Unlock()
		case now := <-t.C:
			s.mu.Lock()
			for _, h := range s.handles {
				if h.needsExpiry && !h.expirePending {
					h.expirePending = true
					h.queue = append(h.queue, &job{expire: true})
					s.scheduleLocked(h)
				}
			}
			evict := s.evictLocked(now, true)
			s.mu.Unlock()
			s.closeAll(evict)
		}
	}
}

// serve runs jobs on h in order; consecutive writes share one transaction.
func (s *Server) serve(h *handle, jobs []*job) {
	if h.st == nil {
		st, err := s.cfg.Storage.Open(h.key.scope, h.key.name, h.key.ephemeral, time.Now())
		if err != nil {
			if CodeOf(err) == CodeInternal {
				s.log.Error("persist: open stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
			}
			for _, j := range jobs {
				if j.msg != nil {
					s.replyError(j.msg, err)
				}
			}
			s.clearExpirePending(h, jobs)
			s.clearArchivePending(h, jobs)
			return
		}
		h.st = st
	}
	for i := 0; i < len(jobs); {
		j := jobs[i]
		if j.req == nil || !j.req.isWrite() {
			s.serveOne(h, j)
			i++
			continue
		}
		n, end := 0, i
		for end < len(jobs) && jobs[end].req != nil && jobs[end].req.isWrite() && (end == i || n+len(jobs[end].req.ops) <= s.cfg.MaxCommitOps) {
			n += len(jobs[end].req.ops)
			end++
		}
		s.writeBatch(h, jobs[i:end], n)
		i = end
	}
}

func (s *Server) clearExpirePending(h *handle, jobs []*job) {
	for _, j := range jobs {
		if j.expire {
			s.mu.Lock()
			h.expirePending = false
			s.mu.Unlock()
			return
		}
	}
}

// writeBatch commits the writes of jobs in one transaction, then answers
// each job.
func (s *Server) writeBatch(h *handle, jobs []*job, n int) {
	var ops []WriteOp
	if len(jobs) == 1 {
		ops = jobs[0].req.ops
	} else {
		ops = make([]WriteOp, 0, n)
		for _, j := range jobs {
			ops = append(ops, j.req.ops...)
		}
	}
	if s.beforeWrite != nil {
		s.beforeWrite(len(ops))
	}
	results, changes, err := h.st.Write(ops, time.Now())
	if err != nil {
		s.log.Error("persist: write", "scope", h.key.scope, "stream", h.key.name, "err", err)
		for _, j := range jobs {
			s.replyError(j.msg, Errorf(CodeInternal, "%v", err))
		}
		return
	}
	s.commits.Add(1)
	s.report(h, changes)
	for _, j := range jobs {
		k := len(j.req.ops)
		res := results[:k]
		results = results[k:]
		if j.req.cmd == CmdSet {
			s.replySet(j.msg, res[0])
		} else {
			s.replySetMany(j.msg, res)
		}
	}
}

func (s *Server) report(h *handle, changes []Change) {
	if len(changes) > 0 && s.cfg.OnChange != nil {
		s.cfg.OnChange(h.key.scope, h.key.name, h.key.ephemeral, changes)
	}
}

// serveOne runs one non-write job.
func (s *Server) serveOne(h *handle, j *job) {
	if j.archive {
		s.runArchive(h)
		return
	}
	if j.expire {
		s.mu.Lock()
		h.expirePending = false
		s.mu.Unlock()
		changes, err := h.st.Expire(time.Now())
		if err != nil {
			s.log.Error("persist: expire", "scope", h.key.scope, "stream", h.key.name, "err", err)
			return
		}
		s.report(h, changes)
		return
	}
	m, r := j.msg, j.req
	switch r.cmd {
	case CmdGet:
		var msg *Message
		var err error
		if r.hasSeq {
			msg, err = h.st.Get(r.seq)
		} else {
			msg, err = h.st.GetKey(r.key)
		}
		if err != nil {
			s.replyError(m, err)
			return
		}
		s.replyGet(m, msg)
	case CmdGetAll:
		s.serveGetAll(h, m, r)
	case CmdDelete:
		seqs, changes, err := h.st.Delete(r.del, time.Now())
		if err != nil {
			s.replyError(m, err)
			return
		}
		s.report(h, changes)
		s.replyJSON(m, DeleteResult{Seqs: seqs})
	case CmdKeys:
		keys, err := h.st.Keys()
		if err != nil {
			s.replyError(m, err)
			return
		}
		s.replyJSON(m, keys)
	case CmdInventory:
		s.replyJSON(m, h.st.Inventory())
	case CmdConfig:
		if r.configPatch == nil {
			s.replyJSON(m, h.st.Config())
			return
		}
		next, err := mergeConfig(h.st.Config(), r.configPatch)
		if err != nil {
			s.replyError(m, err)
			return
		}
		cfg, changes, err := h.st.SetConfig(next, time.Now())
		s.report(h, changes)
		if err != nil {
			s.replyError(m, err)
			return
		}
		s.replyJSON(m, cfg)
	default:
		// decodeRequest admits only known commands.
		s.replyError(m, Errorf(CodeInternal, "unhandled command %q", r.cmd))
	}
}

// serveGetAll streams the selected messages to the reply subject in chunks
// of frames of at most ChunkBytes (a single larger message gets a chunk of
// its own), numbered from 0; the last chunk carries Sy-Eof and, when
// Sy-Limit cut the range, Sy-Next-Seq.
func (s *Server) serveGetAll(h *handle, m *nats.Msg, r *request) {
	if m.Reply == "" {
		return
	}
	chunk := 0
	var buf, frame []byte
	publish := func(eof bool, next uint64) error {
		out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}, Data: buf}
		out.Header.Set(HdrChunk, itoa(uint64(chunk)))
		if eof {
			out.Header.Set(HdrEOF, "true")
			if next > 0 {
				out.Header.Set(HdrNextSeq, itoa(next))
			}
		}
		chunk++
		// PublishMsg copies the data into the connection's buffer.
		err := s.cfg.Conn.PublishMsg(out)
		buf = buf[:0]
		return err
	}
	start := max(r.start, 1)
	next, err := h.st.GetAll(start, r.end, r.limit, func(msg *Message) error {
		var err error
		if frame, err = AppendFrame(frame[:0], msg); err != nil {
			return err
		}
		if len(buf) > 0 && len(buf)+len(frame) > ChunkBytes {
			if err := publish(false, 0); err != nil {
				return fmt.Errorf("publish chunk: %w", err)
			}
		}
		buf = append(buf, frame...)
		return nil
	})
	if err == nil {
		err = publish(true, next)
	}
	if err != nil {
		s.log.Error("persist: getAll", "scope", h.key.scope, "stream", h.key.name, "err", err)
		s.replyError(m, Errorf(CodeInternal, "getAll failed after %d chunks: %v", chunk, err))
	}
}
