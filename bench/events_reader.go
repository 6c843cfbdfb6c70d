package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// eventsMarker starts every payload bench events publishes, followed by
// the publish time in Unix nanoseconds (19 digits): the one thing the
// reader looks for in a frame, on either server.
var eventsMarker = []byte("sy-t=")

// eventsPayload is a payload of n bytes (at least the marker and the
// time) carrying the time at.
func eventsPayload(n int, at time.Time) []byte {
	b := make([]byte, 0, max(n, len(eventsMarker)+20))
	b = append(b, eventsMarker...)
	b = strconv.AppendInt(b, at.UnixNano(), 10)
	b = append(b, '.')
	for len(b) < n {
		b = append(b, 'x')
	}
	return b
}

// gapTypes are the messages by which our servers say something was not
// delivered: the events API's gap marker, the watch gateway's resync (the
// watcher fell behind) and skipped (changes gone before they were read).
// None can occur in a payload or a Centrifugo frame.
var gapTypes = [][]byte{[]byte(`"type":"gap"`), resyncType, []byte(`"type":"skipped"`)}

// resyncType is the watch gateway's resync: the watcher's last message.
var resyncType = []byte(`"type":"resync"`)

// subscriber is one WebSocket subscriber of bench events and what its
// reader saw.
type subscriber struct {
	c *websocket.Conn

	mu        sync.Mutex
	lat       []time.Duration // publish to receive, one per delivery
	gaps      int64           // gap, resync and skipped messages (ours only)
	gapEvents int64           // the events those messages stand for (gapEvents)
}

// ping is Centrifugo's JSON protocol ping, a frame of "{}", answered with
// the same.
var ping = []byte("{}")

// read is the one reader loop both servers are driven with: it reads each
// frame into a buffer it reuses, answers a ping, and for every payload in
// the frame (Centrifugo may put several replies in one frame, a line each)
// records the time since its publish. It parses nothing else: a full JSON
// decode on the benchmark's cores would be charged to the server's
// latency. delivered counts deliveries across all subscribers. It returns
// when the connection ends.
func (s *subscriber) read(delivered *atomic.Int64) {
	buf := make([]byte, 0, 1024)
	for {
		_, r, err := s.c.Reader(context.Background())
		if err != nil {
			return
		}
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return
			}
		}
		now := time.Now()
		if bytes.Equal(buf, ping) {
			if err := s.c.Write(context.Background(), websocket.MessageText, ping); err != nil {
				return
			}
			continue
		}
		got, gaps, gapped := 0, int64(0), int64(0)
		s.mu.Lock()
		for b := buf; ; {
			i := bytes.Index(b, eventsMarker)
			if i < 0 {
				break
			}
			b = b[i+len(eventsMarker):]
			var ns int64
			j := 0
			for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
				ns = ns*10 + int64(b[j]-'0')
			}
			if j > 0 {
				s.lat = append(s.lat, now.Sub(time.Unix(0, ns)))
				got++
			}
		}
		for _, g := range gapTypes {
			if bytes.Contains(buf, g) {
				gaps++
				gapped += gapEvents(buf)
			}
		}
		s.gaps += gaps
		s.gapEvents += gapped
		s.mu.Unlock()
		if got > 0 {
			delivered.Add(int64(got))
		}
	}
}

// gapCountField is how a gap marker of ours says how many events it
// stands for.
var gapCountField = []byte(`"count":`)

// gapEvents is how many events the gap message msg stands for: its count
// (a gap marker merges the events it covers into it; a skipped message
// counts the seqs it passes over), 1 for a message without one. A resync
// stands for none: it ends the connection and the watch, and the reader
// does not reconnect from its from, so every change after it is lost to
// that watcher, not named. Gap messages are rare, so this look at their
// bytes costs the reader loop nothing it measures.
func gapEvents(msg []byte) int64 {
	if bytes.Contains(msg, resyncType) {
		return 0
	}
	i := bytes.Index(msg, gapCountField)
	if i < 0 {
		return 1
	}
	var n int64
	for _, c := range msg[i+len(gapCountField):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return max(n, 1)
}

// take returns the latencies, gap messages and the events those stand for
// recorded so far and forgets them.
func (s *subscriber) take() ([]time.Duration, int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat, gaps, gapped := s.lat, s.gaps, s.gapEvents
	s.lat, s.gaps, s.gapEvents = nil, 0, 0
	return lat, gaps, gapped
}

// warmMarker is the payload of the warm-up publish: no eventsMarker, so
// the readers do not count it.
var warmMarker = []byte("sy-warm-up")

// warmUp publishes warmMarker once on every channel (one channel when
// cfg.Shared) and reads each subscriber's frames until it has it. The
// readers are not running yet: this is each connection's only reader.
func warmUp(ctx context.Context, cfg EventsConfig, srv eventsServer, subs []*subscriber, channel func(int) string) error {
	channels := cfg.Subscribers
	if cfg.Shared {
		channels = 1
	}
	for i := range channels {
		if err := srv.publish(ctx, channel(i), -1, warmMarker); err != nil {
			return fmt.Errorf("warm-up publish: %w", err)
		}
	}
	return forEach(ctx, len(subs), 256, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for {
			_, b, err := subs[i].c.Read(ctx)
			if err != nil {
				return fmt.Errorf("subscriber %d: waiting for the warm-up publish: %w", i, err)
			}
			if bytes.Equal(b, ping) {
				if err := subs[i].c.Write(ctx, websocket.MessageText, ping); err != nil {
					return err
				}
				continue
			}
			if bytes.Contains(b, warmMarker) {
				return nil
			}
		}
	})
}
