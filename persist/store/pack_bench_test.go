package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPackOpenWriteClose is BenchmarkStreamOpenWriteClose's cycle for
// a stream of a pack: open an existing stream of 3 keys (cycling over
// 2,000 in 4 packs), one keyed set, close. The pack's connection stays
// open, so the open is a lookup and the reads of the stream's state.
func BenchmarkPackOpenWriteClose(b *testing.B) {
	st := NewSQLite(SQLiteConfig{Dir: b.TempDir(), Packs: 4})
	b.Cleanup(func() { st.Close() })
	now := time.Now()
	const n = 2000
	value := make([]byte, 128)
	for i := range n {
		s, err := st.Open(fmt.Sprintf("s%d", i), "kv", now)
		if err != nil {
			b.Fatal(err)
		}
		for k := range 3 {
			if _, _, err := s.Write([]WriteOp{{Key: fmt.Sprintf("k%d", k), Value: value}}, now); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
	}
	b.ResetTimer()
	for i := range b.N {
		s, err := st.OpenExisting(fmt.Sprintf("s%d", i%n), "kv", now)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Write([]WriteOp{{Key: "k1", Value: value}}, now); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
