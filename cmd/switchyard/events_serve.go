package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/fleet"
)

// eventsServeHTTPDefault is where events serve takes its sockets unless
// --http says otherwise: beside up's 8080.
const eventsServeHTTPDefault = "127.0.0.1:8090"

// newEventsServeCmd builds switchyard events serve: the events layer as a
// role of its own on a bus whose persist servers and balancer run
// elsewhere, as up runs it beside them.
func newEventsServeCmd() *cobra.Command {
	var natsOpts natsFlags
	var httpOpts httpFlags
	var regionOpts regionFlags
	var authDir string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the events API (/ws/events) of a region on a bus whose persist servers run elsewhere",
		Long: `Runs the events layer of one region as a process of its own: the router that
turns the persist servers' change feeds into deliveries, the WebSocket API
/ws/events (with /ws/events.js and the /events page), presence rows, and with
--peer the forward queue to other regions. It is what switchyard up runs
beside its persist servers; here they, and the balancer, are elsewhere on the
bus (--nats), and this process holds the sockets.

Logins: with --auth DIR (made by switchyard auth init, the bus's) it connects
as DIR's client user, and /ws/events takes the bus's users (Basic) and API
keys, each tenant only on its scopes. Without --auth the API is as open as the
bus: anyone who reaches --http may subscribe to anything.

SIGTERM or Ctrl-C: close the sockets (going away), stop the router and the
forward queue, exit 0.`,
		Example: `  switchyard events serve --nats nats://10.0.0.5:4222 --http 127.0.0.1:8090
  switchyard events serve --nats nats://10.0.0.5:4222 --auth ./sy-auth --tls-ca ca.pem \
    --region eu --forward-listen 10.0.0.7:7001 --peer us=http://10.1.0.7:7001 --forward-secrets regions.secrets`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if httpOpts.addr == "" {
				return usagef("--http is required: it is where /ws/events is served")
			}
			if err := httpOpts.validate(false); err != nil {
				return err
			}
			ec, err := regionOpts.config(natsOpts.insecureCreds)
			if err != nil {
				return err
			}
			if authDir != "" && (natsOpts.creds != "" || os.Getenv(auth.EnvCreds) != "") {
				return usagef("--auth connects as its client user: give --creds (or $%s) or --auth, not both", auth.EnvCreds)
			}
			if authDir != "" {
				if err := checkAuthDir(authDir); err != nil {
					return err
				}
			}
			bus, err := natsOpts.fleetNATS()
			if err != nil {
				return err
			}
			bus.AuthDir = authDir
			bus.AnyCredsMode = natsOpts.insecureCreds
			hc := httpOpts.fleetHTTP()
			hc.Events = true
			cfg := fleet.Config{Service: natsOpts.service, NATS: bus, HTTP: hc, Events: ec}
			region := ec.Region
			if region == "" {
				region = fleet.RegionDefault
			}
			return runFleet(cmd, cfg, func(f *fleet.Fleet) {
				// A line other processes (and the tests) can wait for.
				base := httpOpts.shownURL(f.HTTPURL())
				fmt.Fprintf(stdout(cmd), "events region %s ready on %s: /ws/events on %s (try %s/events)\n", region, shownBusURL(f), base, base)
			}, "events stopping", "region", region)
		},
	}
	natsOpts.registerServer(cmd)
	cmd.Flags().StringVar(&authDir, "auth", "", "`DIR` written by switchyard auth init: connect as its client user, and log /ws/events in as the bus's users (Basic) or their API keys")
	httpOpts.registerServing(cmd, eventsServeHTTPDefault, "the events API /ws/events (with /ws/events.js and the /events page), /metrics, /healthz and /readyz")
	// Required here: the shared usage says "" turns the HTTP side off.
	cmd.Flags().Lookup("http").Usage = "`ADDR` (host:port) to serve the events API /ws/events (with /ws/events.js and the /events page), /metrics, /healthz and /readyz on (loopback only unless --http-insecure)"
	httpOpts.registerMetricsOpen(cmd)
	regionOpts.register(cmd)
	return cmd
}
