package main

import (
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/web"
)

// upHTTPDefault is where up serves HTTP unless --http says otherwise.
const upHTTPDefault = "127.0.0.1:8080"

// httpFlags are --http, --http-insecure and --http-host of a process's
// HTTP side, and up's --metrics-open.
type httpFlags struct {
	addr        string
	insecure    bool
	hosts       []string
	metricsOpen bool
}

// register adds the flags; def is --http's default ("" = off).
func (f *httpFlags) register(cmd *cobra.Command, def string) {
	f.registerServing(cmd, def, "/metrics, /healthz and /readyz")
}

// registerServing is register for a command whose HTTP side serves more
// than the operations endpoints: serves lists what.
func (f *httpFlags) registerServing(cmd *cobra.Command, def, serves string) {
	off := ""
	if def != "" {
		off = `; "" turns it off`
	}
	cmd.Flags().StringVar(&f.addr, "http", def, "`ADDR` (host:port) to serve "+serves+" on"+off+" (loopback only unless --http-insecure)")
	cmd.Flags().BoolVar(&f.insecure, "http-insecure", false, "allow a non-loopback --http: the HTTP side speaks plain HTTP, so its data and any credentials sent to it (a bus user's password or an API key) cross the network in the clear, and what takes no login is open to anyone who reaches the port; put it behind a TLS proxy")
	cmd.Flags().StringArrayVar(&f.hosts, "http-host", nil, "`NAME` (DNS name or IP) the HTTP side answers to besides localhost, 127.0.0.0/8, ::1 and --http's host (a wildcard --http such as 0.0.0.0 names none: give the names clients use); repeatable. A request with any other Host is refused (421), and a WebSocket from a page of any other origin (403): this keeps DNS-rebinding pages out")
}

// registerMetricsOpen adds --metrics-open, for a command whose HTTP side
// takes the bus's users (up --auth).
func (f *httpFlags) registerMetricsOpen(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.metricsOpen, "metrics-open", false, "with --auth, serve /metrics without credentials (for a scraper without a bus user); otherwise it needs a bus user (Basic auth) or an API key like the dashboard")
}

// fleetHTTP is the HTTP side the flags describe.
func (f httpFlags) fleetHTTP() fleet.HTTPConfig {
	return fleet.HTTPConfig{Addr: f.addr, Hosts: f.hosts, MetricsOpen: f.metricsOpen}
}

// shownURL is base, the HTTP side's URL as it listens ("" without one), as
// a client must call it: a wildcard --http (0.0.0.0, ::) is no host a
// client can name, and the HTTP side answers a Host that is not one of its
// names with 421, so the URL names the first --http-host instead, or
// 127.0.0.1 without one (a wildcard listens on loopback too, and loopback
// is always answered).
func (f httpFlags) shownURL(base string) string {
	hostPort, ok := strings.CutPrefix(base, "http://")
	if !ok {
		return base
	}
	host, port, err := net.SplitHostPort(hostPort)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsUnspecified() {
		return base
	}
	host = "127.0.0.1"
	if len(f.hosts) > 0 {
		host = f.hosts[0]
	}
	return "http://" + net.JoinHostPort(host, port)
}

// validate refuses a non-loopback address without --http-insecure (or, in
// up, --insecure): the HTTP side speaks plain HTTP, so even under --auth
// its credentials and data cross the network in the clear.
func (f httpFlags) validate(insecure bool) error {
	if f.addr == "" {
		return nil
	}
	host, err := checkListenAddr("--http", f.addr)
	if err != nil {
		return err
	}
	if !web.IsLoopback(host) && !f.insecure && !insecure {
		return usagef("--http %q is reachable from other machines, and the HTTP side speaks plain HTTP (credentials and data in the clear; without --auth, open to all): use a loopback address, or --http-insecure to serve it anyway (behind a TLS proxy)", f.addr)
	}
	for _, n := range f.hosts {
		if err := web.ValidHostName(n); err != nil {
			return usagef("--http-host: %v", err)
		}
	}
	return nil
}
