package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/web"
)

// newUpCmd builds switchyard up.
func newUpCmd() *cobra.Command {
	var (
		host, dataDir, archiveDir, placementName, service string
		authDir, tlsCert, tlsKey, cpuProfile              string
		port, servers, packs                              int
		insecure, exclusive, insecureCreds                bool
		uw                                                upWork
		httpOpts                                          httpFlags
		regionOpts                                        regionFlags
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything embedded in one process: NATS, persist servers, the balancer, a coordinator and workers",
		Long: `Starts an embedded NATS server, --servers persist servers (ids 0..N-1) sharing the
data directory, and the balancer, then prints how to connect. Client commands
(switchyard kv, stream, persist inventory) find it at the default address.

It also runs the work pipeline end to end: one coordinator (shard 1/1) and
--workers workers against --nntp, or, when --nntp names no provider, against a
demo NNTP provider in-process (two growing alt.binaries.demo.* groups, source
"demo"). Follow it with switchyard work status. --no-work leaves all of it out.
Ctrl-C or SIGTERM stops it cleanly: requests in flight are answered and every
SQLite file is closed.

With --auth DIR (made by switchyard auth init) NATS admits only the users in
DIR/nats-server.conf, each confined to its role's subjects; the roles inside
this process log in as DIR/server-ID.creds and DIR/balancer.creds. On a
non-loopback --host, up refuses to start without --auth, or with --auth but
without --tls-cert, unless --insecure. With --tls-cert and --tls-key, network
clients must use TLS (give them the CA with --tls-ca).

Regions: with --region NAME, --forward-listen ADDR, --peer NAME=URL... and
--forward-secrets FILE, this up is one region of several, each with its own bus
and data: a subscription on its /ws/events hears the writes made in every region,
carried by signed batches of the forward queue (docs/events.md).`,
		Example: `  switchyard up
  switchyard up --nats-port 4333 --data /tmp/sy --servers 4
  switchyard up --host 0.0.0.0 --auth ./sy-auth --tls-cert cert.pem --tls-key key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return usagef("--nats-port %d: want 1-65535", port)
			}
			if servers < 1 || servers > 64 {
				return usagef("--servers %d: want 1-64", servers)
			}
			fn, err := parsePlacement(placementName)
			if err != nil {
				return err
			}
			if authDir == "" && !insecure && !web.IsLoopback(host) {
				return usagef("--host %q is reachable from other machines: give --auth DIR (see switchyard auth init) or, to run an open bus anyway, --insecure", host)
			}
			if authDir != "" && tlsCert == "" && !insecure && !web.IsLoopback(host) {
				return usagef("--host %q is reachable from other machines, and without --tls-cert the bus speaks plain NATS (its users' passwords and every message in the clear): give --tls-cert FILE --tls-key FILE (clients then trust it with --tls-ca), or --insecure to run it in the clear anyway", host)
			}
			if err := httpOpts.validate(insecure); err != nil {
				return err
			}
			if (tlsCert == "") != (tlsKey == "") {
				return usagef("--tls-cert and --tls-key go together")
			}
			uw.tailSet = cmd.Flags().Changed("tail-every")
			if err := uw.workOpts.validatePlan(); err != nil {
				return err
			}
			if uw.workers < 0 || uw.workers > 64 {
				return usagef("--workers %d: want 0-64", uw.workers)
			}
			if err := checkSource(uw.source); err != nil {
				return err
			}
			if err := uw.usenetOpts.validateIndexer("usenet"); err != nil {
				return err
			}
			if err := uw.usenetOpts.validateBaseURL(); err != nil {
				return err
			}
			if !uw.off {
				demo := uw.providerOpts
				if demo.addr == "" {
					demo.addr = "demo:119" // checked for real once the demo provider listens
				}
				if _, _, err := demo.config(); err != nil {
					return err
				}
			}
			if err := checkPacks(packs, archiveDir); err != nil {
				return err
			}
			ec, err := regionOpts.config(insecureCreds)
			if err != nil {
				return err
			}
			if len(ec.Peers) > 0 && httpOpts.addr == "" {
				return usagef("--peer joins the events API of the HTTP side: it needs --http")
			}
			if authDir != "" {
				if err := checkAuthDir(authDir); err != nil {
					return err
				}
			}
			cfg := upConfig{events: ec, work: uw, host: host, port: port, dataDir: dataDir, archiveDir: archiveDir, servers: servers, exclusive: exclusive, packs: packs, placement: fn, placementName: placementName, service: service, authDir: authDir, insecureCreds: insecureCreds, tlsCert: tlsCert, tlsKey: tlsKey, http: httpOpts}
			// It reads the --tls-cert and --tls-key files: one that cannot
			// be read is refused before --data is made.
			fc, err := cfg.fleetConfig()
			if err != nil {
				return err
			}
			// Every flag is checked: only now may up write anything.
			if err := checkDataDirs(dataDir, archiveDir); err != nil {
				return err
			}
			stopProfile, err := startProfiles(cpuProfile, "", "")
			if err != nil {
				return err
			}
			err = runUp(cmd, cfg, fc)
			if perr := stopProfile(); err == nil {
				err = perr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "address the embedded NATS server listens on")
	cmd.Flags().IntVar(&port, "nats-port", 4222, "port of the embedded NATS server")
	cmd.Flags().StringVar(&dataDir, "data", upDataDefault, "directory for the SQLite files")
	cmd.Flags().StringVar(&archiveDir, "archive", "", "directory for backup copies of the streams (optional, see persist serve --help)")
	cmd.Flags().BoolVar(&exclusive, "exclusive-files", true, "lock each stream file while it is open (see persist serve --help): up's servers are the only ones on --data and never move scopes between them; turn it off (--exclusive-files=false) if another process shares --data")
	cmd.Flags().IntVar(&servers, "servers", 2, "number of persist servers (ids 0..N-1)")
	cmd.Flags().IntVar(&packs, "packs", 0, packsHelp)
	cmd.Flags().StringVar(&placementName, "placement", placement.NameRendezvous, "placement function: rendezvous or modulo")
	cmd.Flags().StringVar(&service, "service", bus.DefaultService, "first subject token of the persist service")
	cmd.Flags().StringVar(&authDir, "auth", "", "`DIR` written by switchyard auth init: NATS admits only its users, with their role's permissions (required on a non-loopback --host)")
	cmd.Flags().BoolVar(&insecureCreds, "insecure-creds", false, "use --auth's creds files and --forward-secrets even if group or others may read them (a file system without modes)")
	cmd.Flags().StringVar(&tlsCert, "tls-cert", "", "PEM `FILE` of the NATS server's TLS certificate; network clients must then use TLS (with --tls-key)")
	cmd.Flags().StringVar(&tlsKey, "tls-key", "", "PEM `FILE` of the private key of --tls-cert")
	cmd.Flags().BoolVar(&uw.off, "no-work", false, "run no coordinator, worker or demo NNTP provider (the HTTP side still reads the usenet records of --usenet-scope)")
	cmd.Flags().IntVar(&uw.workers, "workers", 1, "number of workers indexing the spooled ranges")
	sourceFlag(cmd, &uw.source)
	uw.providerOpts.register(cmd, false)
	uw.workOpts.registerPlan(cmd)
	uw.workOpts.registerLease(cmd)
	uw.usenetOpts.registerSettle(cmd)
	uw.usenetOpts.registerPostProcess(cmd)
	uw.usenetOpts.registerHidePassworded(cmd)
	uw.usenetOpts.registerBaseURL(cmd)
	httpOpts.registerServing(cmd, upHTTPDefault, "the dashboard /, /metrics, /healthz, /readyz, the Newznab /api, the watch gateway /ws/watch and the events API /ws/events")
	httpOpts.registerMetricsOpen(cmd)
	regionOpts.register(cmd)
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a non-loopback --host without --auth (anyone who reaches the port can read and write everything) or without --tls-cert (passwords and messages in the clear), and a non-loopback --http (plain HTTP)")
	// For bench events, which profiles the up it measures.
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process to `FILE` when it stops")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	return cmd
}

type upConfig struct {
	host, dataDir, archiveDir, placementName, service string
	authDir, tlsCert, tlsKey                          string
	port, servers                                     int
	exclusive                                         bool // stream files locked while open
	packs                                             int  // new streams in shared files (persist serve --packs)
	insecureCreds                                     bool // --insecure-creds: authDir's creds files whatever their mode
	placement                                         placement.Func
	work                                              upWork
	http                                              httpFlags
	events                                            fleet.EventsConfig
}

// ids are the persist server ids of up: 0..--servers-1.
func (cfg upConfig) ids() []string {
	ids := make([]string, cfg.servers)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return ids
}

// upAPIDir is where, in up's data directory, the Newznab API keeps its key
// and search index. A scope cannot start with '_', so no persist scope's
// directory can be this one.
const upAPIDir = "_usenet-api"

// upDataDefault is up's --data default.
const upDataDefault = "./switchyard-data"

// fleetConfig is up's set of roles: an embedded NATS server, --servers
// persist servers sharing the data directory, the balancer, the work
// pipeline (unless --no-work) and, with --http, the dashboard, the Newznab
// API, the watch gateway and the events API.
func (cfg upConfig) fleetConfig() (fleet.Config, error) {
	ecfg := &embedded.Config{Host: cfg.host, Port: cfg.port}
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return fleet.Config{}, fmt.Errorf("--tls-cert %q and --tls-key %q: %w", cfg.tlsCert, cfg.tlsKey, err)
		}
		ecfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ids := cfg.ids()
	hc := cfg.http.fleetHTTP()
	hc.Dashboard, hc.Watch, hc.Events = true, true, true
	fc := fleet.Config{
		Service:  cfg.service,
		NATS:     fleet.NATSConfig{Embedded: ecfg, AuthDir: cfg.authDir, AnyCredsMode: cfg.insecureCreds},
		Persist:  fleet.PersistConfig{IDs: ids, Serve: ids, Placement: cfg.placement, DataDir: cfg.dataDir, Archive: cfg.archiveDir, ExclusiveFiles: cfg.exclusive, Packs: cfg.packs},
		Balancer: true,
		HTTP:     hc,
		Events:   cfg.events,
	}
	if cfg.http.addr != "" {
		fc.API = fleet.APIConfig{Dir: filepath.Join(cfg.dataDir, upAPIDir), HidePassworded: cfg.work.usenetOpts.hidePassworded, BaseURL: cfg.work.usenetOpts.baseURL}
	}
	w, err := cfg.work.fleetConfig()
	if err != nil {
		return fleet.Config{}, err
	}
	fc.Work = w
	return fc, nil
}

// runUp starts every role of fc (cfg.fleetConfig), prints how to use them,
// waits for the command's context to end (a signal), then stops them in
// the reverse order (see fleet.Fleet.Stop).
func runUp(cmd *cobra.Command, cfg upConfig, fc fleet.Config) error {
	return runFleet(cmd, fc, func(f *fleet.Fleet) {
		printUp(stdout(cmd), cfg, fc, f)
	}, "switchyard stopping: the roles stop in the reverse order of starting, workers first, NATS and the HTTP side last")
}

// printUp tells the user what runs and what to try.
func printUp(w io.Writer, cfg upConfig, fc fleet.Config, f *fleet.Fleet) {
	url := f.BusURL()
	fmt.Fprintf(w, `switchyard is up
  NATS       %s   (export %s=%s)
  persist    %d servers, ids %s, placement %s, data %s
  balancer   %s.*.id
%s%s%s%s
%s
Stop with Ctrl-C.
`, url, bus.EnvURL, url, cfg.servers, strings.Join(fc.Persist.IDs, ","), cfg.placementName, cfg.dataDir, cfg.service, workLine(cfg.work, fc.Work, f), httpLine(cfg.http.shownURL(f.HTTPURL())), apiLine(f, cfg.http.shownURL(f.HTTPURL())), regionLine(cfg.events), upTry(cfg, url))
}

// regionLine is up's line about its region and peers, "" for a region of
// its own.
func regionLine(ec fleet.EventsConfig) string {
	if len(ec.Peers) == 0 {
		return ""
	}
	var peers []string
	for _, name := range slices.Sorted(maps.Keys(ec.Peers)) {
		peers = append(peers, name+"="+ec.Peers[name])
	}
	return fmt.Sprintf("  region     %s, forward receiver %s, peers %s\n", ec.Region, ec.ForwardListen, strings.Join(peers, " "))
}

// httpLine is up's line about its HTTP side at base, "" without one.
func httpLine(base string) string {
	if base == "" {
		return ""
	}
	return fmt.Sprintf("  HTTP       %s   (dashboard /, /metrics, /healthz, /readyz)\n", base)
}

// apiLine is up's lines about the Newznab API, the releases page, and the
// watch and events pages at base, "" without an HTTP side.
func apiLine(f *fleet.Fleet, base string) string {
	key, created := f.APIKey()
	if key == "" {
		return ""
	}
	how := "key stored in " + f.APIKeyFile()
	if created {
		how = "key created in " + f.APIKeyFile()
	}
	return fmt.Sprintf("  newznab    %s/api?apikey=%s   (%s)\n  releases   %s/releases   (search and download NZBs in a browser; sign in with the key)\n  watch      %s/watch?scope=hub&stream=log   (any stream, live in a browser)\n"+
		"  events     %s/events   (subscribe to keys and everything below them)\n", base, key, how, base, base, base)
}

// workTry is up's hint for following the work pipeline, "" without one.
func workTry(uw upWork, flag string) string {
	if uw.off {
		return ""
	}
	return fmt.Sprintf("  switchyard work status --source %s%s   # ranges, leases, shares, throughput\n", uw.sourceName(), flag)
}
