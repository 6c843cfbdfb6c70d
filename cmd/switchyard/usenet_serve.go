package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/usenet"
)

// newUsenetServeCmd builds switchyard usenet serve.
func newUsenetServeCmd() *cobra.Command {
	var natsOpts natsFlags
	var usenetOpts usenetFlags
	var httpOpts httpFlags
	var dataDir string
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Newznab API (/api) and the releases page (/releases) of the usenet indexer over HTTP",
		Long: `Serves the Newznab API that Sonarr, Radarr, Prowlarr, NZBHydra, SABnzbd and
NZBGet use, at http://ADDR/api: t=caps, search, tvsearch, movie, get (the NZB),
details, getnfo and register. Searches are answered from a SQLite full-text index in --data,
kept current from the releases stream of --usenet-scope; after a restart it
resumes from the last change it applied.

Every function but t=caps and t=register needs an API key (apikey=KEY). The admin key, which
has no limits, is created on first start, stored in --data/apikey (mode 0600)
and printed; copy it into the downloader's indexer settings. Users with keys
and daily limits of their own are kept in --data/users.db: see 'switchyard
usenet users --help'. 'switchyard up' serves the same API on its
--http address.

http://ADDR/releases is a page to search the same index in a browser and
download NZBs; it asks for the same key once and keeps it in a cookie (never
in a URL), and follows new releases live over /ws/watch, which here admits
only that key and reads only --usenet-scope.

/metrics, /healthz and /readyz are served beside it and have no
authentication, so a non-loopback --http needs --http-insecure. Every
endpoint but /healthz and /readyz answers only a Host that is a loopback
name, --http's host or a --http-host NAME: with a wildcard --http such as
0.0.0.0:8080, give the names the downloaders use.

SIGTERM or Ctrl-C: stop serving (requests in flight are answered), close the
search index and the users store, exit 0.`,
		Example: `  switchyard usenet serve
  switchyard usenet serve --http 0.0.0.0:8080 --http-insecure --http-host indexer.example.org --base-url https://indexer.example.org --data /var/lib/switchyard-usenet`,
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
			if err := usenetOpts.validateBaseURL(); err != nil {
				return err
			}
			bus, err := natsOpts.fleetNATS()
			if err != nil {
				return err
			}
			// Every flag is checked: only now may it create --data.
			if err := checkDataDir("--data", dataDir); err != nil {
				return err
			}
			cfg := fleet.Config{
				Service: natsOpts.service,
				NATS:    bus,
				Work:    fleet.WorkConfig{UsenetScope: usenetOpts.scope},
				API:     fleet.APIConfig{Dir: dataDir, BaseURL: usenetOpts.baseURL, HidePassworded: usenetOpts.hidePassworded},
				HTTP:    httpOpts.fleetHTTP(),
			}
			return runFleet(cmd, cfg, func(f *fleet.Fleet) {
				key, created := f.APIKey()
				base := httpOpts.shownURL(f.HTTPURL())
				printAPIKey(cmd, base, key, created, dataDir)
				slog.Info("usenet api listening", "url", base+"/api", "scope", usenetOpts.scope)
			}, "usenet api stopping", "scope", usenetOpts.scope)
		},
	}
	httpOpts.registerServing(serve, "127.0.0.1:8080", "the Newznab /api, /metrics, /healthz and /readyz")
	serve.Flags().StringVar(&dataDir, "data", "switchyard-usenet", "`DIR` of the search index, the admin API key and the users")
	usenetOpts.registerBaseURL(serve)
	usenetOpts.registerScope(serve)
	usenetOpts.registerHidePassworded(serve)
	natsOpts.registerServer(serve)
	return serve
}

// printAPIKey tells the user where the API and the releases page are and
// which key they take.
func printAPIKey(cmd *cobra.Command, url, key string, created bool, dir string) {
	how := "stored in"
	if created {
		how = "created, stored in"
	}
	fmt.Fprintf(stdout(cmd), "newznab api %s/api  key %s (%s %s)\nreleases page %s/releases  (search and download NZBs in a browser; sign in with the key)\n", url, key, how, dir, url)
}
