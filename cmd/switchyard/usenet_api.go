package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/web/metrics"
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

// keyChecker accepts exactly key, in constant time.
func keyChecker(key string) func(string) bool {
	return func(k string) bool { return subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 }
}

// usenetAPI is the Newznab API of one process: a search index in its data
// directory, kept current from the releases stream, and the /api handler.
type usenetAPI struct {
	ix *search.Index
	f  *search.Follower
}

// startUsenetAPI opens (or creates) the index in dir, follows st's releases
// stream into it from where it left off, and mounts /api on ph's server,
// counting its requests in ph's metrics and its follower in readiness.
func startUsenetAPI(ctx context.Context, st *usenet.Store, dir, baseURL string, keys func(string) bool, ph *procHTTP) (*usenetAPI, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("usenet api: %w", err)
	}
	ix, err := search.Open(filepath.Join(dir, "search.db"))
	if err != nil {
		return nil, fmt.Errorf("usenet api: %w", err)
	}
	f, err := ix.Follow(ctx, st.Releases())
	if err != nil {
		ix.Close()
		return nil, fmt.Errorf("usenet api: follow releases: %w", err)
	}
	var observe func(string, int)
	if ph != nil {
		requests, err := metrics.NewznabRequests(ph.metrics.Registerer())
		if err != nil {
			_ = f.Stop(ctx)
			ix.Close()
			return nil, err
		}
		observe = func(fn string, code int) { requests.WithLabelValues(fn, strconv.Itoa(code)).Inc() }
	}
	ph.check("usenet search index", func() error {
		select {
		case <-f.Done():
			return fmt.Errorf("stopped following releases: %v", f.Err())
		default:
			return nil
		}
	})
	if ph != nil {
		ph.parts.setIndex(ix)
	}
	ph.server().Handle("/api", newznab.Handler(newznab.Config{Index: ix, Store: st, APIKeys: keys, BaseURL: baseURL, Observe: observe}))
	slog.Info("usenet api: search index following releases", "index", filepath.Join(dir, "search.db"), "from_seq", ix.LastSeq()+1)
	return &usenetAPI{ix: ix, f: f}, nil
}

// Stop stops following and closes the index.
func (a *usenetAPI) Stop(ctx context.Context) error {
	err := a.f.Stop(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, a.ix.Close())
}
