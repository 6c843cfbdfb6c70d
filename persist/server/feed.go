package server

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
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

	mu       sync.Mutex // protects counters
	counters map[handleKey]uint64

	// interest counts the listeners of a subject on the NATS server of nc
	// (Config.FeedInterest); nil: publish every message.
	interest func(subject string) int

	published atomic.Uint64 // feed messages handed to the connection
	failed    atomic.Uint64 // feed messages the connection refused (counted in Sy-Feed-N all the same)
	local     atomic.Uint64 // feed messages handed to watchers of this process only, not published
	unheard   atomic.Uint64 // feed messages not published: nobody listened
}

func newFeedPublisher(nc *nats.Conn, service, id string, log *slog.Logger) *feedPublisher {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &feedPublisher{nc: nc, service: service, id: id, epoch: hex.EncodeToString(b[:]), log: log, counters: map[handleKey]uint64{}}
}

// next returns the next message number of stream k.
func (f *feedPublisher) next(k handleKey) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counters[k]++
	return f.counters[k]
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
		v := [...]string{f.epoch, itoa(f.next(k)), f.id, stream, itoa(first), itoa(last), "true"}
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
