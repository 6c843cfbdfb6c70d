package server

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// feedDeleteChunk bounds the seqs of one delete frame (wire.md: at most
// 8,192). At most feedSeqBytes each as JSON, that is up to 172 KB, under
// FeedChunkBytes but not under every max payload: publish also bounds a
// frame's seqs by what one message's body holds.
const feedDeleteChunk = 8192

const (
	// feedSeqBytes is the most one seq adds to a delete frame: 20 digits
	// and a comma.
	feedSeqBytes = 21
	// feedDeleteRoom is the rest of a delete frame: its JSON around the
	// seqs ({"op":"delete","seqs":[]}) and its two length prefixes.
	feedDeleteRoom = 64
)

// feedPublisher publishes commits on feed subjects. The server calls it from
// stream workers; one stream is served by one worker at a time, so the
// messages of one stream leave in commit order.
type feedPublisher struct {
	nc      *nats.Conn
	service string
	id      string
	epoch   string
	log     *slog.Logger

	mu       sync.Mutex // protects counters, closedQ, marks and forgotten
	counters map[handleKey]*feedCounter
	// closedQ lists the counters of closed streams in the order their
	// streams closed, each with the mark of its close; past keepClosed of
	// them the oldest is forgotten (see closed).
	closedQ    []closedCounter
	keepClosed int
	marks      uint64 // closes so far: the next close's mark is marks+1
	// forgotten counts the counters forgotten so far: a counter made now
	// takes it as its gen, so a stream whose counter was forgotten never
	// numbers a second time under an epoch it used (see feedCounter).
	forgotten uint64

	// interest counts the listeners of a subject on the NATS server of nc
	// (Config.FeedInterest); nil: publish every message.
	interest func(subject string) int

	published atomic.Uint64 // feed messages handed to the connection
	failed    atomic.Uint64 // feed messages the connection refused (counted in Sy-Feed-N all the same)
	local     atomic.Uint64 // feed messages handed to watchers of this process only, not published
	unheard   atomic.Uint64 // feed messages not published: nobody listened
}

// feedClosedCounters is how many closed streams' feed counters a server
// keeps (feedPublisher.closed): about 160 bytes each and 48 in closedQ, so
// at most about 3.3 MiB beside the open streams' own, where a counter for
// every stream written since the start held 133 MiB after a million
// streams (measured). 16,384 closes is about thirteen times the default
// open-stream cap: a stream closed for room and written again soon keeps
// its numbering.
const feedClosedCounters = 1 << 14

// feedCounter numbers the feed messages of one stream. The numbers run
// under the publisher's epoch when gen is 0, else under the epoch
// followed by "." and gen: a counter forgotten and made again starts at 1
// under an epoch the stream has not used, which its watchers take for a
// new publisher (they re-read the stream), never for a replay of numbers
// they have seen.
type feedCounter struct {
	n      uint64 // the number of the last message
	gen    uint64
	closed uint64 // the mark of the close that listed it in closedQ; 0 once written again
}

// closedCounter is one entry of feedPublisher.closedQ.
type closedCounter struct {
	k    handleKey
	mark uint64
}

func newFeedPublisher(nc *nats.Conn, service, id string, log *slog.Logger) *feedPublisher {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &feedPublisher{nc: nc, service: service, id: id, epoch: hex.EncodeToString(b[:]), log: log, counters: map[handleKey]*feedCounter{}, keepClosed: feedClosedCounters}
}

// next returns the next message number of stream k and the gen of the
// epoch it is numbered under (see feedCounter).
func (f *feedPublisher) next(k handleKey) (gen, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.counters[k]
	if c == nil {
		c = &feedCounter{gen: f.forgotten}
		f.counters[k] = c
	}
	c.closed = 0
	c.n++
	return c.gen, c.n
}

// epochOf is the epoch string of gen.
func (f *feedPublisher) epochOf(gen uint64) string {
	if gen == 0 {
		return f.epoch
	}
	return f.epoch + "." + strconv.FormatUint(gen, 10)
}

// closed is told that the server closed stream k. Its counter is kept
// while the stream is among the last keepClosed closed ones, so that a
// stream closed and opened again soon (the open-stream cache evicts idle
// streams) numbers on and its watchers notice nothing; past that it is
// forgotten, so that what the counters hold follows the open streams, not
// every stream written since the start. A stream written again after that
// numbers under a new gen, and its watchers re-read it once. A close
// racing a newer handle's writes (a stream reopened before its old
// handle's close) may forget a counter in use: the next message then
// starts a new gen, a re-read, never a wrong number.
func (f *feedPublisher) closed(k handleKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.counters[k]
	if c == nil {
		return
	}
	f.marks++
	c.closed = f.marks
	f.closedQ = append(f.closedQ, closedCounter{k: k, mark: f.marks})
	for len(f.closedQ) > f.keepClosed {
		q := f.closedQ[0]
		f.closedQ[0] = closedCounter{}
		f.closedQ = f.closedQ[1:]
		// A counter written since its close, or closed again later (a
		// newer entry stands for it), is not this entry's to forget.
		if c := f.counters[q.k]; c != nil && c.closed == q.mark {
			delete(f.counters, q.k)
			f.forgotten++
		}
	}
}

// listeners is how many subscriptions to subject the NATS server of f's
// connection, in this process, holds now; -1 when it cannot tell (no
// interest count, not connected).
func (f *feedPublisher) listeners(subject string) int {
	if f.interest == nil || f.nc.ConnectedServerId() == "" {
		return -1
	}
	return f.interest(subject)
}

// publish sends changes as one or more feed messages. It never blocks on
// the network beyond what nats.go's buffered Publish does, and a failed
// publish still consumes its number, so watchers see the loss as a gap.
func (f *feedPublisher) publish(scope, stream string, ephemeral bool, changes []store.Change) {
	k := handleKey{scope: scope, name: stream, ephemeral: ephemeral}
	subject := persist.FeedSubject(f.service, scope, stream, ephemeral)
	// Counted once per commit, for all its messages.
	listeners := f.listeners(subject)
	if listeners == 0 {
		// Nobody listens, as most streams of a fleet: nothing to build.
		// The commit still takes its number, as a message nobody heard
		// does below, so a watcher that comes later sees the jump.
		f.next(k)
		f.unheard.Add(1)
		return
	}
	limit := max(int(f.nc.MaxPayload())-4096, 1024) // room for the headers
	bodyMax := min(persist.FeedChunkBytes, limit)
	// A delete frame must fit one message's body: only whole frames are
	// split over messages, and a frame over the max payload failed to
	// publish, a gap for every watcher.
	deleteChunk := min(feedDeleteChunk, max(1, (bodyMax-feedDeleteRoom)/feedSeqBytes))
	var (
		body, frame []byte
		first, last uint64
		errOnce     bool
	)
	flush := func() {
		if len(body) == 0 {
			return
		}
		// Every commit publishes: the header values share one array
		// instead of a slice each (Header.Set).
		gen, n := f.next(k)
		v := [...]string{f.epochOf(gen), itoa(n), f.id, stream, itoa(first), itoa(last), "true"}
		h := make(nats.Header, len(v))
		h[persist.HdrFeedEpoch] = v[0:1:1]
		h[persist.HdrFeedN] = v[1:2:2]
		h[persist.HdrServer] = v[2:3:3]
		h[persist.HdrStream] = v[3:4:4]
		h[persist.HdrFirstSeq] = v[4:5:5]
		h[persist.HdrLastSeq] = v[5:6:6]
		if ephemeral {
			h[persist.HdrEphemeral] = v[6:7:7]
		}
		m := &nats.Msg{Subject: subject, Header: h, Data: body}
		// Each way copies the body, which is reused once flush returns.
		switch n, handled := persist.DeliverFeedLocally(m, f.nc.ConnectedServerId(), listeners); {
		case handled && n > 0:
			f.local.Add(1)
		case handled:
			f.unheard.Add(1)
		default:
			if err := f.nc.PublishMsg(m); err != nil {
				f.failed.Add(1)
				if !errOnce {
					errOnce = true
					f.log.Warn("persist: feed publish", "scope", scope, "stream", stream, "err", err)
				}
			} else {
				f.published.Add(1)
			}
		}
		body, first, last = body[:0], 0, 0
	}
	emit := func(lo, hi uint64) {
		if len(body) > 0 && len(body)+len(frame) > bodyMax {
			flush()
		}
		body = append(body, frame...)
		if first == 0 || lo < first {
			first = lo
		}
		last = max(last, hi)
	}
	for _, c := range changes {
		switch c.Op {
		case store.ChangeSet:
			tmp := *c.Msg
			tmp.Op = ""
			var err error
			if frame, err = persist.AppendFrame(frame[:0], &tmp); err != nil || len(frame) > limit {
				// Too large to travel (or, impossibly, not encodable):
				// watchers fetch it by seq.
				frame, _ = persist.AppendFrame(frame[:0], &persist.Frame{Seq: c.Msg.Seq, Time: c.Msg.Time, Key: c.Msg.Key, Op: persist.FeedOpRef})
			}
			emit(c.Msg.Seq, c.Msg.Seq)
		case store.ChangeDelete:
			// A huge delete (all, up-to) is split so no frame outgrows a message.
			for seqs := c.Seqs; len(seqs) > 0; {
				part := seqs[:min(len(seqs), deleteChunk)]
				seqs = seqs[len(part):]
				frame, _ = persist.AppendFrame(frame[:0], &persist.Frame{Op: persist.FeedOpDelete, Seqs: part})
				emit(part[0], part[len(part)-1])
			}
		}
	}
	flush()
}
