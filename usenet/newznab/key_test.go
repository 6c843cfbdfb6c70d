package newznab_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet/newznab"
)

func TestLoadKeyCreatesOnceThenReads(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "_usenet-api")
	key, created, err := newznab.LoadKey(dir)
	if err != nil || !created || len(key) < 16 {
		t.Fatalf("first LoadKey: %q, created %v, %v", key, created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, newznab.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	again, created, err := newznab.LoadKey(dir)
	if err != nil || created || again != key {
		t.Fatalf("second LoadKey: %q, created %v, %v; want %q, not created", again, created, err, key)
	}
	if check := newznab.KeyChecker(key); !check(key) || check(key[1:]) || check("") {
		t.Error("KeyChecker does not accept exactly the key")
	}
}

// TestLoadKeyConcurrent: processes starting on one directory at once share
// one key.
func TestLoadKeyConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := make([]string, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], _, errs[i] = newznab.LoadKey(dir)
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || keys[i] != keys[0] {
			t.Fatalf("LoadKey %d: %q, %v; want %q", i, keys[i], errs[i], keys[0])
		}
	}
}

func TestLoadKeyRefusesAShortKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, newznab.KeyFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, _, err := newznab.LoadKey(dir); err == nil {
		t.Fatalf("LoadKey of a short key: %q, no error", key)
	}
}
