package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/web/watch"
)

// upAPIDir is where, in up's data directory, the Newznab API keeps its key
// and search index. A scope cannot start with '_', so no persist scope's
// directory can be this one.
const upAPIDir = "_usenet-api"

// startUpAPI serves the usenet indexer's Newznab API on up's HTTP side
// (none without --http): the key is created on first start in the data
// directory and printed with the URL. onStop registers the API's stops.
func startUpAPI(ctx context.Context, cfg upConfig, connect func(name, user string) (*nats.Conn, error), ph *procHTTP, onStop func(func(context.Context) error)) (string, error) {
	if ph == nil {
		return "", nil
	}
	dir := filepath.Join(cfg.dataDir, upAPIDir)
	key, created, err := newznab.LoadKey(dir)
	if err != nil {
		return "", err
	}
	nc, err := connect("switchyard-usenet-api", auth.RoleClient)
	if err != nil {
		return "", err
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Service: cfg.service})
	if err != nil {
		return "", err
	}
	onStop(func(context.Context) error { return c.Close() })
	st, err := cfg.work.usenetOpts.store(c)
	if err != nil {
		return "", err
	}
	api, err := startUsenetAPI(ctx, st, dir, "", newznab.KeyChecker(key), ph)
	if err != nil {
		return "", err
	}
	onStop(api.Stop)
	if err := startUpWatch(cfg, c, ph, onStop); err != nil {
		return "", err
	}
	how := "key stored in " + filepath.Join(dir, apiKeyFile)
	if created {
		how = "key created in " + filepath.Join(dir, apiKeyFile)
	}
	return fmt.Sprintf("  newznab    %s/api?apikey=%s   (%s)\n  watch      %s/watch?scope=hub&stream=log   (any stream, live in a browser)\n", ph.url(), key, how, ph.url()), nil
}

// startUpWatch mounts the WebSocket watch gateway (/ws/watch, /watch) on
// up's HTTP side. With --auth, browsers log in as the bus's users and see
// what the bus lets them read (a tenant its own scopes); without it the bus
// is open, and so is the gateway.
func startUpWatch(cfg upConfig, c *persist.Client, ph *procHTTP, onStop func(func(context.Context) error)) error {
	authz := watch.Open()
	if cfg.authDir != "" {
		accounts, err := watch.AuthDirAccounts(cfg.authDir, cfg.service)
		if err != nil {
			return fmt.Errorf("watch gateway: %w", err)
		}
		authz = watch.Accounts(accounts)
	}
	gw, err := watch.New(watch.Config{Client: c, Authorizer: authz})
	if err != nil {
		return err
	}
	if err := gw.Start(context.Background()); err != nil {
		return err
	}
	// The server's shutdown does not wait for WebSocket connections (they
	// were taken over from it): the gateway closes its own.
	onStop(gw.Stop)
	gw.Mount(ph.server())
	return nil
}
