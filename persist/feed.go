package persist

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
)

// The change feed: after each commit, the server that wrote a stream
// publishes the commit's changes on the stream's feed subject,
// "{service}.{scope}.feed.{streamKey}", in seq order (see docs/wire.md).
// The subject names the stream, not the server, so a write that reached the
// wrong server still reaches every watcher.
//
// A feed message's body is frames (AppendFrame): one per change. Its headers
// let a watcher notice loss without decoding anything:
//
//	Sy-Feed-Epoch  the publisher's epoch: random, new each time a server starts
//	Sy-Feed-N      1, 2, 3... per stream within an epoch; a missing number is a lost message
//	Sy-Server      the publishing server's id
//	Sy-Stream      the stream's name (the subject may carry a hash of it)
//	Sy-First-Seq   the lowest seq the message mentions
//	Sy-Last-Seq    the highest seq the message mentions
//	Sy-Ephemeral   "true" for an ephemeral stream

// Feed header names.
const (
	HdrFeedEpoch = "Sy-Feed-Epoch" // publisher epoch (feed messages)
	HdrFeedN     = "Sy-Feed-N"     // per-stream message counter within the epoch (feed messages)
	HdrServer    = "Sy-Server"     // publishing server id (feed messages)
	HdrFirstSeq  = "Sy-First-Seq"  // lowest seq in a feed message
	HdrLastSeq   = "Sy-Last-Seq"   // highest seq in a feed message
)

// Feed frame operations (Message.Op).
const (
	FeedOpSet    = "set"    // Msg is a stored message, value included
	FeedOpDelete = "delete" // Seqs were removed
	FeedOpRef    = "ref"    // a stored message too large for the feed: fetch Seq with get or getAll
)

// FeedChunkBytes is the target body size of one feed message: a commit whose
// frames exceed it is split over several consecutive messages.
const FeedChunkBytes = 256 << 10

// feedDeleteChunk bounds the seqs of one delete frame: at most 21 bytes each
// as JSON, so a frame stays under FeedChunkBytes.
const feedDeleteChunk = 8192

// streamKeyMax is the longest stream name used verbatim as a subject token.
const streamKeyMax = 64

// FeedSubject is the subject the changes of stream travel on:
// "{service}.{scope}.feed.{streamKey}". The key is the name itself when it
// is 1 to 64 of [A-Za-z0-9_-], else "~" and the first 32 hex digits of the
// SHA-256 of the name (a subject token can hold neither dots nor wildcards);
// ephemeral streams append "~e", so they never share a feed with the durable
// stream of the same name.
func FeedSubject(service, scope, stream string, ephemeral bool) string {
	if service == "" {
		service = bus.DefaultService
	}
	return bus.ScopeSubject(service, scope, "feed", streamKey(stream, ephemeral))
}

func streamKey(name string, ephemeral bool) string {
	key := name
	if !plainToken(name) {
		sum := sha256.Sum256([]byte(name))
		key = "~" + hex.EncodeToString(sum[:])[:hashHexLen]
	}
	if ephemeral {
		key += "~e"
	}
	return key
}

func plainToken(s string) bool {
	if len(s) == 0 || len(s) > streamKeyMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

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

	published atomic.Uint64 // feed messages handed to the connection
	failed    atomic.Uint64 // feed messages the connection refused (counted in Sy-Feed-N all the same)
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

// publish sends changes as one or more feed messages. It never blocks on
// the network beyond what nats.go's buffered Publish does, and a failed
// publish still consumes its number, so watchers see the loss as a gap.
func (f *feedPublisher) publish(scope, stream string, ephemeral bool, changes []Change) {
	k := handleKey{scope: scope, name: stream, ephemeral: ephemeral}
	subject := FeedSubject(f.service, scope, stream, ephemeral)
	limit := max(int(f.nc.MaxPayload())-4096, 1024) // room for the headers
	var (
		body, frame []byte
		first, last uint64
		errOnce     bool
	)
	flush := func() {
		if len(body) == 0 {
			return
		}
		m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: body}
		m.Header.Set(HdrFeedEpoch, f.epoch)
		m.Header.Set(HdrFeedN, itoa(f.next(k)))
		m.Header.Set(HdrServer, f.id)
		m.Header.Set(HdrStream, stream)
		m.Header.Set(HdrFirstSeq, itoa(first))
		m.Header.Set(HdrLastSeq, itoa(last))
		if ephemeral {
			m.Header.Set(HdrEphemeral, "true")
		}
		// PublishMsg copies the body into the connection's buffer.
		if err := f.nc.PublishMsg(m); err != nil {
			f.failed.Add(1)
			if !errOnce {
				errOnce = true
				f.log.Warn("persist: feed publish", "scope", scope, "stream", stream, "err", err)
			}
		} else {
			f.published.Add(1)
		}
		body, first, last = body[:0], 0, 0
	}
	emit := func(lo, hi uint64) {
		if len(body) > 0 && len(body)+len(frame) > min(FeedChunkBytes, limit) {
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
		case ChangeSet:
			tmp := *c.Msg
			tmp.Op = ""
			var err error
			if frame, err = AppendFrame(frame[:0], &tmp); err != nil || len(frame) > limit {
				// Too large to travel (or, impossibly, not encodable):
				// watchers fetch it by seq.
				frame, _ = AppendFrame(frame[:0], &Message{Seq: c.Msg.Seq, Time: c.Msg.Time, Key: c.Msg.Key, Op: FeedOpRef})
			}
			emit(c.Msg.Seq, c.Msg.Seq)
		case ChangeDelete:
			// A huge delete (all, up-to) is split so no frame outgrows a message.
			for seqs := c.Seqs; len(seqs) > 0; {
				part := seqs[:min(len(seqs), feedDeleteChunk)]
				seqs = seqs[len(part):]
				frame, _ = AppendFrame(frame[:0], &Message{Op: FeedOpDelete, Seqs: part})
				emit(part[0], part[len(part)-1])
			}
		}
	}
	flush()
}
