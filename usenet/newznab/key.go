package newznab

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the file, in a data directory, that holds the API key.
const KeyFile = "apikey"

// keyMin is the shortest key LoadKey accepts from a file: a short key is
// one a client could guess.
const keyMin = 16

// LoadKey reads the API key stored in dir's KeyFile, creating a random one
// (and dir) on first use; created says which. The file is written with
// mode 0600 and linked into place whole, so two processes starting on one directory at once
// end up with the same key. A stored key shorter than 16 characters is an
// error (deleting the file makes a new one).
func LoadKey(dir string) (key string, created bool, err error) {
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key = strings.TrimSpace(string(b))
		if len(key) < keyMin {
			return "", false, fmt.Errorf("api key %s: shorter than %d characters; delete it to get a new one", path, keyMin)
		}
		return key, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("api key: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, fmt.Errorf("api key: %w", err)
	}
	key = hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("api key: %w", err)
	}
	// The key is written to a file of its own and then linked into
	// place: a link never replaces an existing name, and the name appears
	// with its content, so a process starting beside this one either
	// wins or reads a whole key (with O_EXCL on the final name it could
	// read the file between its creation and its write, and find it empty).
	tmp, err := os.CreateTemp(dir, KeyFile+".new-*")
	if err != nil {
		return "", false, fmt.Errorf("api key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("api key: %w", err)
	}
	if _, err := tmp.WriteString(key + "\n"); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("api key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, fmt.Errorf("api key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadKey(dir) // another process created it first: use its key
		}
		return "", false, fmt.Errorf("api key: %w", err)
	}
	return key, true, nil
}

// KeyChecker accepts exactly key, in constant time: a Config.APIKeys for
// one key.
func KeyChecker(key string) func(string) bool {
	return func(k string) bool { return subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 }
}
