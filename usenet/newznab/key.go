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
// mode 0600 and O_EXCL, so two processes starting on one directory at once
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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadKey(dir) // another process created it first: use its key
	}
	if err != nil {
		return "", false, fmt.Errorf("api key: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("api key: %w", err)
	}
	return key, true, f.Close()
}

// KeyChecker accepts exactly key, in constant time: a Config.APIKeys for
// one key.
func KeyChecker(key string) func(string) bool {
	return func(k string) bool { return subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 }
}
