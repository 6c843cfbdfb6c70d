package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestDurabilityAcrossSIGKILL runs `switchyard persist serve` as a separate
// process, writes under load from several clients, kills the server with
// SIGKILL mid-load, restarts it on the same data and checks that every
// acknowledged write is there exactly once, although clients retried writes
// whose answer the kill swallowed (with the same msgID). It runs in both
// durability tiers: the default (synchronous=NORMAL) and --sync (FULL, which
// adds power loss to what an acknowledged write survives; a SIGKILL checks
// that the tier keeps the crash guarantee and the exactly-once bookkeeping).
// The evicting runs spread the writes over four times more streams than
// the server keeps open, so streams are evicted and reopened throughout:
// closed quickly, their commits left in the WAL for the next open to read
// back (store.QuickCloser), which the kill must not lose either. The
// exclusive run does so with --exclusive-files, whose WAL index is in the
// killed process's memory only: the restart rebuilds it from the WAL; the
// packs run with the streams in two shared files (--packs 2).
func TestDurabilityAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts server processes")
	}
	for name, c := range map[string]struct {
		streams int
		args    []string
	}{
		"normal":          {1, nil},
		"sync":            {1, []string{"--sync"}},
		"normal-evicting": {64, []string{"--max-open-streams", "16"}},
		"sync-evicting":   {64, []string{"--max-open-streams", "16", "--sync"}},
		// Locked files, the WAL index in memory: recovery reads the WAL.
		"exclusive-evicting": {64, []string{"--max-open-streams", "16", "--exclusive-files"}},
		// Streams sharing two pack files (one WAL each, exclusive), opened
		// and closed throughout: recovery reads the packs' WALs.
		"packs-evicting": {64, []string{"--max-open-streams", "16", "--packs", "2"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			durabilityAcrossSIGKILL(t, c.streams, c.args...)
		})
	}
}

// durabilityAcrossSIGKILL writes over streams streams of one scope.
func durabilityAcrossSIGKILL(t *testing.T, streams int, args ...string) {
	sp := startServeProc(t, args...)
	nc := sp.Conn

	client, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 2 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	streamOf := func(n int) *persist.Stream {
		if streams == 1 {
			return client.Stream("project-durable", "log")
		}
		return client.Stream("project-durable", fmt.Sprintf("log%d", n%streams))
	}

	const writers, perWriter = 8, 250
	var (
		mu    sync.Mutex
		acked = map[string]uint64{} // msgID (= value) -> seq
		count atomic.Int64
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				stream := streamOf(w*perWriter + i)
				for {
					res, err := stream.Set(ctx, []byte(id), persist.SetOptions{MsgID: id})
					if err == nil {
						mu.Lock()
						acked[id] = res.Seq
						mu.Unlock()
						count.Add(1)
						break
					}
					if ctx.Err() != nil {
						return
					}
					// The server is down or restarting: retry the same msgID.
					pace(ctx, 10*time.Millisecond)
				}
			}
		}()
	}

	// Kill mid-load, twice, each time once more writes were acknowledged.
	for _, at := range []int64{writers * perWriter / 4, writers * perWriter / 2} {
		testwait.For(t, fmt.Sprintf("%d writes acknowledged", at), func() bool { return count.Load() >= at })
		sp.Restart()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("writers did not finish: %d of %d acknowledged", count.Load(), writers*perWriter)
	}

	// The reads go through a client that retries, as applications' do: the
	// writers' attempts that timed out around the kills may still be queued
	// in the server, and with every open stream busy on them a read of
	// another stream is answered unavailable until they drain (the
	// writers' client tries once, so that a write's fate is its own).
	reader, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 2 * time.Second, Attempts: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	seen := map[string]uint64{} // value -> seq, in its stream
	for n := range streams {
		name := "log"
		if streams > 1 {
			name = fmt.Sprintf("log%d", n)
		}
		var lastSeq uint64
		if _, err := reader.Stream("project-durable", name).Scan(context.Background(), persist.Range{}, func(m *persist.Message) error {
			v := string(m.Value)
			if prev, dup := seen[v]; dup {
				return fmt.Errorf("value %s stored twice, at seq %d and %d", v, prev, m.Seq)
			}
			if m.Seq <= lastSeq {
				return fmt.Errorf("seq %d after %d", m.Seq, lastSeq)
			}
			seen[v], lastSeq = m.Seq, m.Seq
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for id, seq := range acked {
		got, ok := seen[id]
		if !ok {
			t.Errorf("acknowledged write %s (seq %d) lost", id, seq)
		} else if got != seq {
			t.Errorf("write %s acknowledged at seq %d, stored at %d", id, seq, got)
		}
	}
	if len(seen) != writers*perWriter {
		t.Errorf("stored %d messages, want %d", len(seen), writers*perWriter)
	}
}
