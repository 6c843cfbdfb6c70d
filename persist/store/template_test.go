package store

import (
	"bytes"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
)

// fileFacts is what a stream file says of itself, read by a connection of
// its own: the figures that must not differ between a copy of the template
// and a file SQLite made with the same pragmas and schema.
func fileFacts(t *testing.T, p string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(p)+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var facts []string
	for _, q := range []string{`PRAGMA journal_mode`, `PRAGMA page_size`, `PRAGMA auto_vacuum`, `PRAGMA user_version`, `PRAGMA page_count`, `PRAGMA freelist_count`, `PRAGMA integrity_check`} {
		var v string
		if err := db.QueryRow(q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		facts = append(facts, q+" = "+v)
	}
	rows, err := db.Query(`SELECT type, name, sql FROM sqlite_master ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, name string
		var ddl sql.NullString
		if err := rows.Scan(&typ, &name, &ddl); err != nil {
			t.Fatal(err)
		}
		facts = append(facts, typ+" "+name+": "+ddl.String)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return facts
}

// TestTemplateIsWhatSQLiteMakes: a file copied from the template (made in
// memory, its header switched to WAL by hand) reads as a file SQLite made
// itself with the same pragmas, WAL mode and schema: same journal mode,
// page size, vacuum mode, version, pages, schema, file permissions and a
// clean integrity check. It fails if the header switch or the build's pragmas are wrong.
func TestTemplateIsWhatSQLiteMakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmpl, err := streamTemplate()
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "copied.db")
	if err := createStreamFile(copied, tmpl); err != nil {
		t.Fatal(err)
	}

	made := filepath.Join(dir, "made.db")
	db, err := sql.Open("sqlite", fileURI(made))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	steps := append(slices.Clone(templatePragmas), `PRAGMA journal_mode = WAL`, coreSchema, `PRAGMA user_version = `+strconv.Itoa(lazySchemaVersion))
	for _, q := range steps {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil { // checkpoints and removes the WAL
		t.Fatal(err)
	}

	want, got := fileFacts(t, made), fileFacts(t, copied)
	for i, p := range []string{made, copied} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		fact := "mode " + fi.Mode().Perm().String()
		if i == 0 {
			want = append(want, fact)
		} else {
			got = append(got, fact)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("a copy of the template:\n%s\nSQLite's own file:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(got, "PRAGMA journal_mode = wal") || !slices.Contains(got, "PRAGMA integrity_check = ok") {
		t.Fatalf("facts %v: want WAL mode and a clean integrity check", got)
	}
}

// TestCreateLeavesOnlyStreamFiles: creating streams leaves their files
// (and WALs) in the scope's directory and no copy of the template under a
// temporary name; each new stream opens empty and writes.
func TestCreateLeavesOnlyStreamFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, excl := range []bool{false, true} {
		st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: excl})
		scope := "plain"
		if excl {
			scope = "exclusive"
		}
		const n = 12
		for i := range n {
			s, err := st.Open(scope, "s"+strconv.Itoa(i), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if inv, err := s.Inventory(); err != nil || inv.Count != 0 || inv.Seq != 0 {
				t.Fatalf("a new stream's inventory %+v (err %v), want empty", inv, err)
			}
			writeOne(t, s, WriteOp{Key: "k", Value: []byte("v")}, time.Now())
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		ents, err := os.ReadDir(filepath.Join(dir, scope))
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, e := range ents {
			switch {
			case isStreamFile(e.Name()):
				files++
			case strings.Contains(e.Name(), createTempInfix):
				t.Errorf("%s: a template copy left behind: %s", scope, e.Name())
			}
		}
		if files != n {
			t.Fatalf("%s: %d stream files, want %d", scope, files, n)
		}
	}
}

// TestCreateStreamFileKeepsExisting: a file that appeared at the stream's
// name before the copy is linked (another server sharing the directory
// made the stream) is left as it is, the caller hears fs.ErrExist, and
// the copy does not stay behind.
func TestCreateStreamFileKeepsExisting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, StreamFileName("s"))
	theirs := []byte("another server's stream")
	if err := os.WriteFile(p, theirs, 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := streamTemplate()
	if err != nil {
		t.Fatal(err)
	}
	if err := createStreamFile(p, tmpl); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over an existing file: %v, want fs.ErrExist", err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, theirs) {
		t.Fatalf("the existing file now holds %q (err %v)", b, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want the one file", len(ents))
	}
}

// TestScanScopeRemovesStaleCreateTemps: the walk removes a template copy
// a crashed create left behind once it is older than createTempStale, and
// leaves a recent one (a create of another server still running); neither
// counts as a stream.
func TestScanScopeRemovesStaleCreateTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	s, err := st.Open("hub", "kept", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	scopeDir := filepath.Join(dir, "hub")
	stale := filepath.Join(scopeDir, StreamFileName("crashed")+createTempInfix+"123")
	recent := filepath.Join(scopeDir, StreamFileName("running")+createTempInfix+"456")
	for _, p := range []string{stale, recent} {
		if err := os.WriteFile(p, []byte("half a copy"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * createTempStale)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	n, err := st.ScanScope("hub", nil)
	if err != nil || n != 1 {
		t.Fatalf("ScanScope: %d streams (err %v), want 1", n, err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale copy: %v, want it removed", err)
	}
	if _, err := os.Lstat(recent); err != nil {
		t.Fatalf("recent copy: %v, want it kept", err)
	}
}

// TestRestoreCrashLeavesNoStrayFile: a restore from the archive that dies
// before its copy is renamed into place (a crash, a kill) leaves a file
// that no walk counts as a stream and that ScanScope removes once it is
// stale; the next open restores the stream again. Not parallel: it swaps
// renameFile.
// (Was: the copy was named {stream file}.restore-N, which no walk recognised, so it stayed in the data directory for good.)
func TestRestoreCrashLeavesNoStrayFile(t *testing.T) {
	archive := t.TempDir()
	now := time.Now()
	first := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Archive: archive, ReserveBytes: -1})
	s, err := first.Open("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // backs the stream up
		t.Fatal(err)
	}

	dir := t.TempDir() // the data directory was lost
	st := NewSQLite(SQLiteConfig{Dir: dir, Archive: archive, ReserveBytes: -1})
	type crash struct{}
	renameFile = func(string, string) error { panic(crash{}) }
	t.Cleanup(func() { renameFile = os.Rename })
	func() {
		defer func() {
			if r := recover(); r != (crash{}) {
				panic(r)
			}
		}()
		st.OpenExisting("hub", "kept", now)
		t.Fatal("the restore did not reach its rename")
	}()
	renameFile = os.Rename
	scopeDir := filepath.Join(dir, "hub")
	left := testdisk.Files(t, scopeDir)
	if len(left) != 1 {
		t.Fatalf("after the crashed restore the scope directory holds %v, want the one copy", left)
	}
	if n, err := st.ScanScope("hub", nil); err != nil || n != 0 {
		t.Fatalf("ScanScope after the crashed restore: %d streams (err %v), want 0", n, err)
	}
	// Once older than any restore still running, the walk removes it.
	old := now.Add(-2 * createTempStale)
	if err := os.Chtimes(left[0], old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := st.ScanScope("hub", nil); err != nil || n != 0 {
		t.Fatalf("ScanScope: %d streams (err %v), want 0", n, err)
	}
	if files := testdisk.Files(t, scopeDir); len(files) != 0 {
		t.Fatalf("the walk left %v of the crashed restore in the data directory", files)
	}
	s, err = st.OpenExisting("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if inv := inventory(t, s); inv.Count != 1 {
		t.Fatalf("restored stream holds %d messages, want 1", inv.Count)
	}
}

// TestScanScopeRemovesStaleArchiveTemps: the walk of a scope also removes,
// from the scope's archive directory, a copy a backup that crashed before
// its rename left, once it is older than archiveTempStale, and leaves a
// recent one (a backup of another server sharing the archive still
// writing it) and the archive copies themselves.
// (Was: nothing ever removed a {stream file}.tmp-N copy a crashed backup left in the archive.)
func TestScanScopeRemovesStaleArchiveTemps(t *testing.T) {
	t.Parallel()
	dir, archive := t.TempDir(), t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir, Archive: archive, ReserveBytes: -1})
	now := time.Now()
	s, err := st.Open("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // backs the stream up
		t.Fatal(err)
	}
	scopeArchive := filepath.Join(archive, "hub")
	stale := filepath.Join(scopeArchive, StreamFileName("crashed")+archiveTempInfix+"123")
	recent := filepath.Join(scopeArchive, StreamFileName("running")+archiveTempInfix+"456")
	for _, p := range []string{stale, recent} {
		if err := os.WriteFile(p, []byte("half a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := now.Add(-2 * archiveTempStale)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	n, err := st.ScanScope("hub", nil)
	if err != nil || n != 1 {
		t.Fatalf("ScanScope: %d streams (err %v), want 1", n, err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale archive copy: %v, want it removed", err)
	}
	want := []string{recent, filepath.Join(scopeArchive, StreamFileName("kept"))}
	slices.Sort(want)
	if got := testdisk.Files(t, scopeArchive); !slices.Equal(got, want) {
		t.Fatalf("archive directory holds %v after the walk, want %v", got, want)
	}
}

// TestRemoveCreatedOnlyUntouched: a failed open removes the stream file it
// created only while it is still the template with no -wal holding a
// commit (an empty one, made by an open that failed, goes with it); a
// file with a written -wal or other bytes (someone committed to it) stays.
func TestRemoveCreatedOnlyUntouched(t *testing.T) {
	t.Parallel()
	tmpl, err := streamTemplate()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		contents []byte
		wal      []byte // nil: no -wal
		removed  bool
	}{
		{"untouched", tmpl, nil, true},
		{"with a wal", tmpl, make([]byte, walHeaderBytes+8), false},
		{"with an empty wal", tmpl, []byte{}, true},
		{"written to", append(slices.Clone(tmpl[:len(tmpl)-1]), tmpl[len(tmpl)-1]^1), nil, false},
	}
	for _, c := range cases {
		p := filepath.Join(t.TempDir(), StreamFileName("s"))
		if err := os.WriteFile(p, c.contents, 0o644); err != nil {
			t.Fatal(err)
		}
		if c.wal != nil {
			if err := os.WriteFile(p+walSuffix, c.wal, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		removeCreated(p, tmpl)
		_, err := os.Lstat(p)
		if gone := errors.Is(err, fs.ErrNotExist); gone != c.removed {
			t.Errorf("%s: removed %v, want %v (%v)", c.name, gone, c.removed, err)
		}
	}
}

// TestCreateStreamFileWithoutLinks: on a filesystem without hard links the
// copy is renamed to the stream's name instead, and a file already there
// is still left as it is (fs.ErrExist). Not parallel: it swaps linkFile.
func TestCreateStreamFileWithoutLinks(t *testing.T) {
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	t.Cleanup(func() { linkFile = os.Link })
	tmpl, err := streamTemplate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, StreamFileName("s"))
	if err := createStreamFile(p, tmpl); err != nil {
		t.Fatalf("create by rename: %v", err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, tmpl) {
		t.Fatalf("the stream file is not the template (err %v)", err)
	}
	if err := createStreamFile(p, []byte("another copy")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create by rename over an existing file: %v, want fs.ErrExist", err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, tmpl) {
		t.Fatalf("the existing stream file was replaced (err %v)", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want the stream file alone", len(ents))
	}
}
