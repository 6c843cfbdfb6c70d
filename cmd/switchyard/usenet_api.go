package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/web/metrics"
)

// apiKeyFile is the file, in a data directory, that holds the Newznab API
// key (newznab.LoadKey).
const apiKeyFile = newznab.KeyFile

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
