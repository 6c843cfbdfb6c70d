package server

import (
	"context"
	"errors"
	"sync"

	"github.com/switchyard-dev/switchyard/persist/store"
)

// The total of persistent streams a server holds (Stats.Streams): at start
// a goroutine of the server walks the data directory (store.Lister: one
// directory read per scope, no stat per file) while the server answers,
// and the server's own creates and drops keep the figure up to date.
//
// The walk and the opens and drops running meanwhile must not count a
// stream twice or miss one, without a set of names (at a million streams
// about 100 MB): the figure is a count of the walk plus counted deltas.
// Every open or drop that can add or remove a stream file runs between
// begin and end of its scope, and a scope is counted by the walk only
// while none runs in it (blocked holds new ones back, busy says how many
// are in flight). So an operation on a scope ends either before the walk
// reads the scope, and the walk sees its effect (its delta, kept in early
// under the scope, is forgotten then), or after, and its delta counts; a
// scope the walk never reads (made after the walk read the data directory)
// keeps its deltas. Memory is a map entry per scope with operations in
// flight, and during the walk per scope changed since it began.
//
// The walk counts the scopes placement gave this server when it looked
// (servers of one process share a data directory): a scope moved to or
// from this server later is not counted again until a restart.
//
// The walk also lists the streams whose -wal a quick close left (cache.go):
// a restart would otherwise forget that they are to be compacted. The
// closer resolves each file's stream name (store.Lister.StreamName) when it
// has nothing else to do and compacts it as it does the streams it closed
// quickly itself. The list costs about 100 bytes per such stream.

// streamCount is the server's count of its persistent streams.
type streamCount struct {
	mu   sync.Mutex
	cond *sync.Cond // broadcast when busy drops to zero for a scope or blocked changes
	// total is the count once counted is set.
	total   int64
	counted bool
	// busy counts the operations in flight per scope (begin without end).
	busy map[string]int
	// blocked is the scope the walk is reading: begin waits while it is.
	blocked string
	// early holds, per scope, the deltas of operations that ended during
	// the walk (see above); nil once counted.
	early map[string]int64
	// walked sums the scopes the walk has read.
	walked int64
	// failed: the walk stopped short (an error, or the server stopping),
	// so there will be no total: end records nothing more.
	failed bool
}

func newStreamCount() *streamCount {
	c := &streamCount{busy: map[string]int{}, early: map[string]int64{}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Values of Stats.Streams that are not a count.
const (
	streamsCounting = -1 // the walk has not finished
	streamsUnknown  = -2 // there will be no count (see fail)
)

// value is the total, streamsCounting until the walk has finished, or
// streamsUnknown once it will not.
func (c *streamCount) value() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.counted:
		return c.total
	case c.failed:
		return streamsUnknown
	}
	return streamsCounting
}

// begin marks an operation that may add or remove a stream file of scope;
// it waits while the walk reads that scope.
func (c *streamCount) begin(scope string) {
	c.mu.Lock()
	for c.blocked == scope {
		c.cond.Wait()
	}
	c.busy[scope]++
	c.mu.Unlock()
}

// end ends an operation begun by begin; d is the stream files it added
// (1), removed (-1) or neither (0).
func (c *streamCount) end(scope string, d int64) {
	c.mu.Lock()
	if c.busy[scope]--; c.busy[scope] <= 0 {
		delete(c.busy, scope)
		c.cond.Broadcast()
	}
	switch {
	case c.counted:
		c.total += d
	case d != 0 && !c.failed:
		c.early[scope] += d
	}
	c.mu.Unlock()
}

// fail gives the count up (the walk did not finish, or there is none to
// run): the total stays unknown and the deltas kept for it are let go.
func (c *streamCount) fail() {
	c.mu.Lock()
	c.failed = true
	c.early = nil
	c.mu.Unlock()
}

// scan counts scope with fn (the walk's directory read) while no operation
// runs in it.
func (c *streamCount) scan(scope string, fn func() (int, error)) error {
	c.mu.Lock()
	c.blocked = scope
	for c.busy[scope] > 0 {
		c.cond.Wait()
	}
	c.mu.Unlock()
	n, err := fn()
	c.mu.Lock()
	c.blocked = ""
	c.cond.Broadcast()
	if err == nil {
		delete(c.early, scope)
		c.walked += int64(n)
	}
	c.mu.Unlock()
	return err
}

// finish sets the total from the walk and the deltas it did not see.
func (c *streamCount) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total = c.walked
	for _, d := range c.early {
		c.total += d
	}
	c.early = nil
	c.counted = true
}

// foundWAL is a stream file the walk found with a -wal beside it.
type foundWAL struct{ scope, file string }

// walkStreams is the walk goroutine's body: it counts the streams of the
// scopes this server owns and hands the closer those with a WAL left.
func (s *Server) walkStreams(ctx context.Context, l store.Lister) {
	var found []foundWAL
	flush := func() {
		if len(found) == 0 {
			return
		}
		s.mu.Lock()
		s.foundWAL = append(s.foundWAL, found...)
		s.closeWork.Signal()
		s.mu.Unlock()
		found = nil
	}
	err := l.Scopes(ctx, func(scope string) error {
		if s.cfg.Placement(s.cfg.IDs, scope) != s.cfg.ID {
			return nil
		}
		if s.beforeScan != nil {
			s.beforeScan(scope)
		}
		err := s.count.scan(scope, func() (int, error) {
			return l.ScanScope(scope, func(file string) { found = append(found, foundWAL{scope, file}) })
		})
		if len(found) >= 256 {
			flush()
		}
		return err
	})
	flush()
	if err != nil {
		s.count.fail()
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("persist: count streams in the data directory", "err", err)
		}
		return
	}
	s.count.finish()
}

// countOpen opens the stream of k as open does and keeps the count up to
// date: a persistent stream whose file the open made (a new stream, or one
// restored from the archive) adds one.
func (s *Server) countOpen(k handleKey, open func() (store.Stream, error)) (store.Stream, error) {
	l, ok := s.storage(k).(store.Lister)
	if k.ephemeral || !ok {
		return open()
	}
	// An open of a stream whose file exists (the common case: a stream
	// evicted and opened again) makes no file, so it need not wait for a
	// walk reading its scope: only creates are held back. A drop of the same
	// stream cannot run meanwhile, both being served on the stream's handle.
	if exists, err := l.HasStream(k.scope, k.name); err == nil && exists {
		return open()
	}
	s.count.begin(k.scope)
	before, berr := l.HasStream(k.scope, k.name)
	st, err := open()
	var d int64
	switch {
	case berr != nil || before:
		// Not known to be new, or not new.
	case err == nil:
		d = 1
	case errors.Is(err, store.ErrNoStream):
		// A read of a missing stream: nothing made.
	default:
		// A failed open normally removes what it made; count what it left.
		if after, aerr := l.HasStream(k.scope, k.name); aerr == nil && after {
			d = 1
		}
	}
	s.count.end(k.scope, d)
	return st, err
}

// countRemove removes the stream of k as Storage.Remove does and keeps the
// count up to date.
func (s *Server) countRemove(k handleKey) error {
	l, ok := s.storage(k).(store.Lister)
	if k.ephemeral || !ok {
		return s.storage(k).Remove(k.scope, k.name)
	}
	s.count.begin(k.scope)
	before, berr := l.HasStream(k.scope, k.name)
	err := s.storage(k).Remove(k.scope, k.name)
	var d int64
	if berr == nil && before {
		if err == nil {
			d = -1
		} else if after, aerr := l.HasStream(k.scope, k.name); aerr == nil && !after {
			d = -1
		}
	}
	s.count.end(k.scope, d)
	return err
}

// nextFoundLocked takes the next stream file the walk found with a WAL,
// with a slot to read its name in (it opens the file); false when none is
// listed or no slot is free.
func (s *Server) nextFoundLocked() (foundWAL, bool) {
	if len(s.foundWAL) == 0 {
		s.foundWAL = nil
		return foundWAL{}, false
	}
	if s.noCompact {
		return foundWAL{}, false
	}
	if !s.tryTakeSlot() {
		return foundWAL{}, false
	}
	s.resolving++
	f := s.foundWAL[0]
	s.foundWAL[0] = foundWAL{}
	s.foundWAL = s.foundWAL[1:]
	return f, true
}

// resolveFound reads the stream name of f, gives back the slot
// nextFoundLocked took, and lists the stream for compaction like one
// closed quickly (nextCompactLocked then skips it if it is in service).
func (s *Server) resolveFound(f foundWAL) {
	l, _ := s.cfg.Storage.(store.Lister)
	var name string
	var err error
	if l != nil {
		name, err = l.StreamName(f.scope, f.file)
	}
	s.giveSlot()
	s.mu.Lock()
	s.resolving--
	s.closed.Broadcast() // an open waiting in takeSlot has its slot
	s.mu.Unlock()
	if l == nil || errors.Is(err, store.ErrNoStream) || errors.Is(err, store.ErrInUse) {
		return // gone, or open: its close decides (finishClose)
	}
	if err != nil {
		s.log.Warn("persist: read stream name to compact it", "scope", f.scope, "file", f.file, "err", err)
		return
	}
	k := handleKey{scope: f.scope, name: name}
	s.mu.Lock()
	if _, listed := s.compacting[k]; !listed {
		s.compacting[k] = struct{}{}
		s.toCompact = append(s.toCompact, k)
	}
	s.mu.Unlock()
}
