package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// apiKeyFile is the file, in a data directory, that holds the Newznab API
// key.
const apiKeyFile = "apikey"

// loadAPIKey reads the API key stored in dir, creating a random one (and
// dir) on first start; created says which.
func loadAPIKey(dir string) (key string, created bool, err error) {
	path := filepath.Join(dir, apiKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key = strings.TrimSpace(string(b))
		if len(key) < 16 {
			return "", false, fmt.Errorf("api key %s: shorter than 16 characters; delete it to get a new one", path)
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
	// O_EXCL: two processes starting on one directory keep one key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadAPIKey(dir)
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
