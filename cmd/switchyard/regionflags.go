package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/web"
)

// regionFlags are --region, --peer, --forward-listen and --forward-secrets:
// the region a process serves and the peer regions it is joined to; and
// --events-window, its events router's coalescing window.
type regionFlags struct {
	region, listen, secretsFile string
	peers                       []string
	window                      time.Duration
}

func (f *regionFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.region, "region", "", "`NAME` of this region: presence rows say where users are by it, and --peer regions know it by it (default "+fleet.RegionDefault+")")
	cmd.Flags().StringArrayVar(&f.peers, "peer", nil, "`NAME=URL` of a peer region's forward receiver (its --forward-listen, as http://HOST:PORT); repeatable. Subscriptions on /ws/events then hear the writes made in every region")
	cmd.Flags().StringVar(&f.listen, "forward-listen", "", "`ADDR` (host:port) where this region's forward receiver takes its peers' signed batches (required with --peer)")
	cmd.Flags().DurationVar(&f.window, "events-window", events.CoalesceWindowDefault, "`DURATION` of a coalescing window on /ws/events: one delivery per subscription and key per window, with the key's newest value (0: none, every change delivered at once)")
	cmd.Flags().StringVar(&f.secretsFile, "forward-secrets", "", "`FILE` of NAME=SECRET lines, one per region, this one included (the same file in every region; switchyard events secrets NAME... makes one); required with --peer")
}

// config checks the flags and reads the secrets into an EventsConfig.
// anyMode (--insecure-creds) reads a secrets file whatever its mode; else
// one that group or others may read or write is refused, as creds files
// are: whoever reads it can sign batches any region accepts.
func (f *regionFlags) config(anyMode bool) (fleet.EventsConfig, error) {
	ec := fleet.EventsConfig{Region: f.region, ForwardListen: f.listen}
	var err error
	if f.region != "" && !validRegionName(f.region) {
		return ec, usagef("--region %q: want 1-64 of [a-z0-9_-]", f.region)
	}
	if f.listen != "" {
		if _, err := checkListenAddr("--forward-listen", f.listen); err != nil {
			return ec, err
		}
	}
	if ec.Window, err = coalesceWindow("--events-window", f.window); err != nil {
		return ec, err
	}
	if len(f.peers) == 0 {
		if f.listen != "" || f.secretsFile != "" {
			return ec, usagef("--forward-listen and --forward-secrets join this region to --peer regions: give at least one --peer")
		}
		return ec, nil
	}
	if f.region == "" || f.listen == "" || f.secretsFile == "" {
		return ec, usagef("--peer needs --region, --forward-listen and --forward-secrets")
	}
	ec.Peers = map[string]string{}
	for _, p := range f.peers {
		name, raw, ok := strings.Cut(p, "=")
		if !ok || !validRegionName(name) {
			return ec, usagef("--peer %q: want NAME=URL, NAME of [a-z0-9_-]", p)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return ec, usagef("--peer %s: %q is not an http:// or https:// URL", name, raw)
		}
		if name == f.region {
			return ec, usagef("--peer %s: that is this region (--region)", name)
		}
		// Its own receiver answers a batch signed as this region with an
		// empty 200 and drops it, so the sender would count every batch
		// delivered while the peer got nothing, and nothing would say why.
		if reachesListener(u, f.listen) {
			return ec, usagef("--peer %s: %s is this region's own --forward-listen %s: give the URL of %s's receiver (its --forward-listen)", name, raw, f.listen, name)
		}
		if _, dup := ec.Peers[name]; dup {
			return ec, usagef("--peer %s given twice", name)
		}
		ec.Peers[name] = raw
	}
	file, err := os.Open(f.secretsFile)
	if err != nil {
		return ec, fmt.Errorf("--forward-secrets: %w", err)
	}
	defer file.Close()
	if !anyMode {
		fi, err := file.Stat()
		if err != nil {
			return ec, fmt.Errorf("--forward-secrets: %w", err)
		}
		if err := auth.CheckMode("--forward-secrets", f.secretsFile, fi); err != nil {
			return ec, fmt.Errorf("%w (or --insecure-creds to use it anyway): whoever reads it can sign batches every region accepts", err)
		}
	}
	if ec.Secrets, err = parseRegionSecrets(file); err != nil {
		return ec, fmt.Errorf("--forward-secrets %s: %w", f.secretsFile, err)
	}
	for _, name := range append(keys(ec.Peers), f.region) {
		if _, ok := ec.Secrets[name]; !ok {
			return ec, fmt.Errorf("--forward-secrets %s: no secret for region %q", f.secretsFile, name)
		}
	}
	return ec, nil
}

// reachesListener reports whether the peer URL u names listen, a checked
// host:port: the same port, and the same host, or a loopback name for a
// loopback or wildcard listen host. The same port on another host is
// another region's receiver; a listen on port 0 is never named.
func reachesListener(u *url.URL, listen string) bool {
	lhost, lport, err := net.SplitHostPort(listen)
	if err != nil || lport == "0" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != lport {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, lhost) {
		return true
	}
	return web.IsLoopback(strings.ToLower(host)) && (lhost == "" || web.IsLoopback(lhost) || isUnspecified(lhost))
}

// isUnspecified reports whether a listen host is 0.0.0.0 or ::, which
// listens on every address, loopback included.
func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// coalesceWindow turns a window flag's value into the router's: 0 is
// events.NoCoalescing (none), a negative value a usage error.
func coalesceWindow(flag string, d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, usagef("%s %v: want 0 (none) or more", flag, d)
	case d == 0:
		return events.NoCoalescing, nil
	}
	return d, nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// minRegionSecret is the shortest secret a secrets file may hold.
const minRegionSecret = 32

// parseRegionSecrets reads NAME=SECRET lines; blank lines and lines
// starting with # are skipped. A secret is at least 32 bytes; a name is
// given once.
func parseRegionSecrets(r io.Reader) (map[string][]byte, error) {
	out := map[string][]byte{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, ok := strings.Cut(line, "=")
		name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
		switch {
		case !ok || !validRegionName(name):
			return nil, fmt.Errorf("line %d: want NAME=SECRET, NAME of [a-z0-9_-]", n)
		case len(secret) < minRegionSecret:
			return nil, fmt.Errorf("line %d: the secret of %q is shorter than %d bytes", n, name, minRegionSecret)
		case out[name] != nil:
			return nil, fmt.Errorf("line %d: a second secret for %q", n, name)
		}
		out[name] = bytes.Clone([]byte(secret))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// validRegionName is a region's name: 1 to 64 of [a-z0-9_-].
func validRegionName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
