package store

import (
	"strconv"
	"testing"
	"time"
)

// The storage benchmarks measure the write path without NATS: what one
// group commit costs in SQLite, per keyed set and per batch of plain appends.

func benchStream(b *testing.B) Stream {
	b.Helper()
	st, err := NewSQLite(SQLiteConfig{Dir: b.TempDir()}).Open("bench", "s", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkStoreWriteKeyed is one keyed set per commit over 1,000 keys, so
// most writes replace an existing key.
func BenchmarkStoreWriteKeyed(b *testing.B) {
	st := benchStream(b)
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
