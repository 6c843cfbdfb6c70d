package server

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// diskHarness is a server whose data directory is a small filesystem of
// its own, with a reserve that fits it.
func diskHarness(t *testing.T, size int64) (*harness, string) {
	t.Helper()
	dir := testdisk.Small(t, size)
	h := newHarness(t, func(c *Config) {
		c.DataDir = dir
		c.Storage = store.NewSQLite(store.SQLiteConfig{Dir: dir, ReserveBytes: 256 << 10})
	})
	return h, dir
}

// wantUnavailable fails t unless rep is an unavailable reply whose message
// says why.
func wantUnavailable(t *testing.T, label string, rep *nats.Msg, why string) {
	t.Helper()
	code, msg := persist.Code(rep.Header.Get(persist.HdrError)), string(rep.Data)
	if code != persist.CodeUnavailable || !strings.Contains(msg, why) {
		t.Fatalf("%s: code %q (%s), want unavailable saying %q", label, code, msg, why)
	}
}

// TestDiskFullAnswersUnavailable fills the data directory's filesystem
// under a running server: writes and new streams are refused unavailable
// with the reason, what was acknowledged reads back whole, a delete still
// runs, and once the space is freed the same server takes writes again,
// with no restart. A restart on a full disk then loses nothing and still
// deletes.
func TestDiskFullAnswersUnavailable(t *testing.T) {
	h, dir := diskHarness(t, 2<<20)
	r := rand.NewChaCha8([32]byte{3})
	var acked [][]byte
	for range 20 {
		v := make([]byte, 4000)
		_, _ = r.Read(v) // never fails; zstd cannot shrink it
		if res := h.set("s", string(v), nil); res.Seq != uint64(len(acked)+1) {
			t.Fatalf("seq %d, want %d", res.Seq, len(acked)+1)
		}
		acked = append(acked, v)
	}
	ballast := testdisk.Fill(t, dir)

	big := bytes.Repeat([]byte{0x5a}, 1000) // 1 KiB, stored raw
	for _, stream := range []string{"s", "s", "other"} {
		wantUnavailable(t, "set "+stream+" on a full disk", h.req(persist.CmdSet, stream, nil, big), store.ReasonFull)
	}
	msgs, _, _ := h.getAll("s", nil)
	if len(msgs) != len(acked) {
		t.Fatalf("%d messages read back, want the %d acknowledged", len(msgs), len(acked))
	}
	for i, m := range msgs {
		if m.Seq != uint64(i+1) || !bytes.Equal(m.Value, acked[i]) {
			t.Fatalf("message %d (seq %d) differs from what was acknowledged", i, m.Seq)
		}
	}
	h.ok(persist.CmdDelete, "s", map[string]string{persist.HdrSeq: "1"}, nil)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if res := h.set("s", "after", nil); res.Seq != uint64(len(acked)+1) {
		t.Fatalf("seq after recovery %d, want %d", res.Seq, len(acked)+1)
	}
	h.set("other", "after", nil)

	// Full again, then a restart (a new storage, as a new process has):
	// the stream opens, nothing is lost, and deletes still run.
	testdisk.Fill(t, dir)
	h.cfg.Storage = store.NewSQLite(store.SQLiteConfig{Dir: dir, ReserveBytes: 256 << 10})
	h.restart()
	if msgs, _, _ := h.getAll("s", nil); len(msgs) != len(acked) || !bytes.Equal(msgs[0].Value, acked[1]) || string(msgs[len(msgs)-1].Value) != "after" {
		t.Fatalf("after a restart on the full disk: %d messages, want %d from seq 2", len(msgs), len(acked))
	}
	h.ok(persist.CmdDelete, "s", map[string]string{persist.HdrSeq: "2"}, nil)
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, ierr := e.Info(); ierr == nil && fi.Size() == 0 && strings.HasSuffix(p, ".db") {
				t.Errorf("empty stream file %s", e.Name())
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDiskReadOnlyAnswersUnavailable makes the data directory's filesystem
// read-only while the stream is closed: a write is refused unavailable, and
// once the filesystem is writable again the same server takes it.
func TestDiskReadOnlyAnswersUnavailable(t *testing.T) {
	h, dir := diskHarness(t, 1<<20)
	h.set("s", "before", nil)
	h.restart() // closes the stream file: Linux refuses to remount while it is open for writing
	testdisk.ReadOnly(t, dir, true)
	rep := h.req(persist.CmdSet, "s", nil, []byte("during"))
	code, msg := persist.Code(rep.Header.Get(persist.HdrError)), string(rep.Data)
	if code != persist.CodeUnavailable || !(strings.Contains(msg, store.ReasonReadOnly) || strings.Contains(msg, store.ReasonCantOpen)) {
		t.Fatalf("set on a read-only disk: code %q (%s), want unavailable saying it cannot write", code, msg)
	}
	testdisk.ReadOnly(t, dir, false)
	if res := h.set("s", "after", nil); res.Seq != 2 {
		t.Fatalf("seq %d, want 2", res.Seq)
	}
}

// stuckStorage wraps the SQLite storage so that the first stream it opens
// fails every write, the way a connection SQLite opened read-only does
// until it is closed; the streams opened after it work.
type stuckStorage struct {
	store.Storage
	opens atomic.Int32
}

type stuckStream struct{ store.Stream }

func (s *stuckStorage) Open(scope, name string, now time.Time) (store.Stream, error) {
	st, err := s.Storage.Open(scope, name, now)
	if err != nil || s.opens.Add(1) > 1 {
		return st, err
	}
	return stuckStream{st}, nil
}

func (stuckStream) Write([]store.WriteOp, time.Time) ([]store.WriteResult, []store.Change, error) {
	return nil, nil, &store.DiskError{Reason: store.ReasonReadOnly, Reopen: true, Err: errors.New("attempt to write a readonly database")}
}

// TestDiskErrorReopensStream checks that a disk error asking for a reopen
// closes the stream, so that the next request opens it afresh instead of
// reusing a connection stuck read-only.
func TestDiskErrorReopensStream(t *testing.T) {
	var stuck *stuckStorage
	h := newHarness(t, func(c *Config) {
		stuck = &stuckStorage{Storage: store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir})}
		c.Storage = stuck
	})
	wantUnavailable(t, "set on the stuck stream", h.req(persist.CmdSet, "s", nil, []byte("one")), store.ReasonReadOnly)
	if res := h.set("s", "two", nil); res.Seq != 1 {
		t.Fatalf("seq %d, want 1", res.Seq)
	}
	if n := stuck.opens.Load(); n != 2 {
		t.Fatalf("%d opens, want 2", n)
	}
}

// stuckReads is a stream whose reads fail as an I/O error that asks for a
// reopen, the way a connection whose file went away does.
type stuckReads struct{ store.Stream }

var errStuckRead = &store.DiskError{Reason: store.ReasonIO, Reopen: true, Err: errors.New("disk I/O error")}

func (stuckReads) Get(uint64) (*persist.Frame, error) { return nil, errStuckRead }

// stuckReadStorage hands out one stream whose reads fail, then good ones.
type stuckReadStorage struct {
	store.Storage
	opens atomic.Int32
}

func (s *stuckReadStorage) Open(scope, name string, now time.Time) (store.Stream, error) {
	st, err := s.Storage.Open(scope, name, now)
	if err != nil || s.opens.Add(1) != 2 { // the write opens it first; the reopen after that is stuck
		return st, err
	}
	return stuckReads{st}, nil
}

func (s *stuckReadStorage) OpenExisting(scope, name string, now time.Time) (store.Stream, error) {
	st, err := s.Storage.OpenExisting(scope, name, now)
	if err != nil || s.opens.Add(1) != 2 {
		return st, err
	}
	return stuckReads{st}, nil
}

// TestDiskErrorOnReadReopensStream: a read that meets a disk error asking
// for a reopen answers unavailable and closes the stream, so the next read
// opens it afresh instead of failing with internal for as long as reads
// keep the stream in use.
func TestDiskErrorOnReadReopensStream(t *testing.T) {
	var stuck *stuckReadStorage
	h := newHarness(t, func(c *Config) {
		stuck = &stuckReadStorage{Storage: store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir})}
		c.Storage = stuck
	})
	h.set("s", "one", nil)
	h.restart() // the next open of "s" is the stuck one
	wantUnavailable(t, "get on the stuck stream", h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil), store.ReasonIO)
	if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != "one" {
		t.Fatalf("get after the reopen: %q", r.Data)
	}
}
