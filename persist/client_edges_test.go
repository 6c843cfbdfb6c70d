package persist_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestClientScanNoDuplicateAfterMidStreamError: wire.md says "A failure
// part-way is an error answer (Sy-Error) in place of the next chunk", and the
// server does send `unavailable` there (serveGetAll replies storageError for
// a disk error met after chunks were published). Stream.scan reports the
// attempt as not repeatable once messages reached the callback, but
// Client.retry/retryable retry `unavailable` (and wrong-owner, no
// responders) whatever the attempt said, so the retry hands the messages of
// the first chunk to the callback a second time. Expected: every message is
// delivered at most once (the scan fails instead of retrying).
func TestClientScanNoDuplicateAfterMidStreamError(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	var getAlls atomic.Int32
	frames := func(seqs ...uint64) []byte {
		var b []byte
		for _, q := range seqs {
			var err error
			if b, err = persist.AppendFrame(b, &persist.Frame{Seq: q, Time: 1, Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	for subject, fn := range map[string]nats.MsgHandler{
		"persist.*.id": func(m *nats.Msg) { _ = m.Respond([]byte("0")) },
		"persist.*.api.0": func(m *nats.Msg) {
			if m.Header.Get(persist.HdrCmd) != persist.CmdGetAll {
				return
			}
			chunk0 := &nats.Msg{Subject: m.Reply, Header: nats.Header{persist.HdrChunk: []string{"0"}}}
			if getAlls.Add(1) == 1 {
				// Chunk 0 with seqs 1 and 2, then a disk error part-way.
				chunk0.Data = frames(1, 2)
				_ = nc.PublishMsg(chunk0)
				_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{persist.HdrError: []string{string(persist.CodeUnavailable)}}, Data: []byte("disk I/O error")})
				return
			}
			chunk0.Data = frames(1, 2, 3)
			chunk0.Header.Set(persist.HdrEOF, "true")
			_ = nc.PublishMsg(chunk0)
		},
	} {
		sub, err := nc.Subscribe(subject, fn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[uint64]int{}
	_, err = c.Stream("hub", "s").Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		seen[m.Seq]++
		return nil
	})
	for q, n := range seen {
		if n > 1 {
			t.Errorf("seq %d delivered %d times (scan err %v, %d getAll requests)", q, n, err, getAlls.Load())
		}
	}
}

// TestClientHeaderNameUnreadableByGet: a user header name that NATS
// headers cannot carry (nats.go refuses any name outside printable ASCII or
// with one of "()/,:;<=>?@[\]{} and space) is accepted by SetMany (it travels in
// JSON frames: Stream.checkEntry, client.go:674, only checks ReservedHeader)
// and stored; the server's get reply then puts it in a NATS header block,
// nats.go's PublishMsg fails with ErrBadHeaderMsg (server/reply.go replyGet
// -> respond only logs it), and the client's Get times out on every attempt:
// the message can never be read by seq. Set with the same header fails with
// nats.go's plain "bad header message", which CodeOf reads as internal.
// Expected: the client refuses such a header name with bad-request, in Set
// and SetMany alike, before sending (as it does for reserved names).
func TestClientHeaderNameUnreadableByGet(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := c.Stream(h.scope, "s")
	hdrs := map[string]string{"a/b": "1"}
	if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{Headers: hdrs}); persist.CodeOf(err) != persist.CodeBadRequest {
		t.Errorf("set with header name %q: %v (code %s), want bad-request", "a/b", err, persist.CodeOf(err))
	}
	res, err := s.SetMany(ctx, []persist.Entry{{Value: []byte("v"), Headers: hdrs}})
	if persist.CodeOf(err) == persist.CodeBadRequest {
		return // refused up front: fine
	}
	if err != nil || res[0].Err != nil {
		t.Fatalf("setMany: %v %+v", err, res)
	}
	m, err := s.Get(ctx, res[0].Seq)
	if err != nil {
		t.Fatalf("setMany stored header %q (seq %d) but get of it fails: %v", "a/b", res[0].Seq, err)
	}
	if m.Headers["a/b"] != "1" {
		t.Fatalf("get: headers %v, want a/b=1", m.Headers)
	}
}

// TestClientHeaderValueRoundTrip: nats.go trims spaces, tabs, CR and LF
// from both ends of a header value and turns inner CR/LF into spaces (the
// very reason the naming rule exists for names and keys). User header values
// are not checked by the client (setMsg, client.go:547, and checkEntry), so
// Set silently stores " v\n" as "v", and a message stored by SetMany (JSON,
// exact) reads back differently through Get (headers: "v") and GetAll
// (frames: " v\n"). Expected: a header value is stored and read back as
// given, or refused with bad-request before sending.
func TestClientHeaderValueRoundTrip(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")
	const val = " v\n"
	hdrs := map[string]string{"note": val}
	res, err := s.Set(ctx, []byte("x"), persist.SetOptions{Headers: hdrs})
	if err == nil {
		m, err := s.Get(ctx, res.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Headers["note"] != val {
			t.Errorf("set header %q, stored and read back as %q", val, m.Headers["note"])
		}
	} else if persist.CodeOf(err) != persist.CodeBadRequest {
		t.Errorf("set: %v, want success or bad-request", err)
	}
	rs, err := s.SetMany(ctx, []persist.Entry{{Value: []byte("y"), Headers: hdrs}})
	if persist.CodeOf(err) == persist.CodeBadRequest {
		return
	}
	if err != nil || rs[0].Err != nil {
		t.Fatalf("setMany: %v %+v", err, rs)
	}
	m, err := s.Get(ctx, rs[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := s.GetAll(ctx, persist.Range{Start: rs[0].Seq, End: rs[0].Seq})
	if err != nil || len(all) != 1 {
		t.Fatalf("getAll: %v %d", err, len(all))
	}
	if m.Headers["note"] != all[0].Headers["note"] || m.Headers["note"] != val {
		t.Errorf("one message, header written %q: get reads %q, getAll reads %q", val, m.Headers["note"], all[0].Headers["note"])
	}
}

// TestClientNegativeTTLNotForever: a negative SetOptions.TTL / Entry.TTL
// (an expiry computed as deadline.Sub(now) that has already passed) is
// dropped by the client (setMsg: `if opts.TTL > 0`, client.go:544; Entry.frame
// via ttlMillis, which maps d <= 0 to 0), so the message is stored with no
// TTL at all: it lives for ever instead of being refused. The server itself
// refuses a negative ttl in a frame (bad-request); the same class as the
// negative MaxAge fixed earlier. Expected: bad-request, nothing stored.
func TestClientNegativeTTLNotForever(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	h.config("s", `{"allow_msg_ttl":true}`)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")
	if res, err := s.Set(ctx, []byte("v"), persist.SetOptions{TTL: -time.Second}); err == nil {
		m, _ := s.Get(ctx, res.Seq)
		t.Errorf("set with TTL -1s: stored at seq %d with TTL %v (for ever), want bad-request", res.Seq, m.TTL)
	}
	if rs, err := s.SetMany(ctx, []persist.Entry{{Value: []byte("v"), TTL: -time.Second}}); err == nil && rs[0].Err == nil {
		t.Errorf("setMany with TTL -1s: stored at seq %d with no TTL, want bad-request", rs[0].Seq)
	}
}

// TestClientSetManyInvalidUTF8MsgIDsCollide: SetMany encodes each
// entry's metadata with AppendFrame (wire.go:724), whose json.Marshal path
// turns invalid UTF-8 into U+FFFD without a word; checkEntry (client.go:674)
// checks the key's UTF-8 but not the MsgID or header names/values. So the
// distinct msgIDs "m\xff" and "m\xfe" both reach the server as "m\ufffd":
// the second entry is taken for a retry of the first, is not written, and is
// answered with the first one's seq (a lost write). wire.md: "Text is never
// converted", the server refuses such text as bad-request, which it cannot
// do once the client converted it. Expected: the entries are refused
// (bad-request) or written as two messages.
func TestClientSetManyInvalidUTF8MsgIDsCollide(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")
	rs, err := s.SetMany(ctx, []persist.Entry{
		{Value: []byte("first"), MsgID: "m\xff"},
		{Value: []byte("second"), MsgID: "m\xfe"},
	})
	if persist.CodeOf(err) == persist.CodeBadRequest {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err == nil && rs[1].Err == nil && rs[0].Seq == rs[1].Seq {
		all, _, _ := s.GetAll(ctx, persist.Range{})
		t.Fatalf("two entries with distinct msgIDs both answered seq %d; stream holds %d message(s): the second write was lost", rs[0].Seq, len(all))
	}
}

// TestClientMsgIDAliasedByHeaderEncoding: Set sends its MsgID in the
// Sy-Msg-Id header, and nats.go trims spaces/tabs/CR/LF from both ends of a
// header value and turns inner CR/LF into spaces: the aliasing the naming
// rule exists for. checkNames (client.go:389) checks only Sy-Stream and
// Sy-Key, so the distinct msgIDs "order-1" and " order-1" (or "a\nb" and
// "a b") reach the server as one id: the second Set is answered as a
// duplicate of the first and writes nothing (a lost write, reported as a
// success). Expected: such a msgID is refused with bad-request before
// sending, or the two writes are stored as two messages.
func TestClientMsgIDAliasedByHeaderEncoding(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")
	first, err := s.Set(ctx, []byte("first"), persist.SetOptions{MsgID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Set(ctx, []byte("second"), persist.SetOptions{MsgID: " order-1"})
	if persist.CodeOf(err) == persist.CodeBadRequest {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if second.Seq == first.Seq {
		t.Fatalf("set with msgID %q was answered with the seq (%d) of the set with msgID %q and not written", " order-1", first.Seq, "order-1")
	}
}

// TestClientScanCallbackErrorStopsScan: "The callback's error stops
// the scan" (Stream.Scan). A callback that copies each message elsewhere
// and returns the error of its own persist call (here unavailable) makes
// Stream.scan return that error from the attempt; Client.retry then retries
// it (retryable, client.go:283, retries unavailable/wrong-owner/no-responders
// whatever the attempt's repeatable flag says) and the scan starts over,
// calling the callback again with messages it already had. Same cause as
// TestClientScanNoDuplicateAfterMidStreamError, with a real server.
// Expected: the callback is called once and Scan returns its error.
func TestClientScanCallbackErrorStopsScan(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	h.set("s", "a", nil)
	h.set("s", "b", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	calls := 0
	mine := persist.Errorf(persist.CodeUnavailable, "copy target busy")
	_, err := c.Stream(h.scope, "s").Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		calls++
		return mine
	})
	if calls != 1 {
		t.Errorf("callback called %d times after returning an error (scan err %v), want 1", calls, err)
	}
}
