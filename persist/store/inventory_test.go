package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Scopes lists the scope directories (not the reserve, nor what is not a
// scope); ScanScope counts the stream files of one, each once whatever
// lies beside it, and reports those with a -wal; StreamName reads a file's
// stream name back without removing its WAL; HasStream follows the file.
func TestListerScan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir})
	open := func(scope, name string) Stream {
		t.Helper()
		s, err := st.Open(scope, name, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Write([]WriteOp{{Key: "k", Value: []byte("v")}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, n := range []string{"a", "b", "c/with slash"} {
		if err := open("one", n).Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := open("two", "x").Close(); err != nil {
		t.Fatal(err)
	}
	quick := open("two", "quick")
	closeQuickKept(t, quick)
	// Not a scope, not stream files.
	if err := os.Mkdir(filepath.Join(dir, "Not-A-Scope"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"one/notes.txt", "one/x.db", "one/a~0123.db"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var scopes []string
	if err := st.Scopes(context.Background(), func(s string) error { scopes = append(scopes, s); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(scopes)
	if !slices.Equal(scopes, []string{"one", "two"}) {
		t.Fatalf("Scopes: %v, want [one two]", scopes)
	}
	for _, c := range []struct {
		scope string
		n     int
		wal   []string
	}{{"one", 3, nil}, {"two", 2, []string{StreamFileName("quick")}}, {"none", 0, nil}} {
		var wal []string
		n, err := st.ScanScope(c.scope, func(f string) { wal = append(wal, f) })
		if err != nil || n != c.n || !slices.Equal(wal, c.wal) {
			t.Fatalf("ScanScope(%s) = %d, wal %v, err %v; want %d, %v", c.scope, n, wal, err, c.n, c.wal)
		}
	}
	name, err := st.StreamName("two", StreamFileName("quick"))
	if err != nil || name != "quick" {
		t.Fatalf("StreamName = %q, %v", name, err)
	}
	p, _ := StreamPath(dir, "two", "quick")
	if _, err := os.Stat(p + "-wal"); err != nil {
		t.Fatalf("StreamName removed the WAL: %v", err)
	}
	if _, err := st.StreamName("two", StreamFileName("gone")); !errors.Is(err, ErrNoStream) {
		t.Fatalf("StreamName of a missing file: %v", err)
	}
	if ok, err := st.HasStream("two", "quick"); !ok || err != nil {
		t.Fatalf("HasStream(quick) = %v, %v", ok, err)
	}
	if err := st.Remove("two", "quick"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.HasStream("two", "quick"); ok || err != nil {
		t.Fatalf("HasStream after Remove = %v, %v", ok, err)
	}
}

// BenchmarkWalkScopes walks a data directory of 10,000 scopes of one
// stream each (the layout of a stream per account or project), as a
// server's count at start does: Scopes, then ScanScope of each. The files
// are empty: the walk reads names only. The anchor is filepath.WalkDir of
// the same tree (a sorted read of every directory, no stat either).
func BenchmarkWalkScopes(b *testing.B) {
	const scopes = 10000
	dir := b.TempDir()
	for i := range scopes {
		sc := filepath.Join(dir, "account-"+strconv.Itoa(i))
		if err := os.Mkdir(sc, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sc, StreamFileName("log")), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	b.Run("lister", func(b *testing.B) {
		for b.Loop() {
			n := 0
			err := st.Scopes(context.Background(), func(sc string) error {
				c, err := st.ScanScope(sc, nil)
				n += c
				return err
			})
			if err != nil || n != scopes {
				b.Fatalf("walk: %d streams, %v", n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/scopes, "ns/stream")
	})
	b.Run("anchor=WalkDir", func(b *testing.B) {
		for b.Loop() {
			n := 0
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && isStreamFile(d.Name()) {
					n++
				}
				return err
			})
			if err != nil || n != scopes {
				b.Fatalf("WalkDir: %d streams, %v", n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/scopes, "ns/stream")
	})
}
