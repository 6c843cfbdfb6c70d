package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
)

// newUsenetServeCmd builds switchyard usenet serve.
func newUsenetServeCmd() *cobra.Command {
	var natsOpts natsFlags
	var usenetOpts usenetFlags
	var httpOpts httpFlags
	var dataDir, baseURL string
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Newznab API (/api) of the usenet indexer over HTTP",
		Long: `Serves the Newznab API that Sonarr, Radarr, Prowlarr, NZBHydra, SABnzbd and
NZBGet use, at http://ADDR/api: t=caps, search, tvsearch, movie, get (the NZB)
and details. Searches are answered from a SQLite full-text index in --data,
kept current from the releases stream of --usenet-scope; after a restart it
resumes from the last change it applied.

Every function but t=caps needs the API key (apikey=KEY). The key is created
on first start, stored in --data/apikey (mode 0600) and printed; copy it into
the downloader's indexer settings. 'switchyard up' serves the same API on its
--http address.

/metrics, /healthz and /readyz are served beside it and have no
authentication, so a non-loopback --http needs --http-insecure.`,
		Example: `  switchyard usenet serve
  switchyard usenet serve --http 0.0.0.0:8080 --http-insecure --base-url https://indexer.example.org --data /var/lib/switchyard-usenet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if httpOpts.addr == "" {
				return usagef("--http: usenet serve needs an address to serve the API on")
			}
			if err := httpOpts.validate(false); err != nil {
				return err
			}
			if err := usenet.ValidScope(usenetOpts.scope); err != nil {
				return usagef("--usenet-scope: %v", err)
			}
			key, created, err := newznab.LoadKey(dataDir)
			if err != nil {
				return err
			}
			nc, err := natsOpts.connectRole("switchyard-usenet-api", 0)
			if err != nil {
				return err
			}
			defer nc.Close()
			c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Service: natsOpts.service})
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := usenetOpts.store(c)
			if err != nil {
				return err
			}
			ph := newProcHTTP(httpOpts)
			ph.checkBus("nats", nc)
			api, err := startUsenetAPI(cmd.Context(), st, dataDir, baseURL, newznab.KeyChecker(key), ph)
			if err != nil {
				return err
			}
			// Started by runUntilSignal after the HTTP side: say where.
			announce := func(context.Context) error {
				printAPIKey(cmd, ph.url(), key, created, dataDir)
				slog.Info("usenet api listening", "url", ph.url()+"/api", "scope", st.Scope())
				return nil
			}
			return runUntilSignal(cmd.Context(), startStop{announce, api.Stop}, ph)
		},
	}
	httpOpts.registerServing(serve, "127.0.0.1:8080", "the Newznab /api, /metrics, /healthz and /readyz")
	serve.Flags().StringVar(&dataDir, "data", "switchyard-usenet", "`DIR` of the search index and the API key")
	serve.Flags().StringVar(&baseURL, "base-url", "", "`URL` the links in feeds start with (default: the request's own host)")
	usenetOpts.registerScope(serve)
	natsOpts.registerServer(serve)
	return serve
}

// printAPIKey tells the user where the API is and which key it takes.
func printAPIKey(cmd *cobra.Command, url, key string, created bool, dir string) {
	how := "stored in"
	if created {
		how = "created, stored in"
	}
	fmt.Fprintf(stdout(cmd), "newznab api %s/api  key %s (%s %s)\n", url, key, how, dir)
}
