//go:build unix

package store

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The open/close benchmarks measure what a server pays to bring a closed
// stream into service and retire it again: the cost every write to a stream
// outside the open-stream cache carries (an open, the write, and the close
// of the stream it evicts). ns/op is one open + first write + close. Each
// runs with both closes: close=full is Close (checkpoint, -wal and -shm
// removed), close=quick is CloseQuick (the WAL stays for the next open), so
// one run gives both and their ratio.

// openCycleStreams is how many existing streams BenchmarkStreamOpenWriteClose
// cycles over, so that each open finds a file closed a while ago.
const openCycleStreams = 64

// closeQuickly closes s as the open-stream cache closes an evicted one.
func closeQuickly(s Stream) error { _, err := s.(QuickCloser).CloseQuick(); return err }

// closeModes are the two ways a benchmark closes its streams.
var closeModes = []struct {
	name  string
	close func(Stream) error
}{
	{"close=full", func(s Stream) error { return s.Close() }},
	{"close=quick", closeQuickly},
}

// BenchmarkStreamOpenWriteClose reopens existing streams (3 keys each, as
// a small account's stream): open, one keyed set, close. It also reports
// the disk the streams take, per stream (KiB/stream, as du counts).
func BenchmarkStreamOpenWriteClose(b *testing.B) {
	for _, l := range lockingModes {
		b.Run(l.name, func(b *testing.B) { benchOpenWriteClose(b, l.exclusive) })
	}
}

func benchOpenWriteClose(b *testing.B, exclusive bool) {
	for _, m := range closeModes {
		b.Run(m.name, func(b *testing.B) {
			dir := b.TempDir()
			st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: exclusive})
			value := make([]byte, 64)
			makeCycleStreams(b, st, value, m.close)
			i := 0
			for b.Loop() {
				s, err := st.OpenExisting("bench", "s"+strconv.Itoa(i%openCycleStreams), time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.Write([]WriteOp{{Key: "k" + strconv.Itoa(i%3), Value: value}}, time.Now()); err != nil {
					b.Fatal(err)
				}
				if err := m.close(s); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(diskKiB(b, dir))/openCycleStreams, "KiB/stream")
		})
	}
}

// BenchmarkStreamCreateWriteClose creates a new stream per iteration: open
// of a missing file, its first write, close.
func BenchmarkStreamCreateWriteClose(b *testing.B) {
	for _, l := range lockingModes {
		b.Run(l.name, func(b *testing.B) { benchCreateWriteClose(b, l.exclusive) })
	}
}

func benchCreateWriteClose(b *testing.B, exclusive bool) {
	for _, m := range closeModes {
		b.Run(m.name, func(b *testing.B) {
			st := NewSQLite(SQLiteConfig{Dir: b.TempDir(), ReserveBytes: -1, Exclusive: exclusive})
			value := make([]byte, 64)
			i := 0
			for b.Loop() {
				s, err := st.Open("bench", "s"+strconv.Itoa(i), time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.Write([]WriteOp{{Key: "k", Value: value}}, time.Now()); err != nil {
					b.Fatal(err)
				}
				if err := m.close(s); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// diskKiB is the disk the files under dir take, as du counts it (allocated
// blocks, so a sparse -shm counts what it holds).
func diskKiB(tb testing.TB, dir string) int64 {
	var blocks int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			blocks += st.Blocks
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return blocks * 512 / 1024
}

// openRSSStreams is how many streams BenchmarkOpenStreamRSS holds open.
const openRSSStreams = 500

// BenchmarkOpenStreamRSS measures what an open stream costs in memory: the
// process's resident set grows by KiB/open-stream for each stream held open
// (3 keys written, one read back, as a small account's stream after a
// request). It reads /proc/self/statm, so it runs on Linux only; run it
// with -benchtime 1x (each iteration opens and closes the streams again).
func BenchmarkOpenStreamRSS(b *testing.B) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		b.Skip("no /proc/self/statm")
	}
	st := NewSQLite(SQLiteConfig{Dir: b.TempDir(), ReserveBytes: -1})
	value := make([]byte, 64)
	var perStream float64
	for b.Loop() {
		runtime.GC()
		before := rssKiB(b)
		streams := make([]Stream, 0, openRSSStreams)
		for i := range openRSSStreams {
			s, err := st.Open("bench", "s"+strconv.Itoa(i), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			for k := range 3 {
				if _, _, err := s.Write([]WriteOp{{Key: "k" + strconv.Itoa(k), Value: value}}, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.GetKey("k0"); err != nil {
				b.Fatal(err)
			}
			streams = append(streams, s)
		}
		runtime.GC()
		perStream = float64(rssKiB(b)-before) / openRSSStreams
		for _, s := range streams {
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(perStream, "KiB/open-stream")
}

// rssKiB is the process's resident set, from /proc/self/statm.
func rssKiB(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		tb.Fatalf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return pages * int64(os.Getpagesize()) / 1024
}

// BenchmarkCompact measures the closer's compaction of a stream a quick
// close left with its WAL (Compacter.Compact: open, read, the close's
// checkpoint): what a server pays once more per eviction when the closer
// catches up. Each iteration first reopens the stream, writes a key and
// closes it quickly, untimed.
func BenchmarkCompact(b *testing.B) {
	for _, l := range lockingModes {
		b.Run(l.name, func(b *testing.B) {
			st := NewSQLite(SQLiteConfig{Dir: b.TempDir(), ReserveBytes: -1, Exclusive: l.exclusive})
			value := make([]byte, 64)
			i := 0
			for b.Loop() {
				b.StopTimer()
				s, err := st.Open("bench", "s", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.Write([]WriteOp{{Key: "k" + strconv.Itoa(i%3), Value: value}}, time.Now()); err != nil {
					b.Fatal(err)
				}
				kept, err := s.(QuickCloser).CloseQuick()
				if err != nil || !kept {
					b.Fatalf("quick close: kept %v, %v", kept, err)
				}
				b.StartTimer()
				if err := st.Compact("bench", "s"); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSQLiteFloorOpenWriteClose is the floor under
// BenchmarkStreamOpenWriteClose/locking=exclusive/close=quick: the same
// files (existing 3-key streams, 64 of them cycled, exclusive locking, the
// WAL kept by quick closes) opened through database/sql with the store's
// DSN, one statement or one keyed write transaction, and a close without
// checkpoint, with none of the store's own work (its meta read, totals,
// statements' caching, checks). What a stream per SQLite file costs to
// bring into service whatever the code around it does: "read" is the open
// alone (the first statement loads the schema and rebuilds the WAL index),
// "write" adds the keyed set's delete and insert in one transaction.
func BenchmarkSQLiteFloorOpenWriteClose(b *testing.B) {
	for _, op := range []string{"read", "write"} {
		b.Run(op, func(b *testing.B) {
			dir := b.TempDir()
			st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: true})
			value := make([]byte, 64)
			makeCycleStreams(b, st, value, closeQuickly)
			paths := make([]string, openCycleStreams)
			for i := range paths {
				var err error
				if paths[i], err = StreamPath(dir, "bench", "s"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				db, err := sql.Open("sqlite", st.streamDSN(paths[i%openCycleStreams], st.busyMs))
				if err != nil {
					b.Fatal(err)
				}
				c, err := db.Conn(ctx)
				if err != nil {
					b.Fatal(err)
				}
				key := "k" + strconv.Itoa(i%3)
				if op == "read" {
					var seq int64
					err = c.QueryRowContext(ctx, `SELECT seq FROM messages WHERE key = ?`, key).Scan(&seq)
				} else {
					_, err = c.ExecContext(ctx, `BEGIN IMMEDIATE`)
					if err == nil {
						_, err = c.ExecContext(ctx, `DELETE FROM messages WHERE key = ?`, key)
					}
					if err == nil {
						_, err = c.ExecContext(ctx, `INSERT INTO messages(seq, key, time, raw, size) VALUES((SELECT COALESCE(MAX(seq), 0) + 1 FROM messages), ?, ?, ?, ?)`, key, time.Now().UnixMilli(), value, len(value))
					}
					if err == nil {
						_, err = c.ExecContext(ctx, `COMMIT`)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := noCheckpointOnClose(c); err != nil {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// makeCycleStreams makes the openCycleStreams streams the open/close
// benchmarks cycle over, "s0", "s1", ... of scope "bench": 3 keys of value
// each, then closed with closeFn.
func makeCycleStreams(b *testing.B, st *SQLite, value []byte, closeFn func(Stream) error) {
	b.Helper()
	for i := range openCycleStreams {
		s, err := st.Open("bench", "s"+strconv.Itoa(i), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		for k := range 3 {
			if _, _, err := s.Write([]WriteOp{{Key: "k" + strconv.Itoa(k), Value: value}}, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		if err := closeFn(s); err != nil {
			b.Fatal(err)
		}
	}
}
