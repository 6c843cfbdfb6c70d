package main

import (
	"fmt"
	"strings"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
)

// upTry is the "Try:" block of up's banner: commands that work when pasted
// as printed, so each carries the flags this bus needs (its address unless
// it is the default, the client user's creds under --auth, the CA under
// TLS, the service unless it is the default).
func upTry(cfg upConfig, url string) string {
	sy := upSwitchyardFlags(cfg, url)
	var b strings.Builder
	b.WriteString("Try:\n")
	fmt.Fprintf(&b, "  switchyard kv set hub demo greeting hello%s\n", sy)
	fmt.Fprintf(&b, "  switchyard kv get hub demo greeting%s\n", sy)
	fmt.Fprintf(&b, "  switchyard stream pub hub log 'first event'%s\n", sy)
	fmt.Fprintf(&b, "  switchyard watch hub log%s                # every change, live\n", sy)
	b.WriteString(upNATSTry(cfg, url))
	b.WriteString(workTry(cfg.work, sy))
	return b.String()
}

// upSwitchyardFlags are the connection flags of the switchyard commands of
// up's Try lines, each with a leading space ("" for the defaults).
func upSwitchyardFlags(cfg upConfig, url string) string {
	var f strings.Builder
	if url != defaultLocalURL {
		f.WriteString(" --nats " + shellQuote(url))
	}
	if cfg.authDir != "" {
		f.WriteString(" --creds " + shellQuote(auth.CredsFile(cfg.authDir, auth.RoleClient)))
	}
	if cfg.tlsCert != "" {
		f.WriteString(" --tls-ca CA.pem")
	}
	if cfg.service != bus.DefaultService {
		f.WriteString(" --service " + shellQuote(cfg.service))
	}
	return f.String()
}

// upNATSTry is the Try line of the plain NATS command-line client (nats,
// natscli), preceded under --auth with an NKey client by the line that
// writes the seed file it needs. The nats client cannot read our creds
// file: a password user gets --user and a --password read from the file by
// the shell (so the banner never shows the secret; joined by "=", because a
// URL-safe base64 password may begin with "-", which the client would
// read as a flag), an NKey user --nkey,
// and both --inbox-prefix, the only inbox the client user may read.
func upNATSTry(cfg upConfig, url string) string {
	const comment = "          # the plain NATS client works too\n"
	var f strings.Builder
	if url != defaultLocalURL {
		f.WriteString(" --server " + shellQuote(url))
	}
	var pre string
	if cfg.authDir != "" {
		file := auth.CredsFile(cfg.authDir, auth.RoleClient)
		var load []auth.LoadOption
		if cfg.insecureCreds {
			load = append(load, auth.AnyMode())
		}
		c, err := auth.LoadCreds(file, load...)
		if err != nil {
			return "  # nats req: " + err.Error() + "\n"
		}
		if c.Seed != "" {
			seed := strings.TrimSuffix(file, ".creds") + ".nk"
			pre = fmt.Sprintf("  (umask 077; sed -n 's/^nkey: //p' %s > %s)   # the seed file the nats client reads\n", shellQuote(file), shellQuote(seed))
			f.WriteString(" --nkey " + shellQuote(seed))
		} else {
			fmt.Fprintf(&f, ` --user=%s --password="$(sed -n 's/^password: //p' %s)"`, shellQuote(c.User), shellQuote(file))
		}
		if c.Inbox != "" {
			f.WriteString(" --inbox-prefix " + shellQuote(c.Inbox))
		}
	}
	if cfg.tlsCert != "" {
		f.WriteString(" --tlsca CA.pem")
	}
	return pre + fmt.Sprintf("  nats req %s.hub.id ''%s", cfg.service, f.String()) + comment
}

// shellQuote is s as one word of a POSIX shell: as it is when every byte is
// one a shell takes literally, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
