package main

import (
	"net"

	"github.com/spf13/cobra"
)

// upHTTPDefault is where up serves HTTP unless --http says otherwise.
const upHTTPDefault = "127.0.0.1:8080"

// httpFlags are --http and --http-insecure of a process's HTTP side.
type httpFlags struct {
	addr     string
	insecure bool
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
	cmd.Flags().BoolVar(&f.insecure, "http-insecure", false, "allow a non-loopback --http: the endpoints have no authentication yet, anyone who reaches the port can read them")
}

// validate refuses a non-loopback address without --http-insecure (or, in
// up, --insecure): the HTTP side has no authentication yet, and what it
// mounts will grow beyond metrics.
func (f httpFlags) validate(insecure bool) error {
	if f.addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usagef("--http %q: want host:port: %v", f.addr, err)
	}
	if !isLoopback(host) && !f.insecure && !insecure {
		return usagef("--http %s is reachable from other machines and the HTTP side has no authentication yet: use a loopback address, or --http-insecure to serve it anyway", f.addr)
	}
	return nil
}
