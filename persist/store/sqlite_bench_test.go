package store

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"
)

// The storage benchmarks measure the write path without NATS: what one
// group commit costs in SQLite, per keyed set and per batch of plain appends.

// lockingModes are the two ways a storage locks its stream files
// (SQLiteConfig.Exclusive).
var lockingModes = []struct {
	name      string
	exclusive bool
}{{"locking=normal", false}, {"locking=exclusive", true}}

func benchStream(b *testing.B) Stream { return benchStreamLocking(b, false) }

// benchStreamLocking is benchStream with the storage's locking mode.
func benchStreamLocking(b *testing.B, exclusive bool) Stream {
	b.Helper()
	st, err := NewSQLite(SQLiteConfig{Dir: b.TempDir(), Exclusive: exclusive}).Open("bench", "s", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkStoreWriteKeyed is one keyed set per commit over 1,000 keys, so
// most writes replace an existing key, with each locking mode and in a
// pack (layout=pack).
func BenchmarkStoreWriteKeyed(b *testing.B) {
	keyed := func(b *testing.B, st Stream) {
		value := make([]byte, 128)
		i := 0
		for b.Loop() {
			ops := []WriteOp{{Key: "k" + strconv.Itoa(i%1000), Value: value}}
			if _, _, err := st.Write(ops, time.Now()); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	for _, l := range lockingModes {
		b.Run(l.name, func(b *testing.B) { keyed(b, benchStreamLocking(b, l.exclusive)) })
	}
	b.Run("layout=pack", func(b *testing.B) {
		st := NewSQLite(SQLiteConfig{Dir: b.TempDir(), Packs: 1})
		b.Cleanup(func() { st.Close() })
		s, err := st.Open("bench", "s", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		keyed(b, s)
	})
}

// BenchmarkStoreWriteKeyedGroup is a group commit of 16 keyed sets (16
// clients setting their own keys) over 1,000 keys; ns/op is per commit.
func BenchmarkStoreWriteKeyedGroup(b *testing.B) {
	st := benchStream(b)
	value := make([]byte, 128)
	ops := make([]WriteOp, 16)
	i := 0
	for b.Loop() {
		for c := range ops {
			ops[c] = WriteOp{Key: "k" + strconv.Itoa(c) + "-" + strconv.Itoa(i%1000), Value: value}
		}
		if _, _, err := st.Write(ops, time.Now()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkStoreWriteBatch is 1,000 unkeyed appends per commit (a setMany).
func BenchmarkStoreWriteBatch(b *testing.B) {
	st := benchStream(b)
	ops := make([]WriteOp, 1000)
	for i := range ops {
		ops[i].Value = make([]byte, 128)
	}
	for b.Loop() {
		if _, _, err := st.Write(ops, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSetMany decodes a setMany body of 1,000 plain frames.

// BenchmarkStoreWriteMsgID is one keyed set with a msgID per commit, the
// stream's only writer: de-duplication is answered from the in-memory window.
func BenchmarkStoreWriteMsgID(b *testing.B) {
	st := benchStream(b)
	value := make([]byte, 128)
	i := 0
	for b.Loop() {
		ops := []WriteOp{{Key: "k" + strconv.Itoa(i%1000), MsgID: "m" + strconv.Itoa(i), Value: value}}
		if _, _, err := st.Write(ops, time.Now()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkStoreWriteMsgIDShared is BenchmarkStoreWriteMsgID with two
// handles on one file taking turns (two servers sharing a data directory):
// every commit reloads the totals and looks its msgID up in the table.
func BenchmarkStoreWriteMsgIDShared(b *testing.B) {
	dir := b.TempDir()
	var sts [2]Stream
	for i := range sts {
		st, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("bench", "s", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		sts[i] = st
	}
	value := make([]byte, 128)
	i := 0
	for b.Loop() {
		ops := []WriteOp{{Key: "k" + strconv.Itoa(i%1000), MsgID: "m" + strconv.Itoa(i), Value: value}}
		if _, _, err := sts[i%2].Write(ops, time.Now()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// sharedMsgIDs is a stream whose msgids table holds n ids of the window.
func sharedMsgIDs(b *testing.B, n int) *sqliteStream {
	b.Helper()
	st := benchStream(b).(*sqliteStream)
	now := time.Now()
	for i := 0; i < n; i += 1000 {
		ops := make([]WriteOp, min(1000, n-i))
		for j := range ops {
			ops[j] = WriteOp{MsgID: "m" + strconv.Itoa(i+j), Value: []byte("v")}
		}
		if _, _, err := st.Write(ops, now); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkSharedMsgIDReload is what reloading the window from a table of
// 10,000 msgIDs would cost each time another writer committed: the
// alternative to BenchmarkSharedMsgIDLookup (see sqlite_shared.go).
func BenchmarkSharedMsgIDReload(b *testing.B) {
	st := sharedMsgIDs(b, 10000)
	cut := time.Now().Add(-DedupWindow).UnixMilli()
	for b.Loop() {
		rows, err := st.conn.QueryContext(b.Context(), `SELECT id, seq, time FROM msgids WHERE time > ? ORDER BY time`, cut)
		if err != nil {
			b.Fatal(err)
		}
		m := make(map[string]dedupEntry, 10000)
		for rows.Next() {
			var id string
			var e dedupEntry
			if err := rows.Scan(&id, &e.seq, &e.time); err != nil {
				b.Fatal(err)
			}
			m[id] = e
		}
		rows.Close()
		if len(m) != 10000 {
			b.Fatalf("%d msgids", len(m))
		}
	}
}

// BenchmarkSharedMsgIDLookup is the lookup of one msgID in a table of
// 10,000, what a write pays per msgID while another writer's may be in
// the window.
func BenchmarkSharedMsgIDLookup(b *testing.B) {
	st := sharedMsgIDs(b, 10000)
	nowMs := time.Now().UnixMilli()
	i := 0
	for b.Loop() {
		if _, ok, err := st.storedMsgID("m"+strconv.Itoa(i%20000), nowMs); err != nil || ok != (i%20000 < 10000) {
			b.Fatalf("lookup %d: %v %v", i, ok, err)
		}
		i++
	}
}

// BenchmarkMemoryWrite is the write path of an ephemeral stream (Memory)
// where every commit removes something, so the check of its free pages
// (memoryShrink) is in play: one keyed set per commit over 1,000 keys (each
// replaces a row), and a group commit of 16 appends of 4 KiB to a stream
// held at a max_bytes of 1 MiB (each commit's appends push out as much).
func BenchmarkMemoryWrite(b *testing.B) {
	open := func(b *testing.B, maxBytes int64) Stream {
		s, err := NewMemory().Open("bench", "m", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		c := s.Config()
		c.MaxBytes = maxBytes
		if _, _, err := s.SetConfig(c, time.Now()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("keyed", func(b *testing.B) {
		s := open(b, EphemeralMaxBytes)
		value := make([]byte, 128)
		i := 0
		for b.Loop() {
			if _, _, err := s.Write([]WriteOp{{Key: "k" + strconv.Itoa(i%1000), Value: value}}, time.Now()); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("append-at-cap", func(b *testing.B) {
		s := open(b, 1<<20)
		ops := make([]WriteOp, 16)
		for i := range ops {
			ops[i].Value = make([]byte, 4<<10)
			rand.Read(ops[i].Value) // incompressible: stored at its size
		}
		for b.Loop() {
			if _, _, err := s.Write(ops, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
