package auth

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Login is how one user proves who it is to the NATS server: a password or
// the public half of an NKey.
type Login struct {
	User     User
	Password string // set for a password user
	Nkey     string // public key; set for an NKey user
}

// Account is the NATS account of every switchyard user. It has JetStream
// disabled: a responder's reply subject is chosen by the requester, so no
// user of the account may be able to reach a JetStream API ($JS.>) even on
// a server that runs JetStream for other accounts.
const Account = "SWITCHYARD"

// ServerConf renders the nats-server configuration block that defines the
// users of logins with their permissions, all in the account Account with
// JetStream disabled and default permissions that deny everything to a
// user entry without permissions of its own. It is a complete
// configuration file (the server's other settings at their defaults, the
// system account the server's own) that can also be included into a
// larger one that has no accounts block of its own.
func ServerConf(logins []Login) []byte {
	var b bytes.Buffer
	b.WriteString("# nats-server users and permissions for switchyard, written by `switchyard auth init`.\n")
	b.WriteString("# Secret: it holds the passwords. Use it as is, or `include` it in a larger configuration\n")
	b.WriteString("# (one with an accounts block of its own takes the " + Account + " account into that block).\n")
	b.WriteString("# The account has JetStream disabled: no switchyard user reaches $JS.>, even on nats-server -js.\n")
	b.WriteString("accounts {\n")
	b.WriteString("  " + Account + ": {\n")
	b.WriteString("    jetstream: disabled\n")
	// nats-server lets a user entry without a permissions block do
	// anything, so one whose block was deleted, or added by hand without
	// one, would reach every feed, inbox and API. The account's defaults
	// deny everything instead; nats-server gives them only to a user with
	// no block of its own (applyDefaultPermissions), so every generated
	// user keeps exactly its own.
	b.WriteString("    # A user entry without a permissions block of its own may do nothing (nats-server's own default: everything).\n")
	b.WriteString("    default_permissions: { publish: { deny: [\">\"] }, subscribe: { deny: [\">\"] } }\n")
	write := func(l Login) {
		if l.Nkey != "" {
			fmt.Fprintf(&b, "      { # %s\n        nkey: %s\n", describe(l.User), strconv.Quote(l.Nkey))
		} else {
			fmt.Fprintf(&b, "      { # %s\n        user: %s, password: %s\n", describe(l.User), strconv.Quote(l.User.Name), strconv.Quote(l.Password))
		}
		p := l.User.Perms
		b.WriteString("        permissions: {\n")
		if len(p.Publish) > 0 {
			fmt.Fprintf(&b, "          publish: { allow: %s }\n", list(p.Publish))
		} else if !p.Responses {
			b.WriteString("          publish: { deny: [\">\"] }\n")
		}
		fmt.Fprintf(&b, "          subscribe: { allow: %s }\n", list(p.Subscribe))
		if p.Responses {
			fmt.Fprintf(&b, "          allow_responses: { max: -1, expires: %q }\n", ResponseExpiry.String())
		}
		b.WriteString("        }\n      }\n")
	}
	// Password and NKey users share the one users list.
	b.WriteString("    users: [\n")
	for _, l := range logins {
		write(l)
	}
	b.WriteString("    ]\n")
	b.WriteString("  }\n")
	b.WriteString("}\n")
	return b.Bytes()
}

func describe(u User) string {
	if u.Role == RoleTenant {
		return "tenant " + u.Name + ", scopes " + strings.Join(u.Scopes, ",")
	}
	return u.Role + " " + u.Name
}

func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
