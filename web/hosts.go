package web

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

// Hosts are the names a server answers to: the Host header of every
// request, and the Origin of every browser page that opens one of its
// WebSockets, must name one of them. A web page that gets a browser to
// send a request to the server (DNS rebinding: evil.example made to
// resolve to 127.0.0.1) carries its own name in both, so it is refused.
//
// Loopback names are always allowed: localhost, 127.0.0.0/8 and ::1. A
// rebinding page cannot carry them (its name is its own), and local tools
// use them. Names compare case-insensitively, without the port and
// without a trailing dot. The zero value (and a nil *Hosts) allows the
// loopback names only.
type Hosts struct {
	names []string // lower-case, no port, no brackets, no trailing dot
}

// NewHosts returns the hosts of a server listening on listen
// ("host:port"): the loopback names, listen's host unless it is a wildcard
// (0.0.0.0, ::, or empty: a wildcard listens on every address, so it names
// none of them and only the loopback names and names follow), and names.
// Each name is a DNS name or an IP address, without a port.
func NewHosts(listen string, names ...string) (*Hosts, error) {
	h := &Hosts{}
	if host, _, err := net.SplitHostPort(listen); err == nil && !wildcard(host) {
		h.add(host)
	}
	for _, n := range names {
		if err := ValidHostName(n); err != nil {
			return nil, err
		}
		h.add(n)
	}
	return h, nil
}

func (h *Hosts) add(name string) {
	n := normalHost(name)
	if n != "" && !IsLoopback(n) && !slices.Contains(h.names, n) {
		h.names = append(h.names, n)
	}
}

// Names lists the names allowed besides the loopback ones.
func (h *Hosts) Names() []string {
	if h == nil {
		return nil
	}
	return slices.Clone(h.names)
}

// ValidHostName checks a name given to NewHosts: a DNS name (letters,
// digits, '-' and '.') or an IP address (IPv6 with or without brackets),
// without a port.
func ValidHostName(name string) error {
	n := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"), ".")
	if net.ParseIP(n) != nil {
		return nil
	}
	if n == "" || len(n) > 253 {
		return fmt.Errorf("host name %q: want a DNS name or an IP address", name)
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("host name %q: want a DNS name or an IP address, without a port", name)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("host name %q: want a DNS name or an IP address, without a port", name)
			}
		}
	}
	return nil
}

// Allowed reports whether host (a Host header: a name or IP, with or
// without a port) is one of h.
func (h *Hosts) Allowed(host string) bool {
	n := normalHost(stripPort(host))
	if n == "" {
		return false
	}
	if IsLoopback(n) {
		return true
	}
	return h != nil && slices.Contains(h.names, n)
}

// CheckOrigin checks a WebSocket upgrade's Origin: none (a client that is
// not a browser) passes, a browser page's passes when its host is one of h
// (whatever its scheme and port) or matches one of patterns
// (websocket.AcceptOptions.OriginPatterns syntax: path.Match over the
// origin's host, or over scheme://host when the pattern has "://"). The
// request's own Host plays no part: a rebinding page sends its own name in
// both.
func (h *Hosts) CheckOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("forbidden: Origin %q is not a URL with a host", origin)
	}
	if h.Allowed(u.Host) {
		return nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return nil
		}
	}
	return fmt.Errorf("forbidden: Origin %q is not one of this server's hosts (%s)", origin, h.describe())
}

// refuse answers a request whose Host is not allowed, with what to do:
// name it with --http-host, unless it is a wildcard address (0.0.0.0, ::),
// which names no host (a URL copied from a listen address): then call the
// server by one of its names instead.
func (h *Hosts) refuse(w http.ResponseWriter, r *http.Request) {
	host := normalHost(stripPort(r.Host))
	fix := "to serve it under that name, give --http-host " + host
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil && ip.IsUnspecified() {
		fix = "it is a listen address, not a host: call the server by one of its names"
	}
	http.Error(w, fmt.Sprintf("misdirected request: Host %q is not one of this server's hosts (%s); %s", r.Host, h.describe(), fix),
		http.StatusMisdirectedRequest)
}

// describe lists the allowed names for an error.
func (h *Hosts) describe() string {
	return strings.Join(append([]string{"localhost", "127.0.0.0/8", "::1"}, h.Names()...), ", ")
}

// stripPort removes a Host header's port, and an IPv6 address's brackets.
func stripPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// normalHost is name lower-cased, without brackets or one trailing dot.
func normalHost(name string) string {
	n := strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	return strings.ToLower(strings.TrimSuffix(n, "."))
}

// IsLoopback reports whether host (a name or an IP, without a port)
// names this machine only: localhost or a loopback IP. Hosts compares
// normalized names; a listen address's host is checked as given.
func IsLoopback(n string) bool {
	if n == "localhost" {
		return true
	}
	ip := net.ParseIP(n)
	return ip != nil && ip.IsLoopback()
}

// wildcard reports whether a listen host listens on every address.
func wildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
