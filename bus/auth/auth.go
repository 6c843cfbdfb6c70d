// Package auth holds switchyard's bus credentials: the roles and their NATS
// subject permissions, the creds file every command reads (--creds), and the
// nats-server configuration that grants the same permissions, so an embedded
// bus (switchyard up --auth) and an external cluster enforce the same rules.
//
// Security comes from the NATS server: a user can only publish and subscribe
// where its permissions allow, and switchyard's servers re-check that a
// request's path belongs to its scope.
package auth

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
)

// Role names. A tenant user has RoleTenant and a name of its own.
const (
	RoleServer   = "server"
	RoleBalancer = "balancer"
	RoleClient   = "client"
	RoleTenant   = "tenant"
)

// ResponseExpiry is how long a server or balancer may keep answering one
// request (a getAll streams many chunks to the same reply subject): NATS
// forgets the right to publish on a reply subject after this.
const ResponseExpiry = 10 * time.Minute

// Permissions are one user's NATS subject permissions. Anything not allowed
// is denied: NATS refuses the publish or subscription and tells the client.
type Permissions struct {
	// Publish lists the subjects the user may publish on (requests, feeds).
	Publish []string
	// Subscribe lists the subjects the user may subscribe to.
	Subscribe []string
	// Responses lets the user publish on the reply subject of a request it
	// received (NATS allow_responses), any number of times within
	// ResponseExpiry, and nowhere else it was not granted in Publish.
	Responses bool
}

// User is one NATS user of a switchyard bus.
type User struct {
	// Name is the user name: "server-ID", "balancer", "client" or the
	// tenant's name.
	Name string
	// Role is one of the Role constants.
	Role string
	// Scopes are the scopes a tenant is confined to; empty for other roles.
	Scopes []string
	// Inbox is the reply-subject prefix the user's connection uses; it may
	// subscribe only below it, so nobody else's replies reach it. Empty for
	// roles that send no requests.
	Inbox string
	// Perms are the user's permissions.
	Perms Permissions
}

// InboxPrefix is the reply-subject prefix of user name. It is distinct per
// user, never the default "_INBOX", so no user can read replies meant for
// another.
func InboxPrefix(name string) string { return "_INBOX_" + name }

// Server is the user of persist server id: it subscribes to its own API
// subjects in every scope, publishes change feeds, and answers requests.
func Server(service, id string) User {
	return User{Name: "server-" + id, Role: RoleServer, Perms: Permissions{
		Publish:   []string{service + ".*.feed.>"},
		Subscribe: []string{bus.APISubject(service, "*", id)},
		Responses: true,
	}}
}

// Balancer is the balancer's user: it answers {service}.*.id and nothing else.
func Balancer(service string) User {
	return User{Name: RoleBalancer, Role: RoleBalancer, Perms: Permissions{
		Subscribe: []string{bus.IDSubject(service, "*")},
		Responses: true,
	}}
}

// Client is the trusted client's user: it may request any scope and watch
// any feed, but publish no feed and answer no request.
func Client(service string) User {
	return User{Name: RoleClient, Role: RoleClient, Inbox: InboxPrefix(RoleClient), Perms: Permissions{
		Publish:   []string{bus.IDSubject(service, "*"), bus.APISubject(service, "*", "*")},
		Subscribe: []string{service + ".*.feed.>", InboxPrefix(RoleClient) + ".>"},
	}}
}

// Tenant is a user confined to scopes: it may request and watch only those
// scopes and read only its own inbox.
func Tenant(service, name string, scopes []string) User {
	u := User{Name: name, Role: RoleTenant, Scopes: slices.Clone(scopes), Inbox: InboxPrefix(name)}
	for _, s := range scopes {
		u.Perms.Publish = append(u.Perms.Publish, bus.IDSubject(service, s), bus.APISubject(service, s, "*"))
		u.Perms.Subscribe = append(u.Perms.Subscribe, bus.ScopeSubject(service, s, "feed", ">"))
	}
	u.Perms.Subscribe = append(u.Perms.Subscribe, u.Inbox+".>")
	return u
}

// Plan is the set of users `switchyard auth init` writes.
type Plan struct {
	// Service is the first subject token. Zero means bus.DefaultService.
	Service string
	// IDs are the persist server ids; each gets its own user. Required.
	IDs []string
	// Tenants maps a tenant name to its scopes.
	Tenants map[string][]string
}

// Users returns every user of the plan: the servers, the balancer, the
// client and the tenants (sorted by name), after checking names and scopes.
func (p Plan) Users() ([]User, error) {
	if p.Service == "" {
		p.Service = bus.DefaultService
	}
	if err := bus.ValidService(p.Service); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if err := bus.ValidIDs(p.IDs); err != nil {
		return nil, err
	}
	users := []User{}
	for _, id := range p.IDs {
		users = append(users, Server(p.Service, id))
	}
	users = append(users, Balancer(p.Service), Client(p.Service))
	names := make([]string, 0, len(p.Tenants))
	for n := range p.Tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := ValidTenant(n); err != nil {
			return nil, err
		}
		scopes := p.Tenants[n]
		if len(scopes) == 0 {
			return nil, fmt.Errorf("tenant %q has no scopes", n)
		}
		for _, s := range scopes {
			if !bus.ValidScope(s) {
				return nil, fmt.Errorf("tenant %q: invalid scope %q: want [a-z0-9][a-z0-9_-]{0,127}", n, s)
			}
		}
		users = append(users, Tenant(p.Service, n, scopes))
	}
	return users, nil
}

// ValidTenant reports why name cannot be a tenant's user name, or nil: it
// must look like a scope (it becomes a subject token of the tenant's inbox)
// and not be a role's user name.
func ValidTenant(name string) error {
	if !bus.ValidScope(name) {
		return fmt.Errorf("tenant name %q: want [a-z0-9][a-z0-9_-]{0,127}", name)
	}
	if name == RoleBalancer || name == RoleClient || strings.HasPrefix(name, RoleServer+"-") {
		return fmt.Errorf("tenant name %q is taken by a role", name)
	}
	return nil
}
