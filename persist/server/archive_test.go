package server

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// archiveRows opens the archive copy of stream read-only and counts its
// messages; -1 when there is no copy yet.
func archiveRows(t *testing.T, archive, scope, stream string) int {
	t.Helper()
	p, err := store.StreamPath(archive, scope, stream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		return -1
	}
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(p)+"?mode=ro") // a temp dir: nothing to escape
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestArchiveRestoresLostDataDir: streams written, the server stopped, the
// data directory deleted; a server on the same archive brings every stream
// back with its messages, keys and config. Ephemeral streams are not archived.
func TestArchiveRestoresLostDataDir(t *testing.T) {
	t.Parallel()
	archive := t.TempDir()
	h := newHarness(t, func(c *Config) { c.Archive = archive })
	streams := []string{"log", "settings", "Weird name/../x"}
	for i, s := range streams {
		for j := range 5 {
			h.set(s, fmt.Sprintf("%s-%d", s, j), map[string]string{persist.HdrKey: fmt.Sprintf("k%d", j%3)})
		}
		h.config(s, fmt.Sprintf(`{"max_msgs": %d, "desc": "stream %d"}`, 100+i, i))
	}
	h.ok(persist.CmdSet, "scratch", map[string]string{persist.HdrEphemeral: "true"}, []byte("gone"))
	type snapshot struct {
		msgs []persist.Frame
		inv  persist.Inventory
		cfg  persist.Config
	}
	before := map[string]snapshot{}
	for _, s := range streams {
		msgs, _, _ := h.getAll(s, nil)
		before[s] = snapshot{msgs, h.inventory(s), h.config(s, "")}
	}

	if err := h.srv.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(h.dir); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(archive, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, filepath.Base(p))
		}
		return nil
	})
	if len(files) != len(streams) {
		t.Fatalf("archive holds %v, want one file per persistent stream (%d)", files, len(streams))
	}
	for _, f := range files {
		if strings.Contains(f, ".tmp-") {
			t.Fatalf("temporary file left in the archive: %s", f)
		}
	}

	h.start()
	for _, s := range streams {
		msgs, _, _ := h.getAll(s, nil)
		b := before[s]
		if len(msgs) != len(b.msgs) || len(msgs) != 3 {
			t.Fatalf("%s: %d messages after restore, want %d", s, len(msgs), len(b.msgs))
		}
		for i := range msgs {
			if msgs[i].Seq != b.msgs[i].Seq || msgs[i].Key != b.msgs[i].Key || string(msgs[i].Value) != string(b.msgs[i].Value) || msgs[i].Time != b.msgs[i].Time {
				t.Fatalf("%s: message %d is %+v, want %+v", s, i, msgs[i], b.msgs[i])
			}
		}
		if inv := h.inventory(s); inv.Seq != b.inv.Seq || inv.Count != b.inv.Count || inv.Bytes != b.inv.Bytes {
			t.Fatalf("%s: inventory %+v, want %+v", s, inv, b.inv)
		}
		if cfg := h.config(s, ""); cfg != b.cfg {
			t.Fatalf("%s: config %+v, want %+v", s, cfg, b.cfg)
		}
		// The seq counter survived too: a new write continues after the last.
		if res := h.set(s, "after", nil); res.Seq != b.inv.Seq+1 {
			t.Fatalf("%s: next seq %d, want %d", s, res.Seq, b.inv.Seq+1)
		}
	}
	if inv := h.inventory("scratch"); inv.Count != 0 {
		t.Fatalf("persistent stream %q appeared from nowhere: %+v", "scratch", inv)
	}
}

// TestArchiveOnInterval: a stream that stays open is backed up by the timer,
// and only when it changed.
func TestArchiveOnInterval(t *testing.T) {
	t.Parallel()
	archive := t.TempDir()
	h := newHarness(t, func(c *Config) {
		c.Archive = archive
		c.ArchiveEvery = 10 * time.Millisecond
	})
	h.set("log", "one", nil)
	testwait.For(t, "first backup", func() bool { return archiveRows(t, archive, h.scope, "log") == 1 })
	h.set("log", "two", nil)
	testwait.For(t, "second backup", func() bool { return archiveRows(t, archive, h.scope, "log") == 2 })
}

// TestArchiveKeepsNewerLocal: a local file written after the last backup is
// not overwritten by the older archive copy, and is archived in its turn.
func TestArchiveKeepsNewerLocal(t *testing.T) {
	t.Parallel()
	archive := t.TempDir()
	h := newHarness(t, func(c *Config) { c.Archive = archive })
	h.set("log", "archived", nil)
	h.cfg.Archive = "" // the next run writes without archiving
	h.restart()
	if n := archiveRows(t, archive, h.scope, "log"); n != 1 {
		t.Fatalf("archive holds %d messages, want 1", n)
	}
	h.set("log", "local only", nil)
	h.cfg.Archive = archive
	h.restart()
	msgs, _, _ := h.getAll("log", nil)
	if len(msgs) != 2 || string(msgs[1].Value) != "local only" {
		t.Fatalf("after reopening with an older archive: %d messages %+v", len(msgs), msgs)
	}
	if err := h.srv.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := archiveRows(t, archive, h.scope, "log"); n != 2 {
		t.Fatalf("archive holds %d messages after close, want 2 (the newer local file)", n)
	}
}

// TestArchiveReplacesOlderLocal: a server whose local copy is stale (the
// scope lived on another server sharing the archive meanwhile) restores the
// newer archive copy instead of serving the stale file.
func TestArchiveReplacesOlderLocal(t *testing.T) {
	t.Parallel()
	archive := t.TempDir()
	h := newHarness(t, func(c *Config) { c.Archive = archive })
	h.set("log", "one", nil)
	if err := h.srv.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A stale copy of the data directory, older than anything archived.
	stale := t.TempDir()
	local, err := store.StreamPath(h.dir, h.scope, "log")
	if err != nil {
		t.Fatal(err)
	}
	staleFile, _ := store.StreamPath(stale, h.scope, "log")
	b, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(staleFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staleFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(staleFile, old, old); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.set("log", "two", nil)
	if err := h.srv.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.cfg.DataDir = stale
	h.start()
	msgs, _, _ := h.getAll("log", nil)
	if len(msgs) != 2 || string(msgs[1].Value) != "two" {
		t.Fatalf("stale local file served: %d messages %+v", len(msgs), msgs)
	}
}

func TestArchiveConfigChecks(t *testing.T) {
	t.Parallel()
	e, nc := testnatsStart(t)
	_ = e
	dir := t.TempDir()
	for name, cfg := range map[string]Config{
		"no data dir":    {Archive: t.TempDir()},
		"same as data":   {DataDir: dir, Archive: dir + "/."},
		"custom storage": {DataDir: dir, Archive: t.TempDir(), Storage: struct{ store.Storage }{store.NewSQLite(store.SQLiteConfig{Dir: dir})}},
		"negative every": {DataDir: dir, Archive: t.TempDir(), ArchiveEvery: -time.Second},
	} {
		cfg.Conn, cfg.ID, cfg.IDs = nc, "0", []string{"0"}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: NewServer accepted %+v", name, cfg)
		}
	}
}
