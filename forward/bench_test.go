package forward

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func benchItem(i int, payload string) *Delivery {
	ev := `{"id":"ev-` + strconv.Itoa(i) + `","subject":"fs:uid-1:write","op":"write","ts":1764000000000,"data":"` + payload + `"}`
	return &Delivery{UserID: int64(i % 1000), SubID: "sub-" + strconv.Itoa(i%64), Event: []byte(ev)}
}

// BenchmarkPushSteady pushes round-robin to 8 peers whose send returns at
// once, with pre-built items: the queue's own cost per push.
func BenchmarkPushSteady(b *testing.B) {
	q, err := NewPeerQueue(QueueConfig{From: "bench", Send: func(context.Context, *Outbound) error { return nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer q.Stop(context.Background())
	items := make([]*Delivery, 4096)
	for i := range items {
		items[i] = benchItem(i, strings.Repeat("x", 64))
	}
	peers := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Push(peers[i%8], items[i%len(items)])
	}
	_ = q.FlushAll(context.Background())
}

func benchDead(b *testing.B, payload int) {
	g := NewGapPolicy(GapConfig{Logger: slog.New(slog.DiscardHandler)})
	q, err := NewPeerQueue(QueueConfig{
		From:       "bench",
		Send:       func(ctx context.Context, _ *Outbound) error { <-ctx.Done(); return ctx.Err() },
		OnOverflow: g.Overflow, OnTaken: g.Taken, OnLost: g.Lost, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	items := make([]*Delivery, 8192)
	p := strings.Repeat("y", payload)
	for i := range items {
		items[i] = benchItem(i, p)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Push("dead", items[i%len(items)])
	}
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = q.Stop(ctx)
}

// BenchmarkPushDeadPeerCount sheds at the 5,000-item bound on every push.
func BenchmarkPushDeadPeerCount(b *testing.B) { benchDead(b, 128) }

// BenchmarkPushDeadPeerBytes sheds at the 32 MiB bound on every push.
func BenchmarkPushDeadPeerBytes(b *testing.B) { benchDead(b, 64<<10) }

// BenchmarkSign signs the headers of a full 256 KiB batch body, its
// SHA-256 included, as a Sender does.
func BenchmarkSign(b *testing.B) {
	body := []byte(strings.Repeat("z", MaxBatchBytesDefault))
	s := newSigner([]byte("secret"))
	h := http.Header{}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		s.sign(h, "eu", "us", 1764000000, 1764000000000000000, body)
	}
}

// BenchmarkDecodeBatch decodes a batch of 200 deliveries.
func BenchmarkDecodeBatch(b *testing.B) {
	items := make([]Item, 200)
	for i := range items {
		items[i] = benchItem(i, strings.Repeat("x", 64))
	}
	body := batchBody("f", items...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
}
