package store

import (
	"strconv"
	"testing"
	"time"
)

// The open/close benchmarks measure what a server pays to bring a closed
// stream into service and retire it again: the cost every write to a stream
// outside the open-stream cache carries (an open, the write, and the close
// of the stream it evicts). ns/op is one open + first write + close.

// openCycleStreams is how many existing streams BenchmarkStreamOpenWriteClose
// cycles over, so that each open finds a file closed a while ago.
const openCycleStreams = 64

// BenchmarkStreamOpenWriteClose reopens existing streams (3 keys each, as
// a small account's stream): open, one keyed set, close.
func BenchmarkStreamOpenWriteClose(b *testing.B) {
	st := NewSQLite(SQLiteConfig{Dir: b.TempDir()})
	value := make([]byte, 64)
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
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		s, err := st.OpenExisting("bench", "s"+strconv.Itoa(i%openCycleStreams), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Write([]WriteOp{{Key: "k" + strconv.Itoa(i%3), Value: value}}, time.Now()); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkStreamCreateWriteClose creates a new stream per iteration: open
// of a missing file, its first write, close.
func BenchmarkStreamCreateWriteClose(b *testing.B) {
	st := NewSQLite(SQLiteConfig{Dir: b.TempDir()})
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
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
