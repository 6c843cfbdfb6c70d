package persist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
)

// ServerStats asks the persist server id for its own figures (CmdStats):
// its streams on disk, open and the cap. It asks that server only, once,
// within the client's Timeout (or ctx's deadline, if sooner): a server
// that is not running answers no responders at once. It needs a user that
// may publish to {service}.*.api.* (the trusted client's); a tenant's is
// refused, an error matching ErrForbidden.
func (c *Client) ServerStats(ctx context.Context, id string) (ServerStats, error) {
	if err := bus.ValidToken(id); err != nil {
		return ServerStats{}, Errorf(CodeBadRequest, "server id: %v", err)
	}
	if c.ctx.Err() != nil {
		return ServerStats{}, ErrClosed
	}
	m := nats.NewMsg(bus.APISubject(c.cfg.Service, ServerScope, id))
	m.Header.Set(HdrCmd, CmdStats)
	actx, cancel := c.attemptContext(ctx)
	defer cancel()
	d, _ := actx.Deadline()
	setDeadline(m, d)
	r, err := bus.Request(actx, c.cfg.Conn, m)
	switch {
	case errors.Is(err, bus.ErrForbidden):
		err = forbidden(err)
	case err == nil:
		err = replyError(r)
	}
	if err != nil {
		return ServerStats{}, fmt.Errorf("stats of persist server %s: %w", id, err)
	}
	var st ServerStats
	if err := json.Unmarshal(r.Data, &st); err != nil {
		return ServerStats{}, fmt.Errorf("stats of persist server %s: %w", id, err)
	}
	return st, nil
}

// ServerIDs returns the ids of the persist servers the fleet places scopes
// over: the client's own Config.IDs when it has them, else the list the
// balancer's answers state (bus.HdrIDs), asked for once here. A balancer
// that states no list is an error, as is one that does not answer.
func (c *Client) ServerIDs(ctx context.Context) ([]string, error) {
	if len(c.cfg.IDs) > 0 {
		return slices.Clone(c.cfg.IDs), nil
	}
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	actx, cancel := c.attemptContext(ctx)
	defer cancel()
	// Any scope does: every answer states the rule, whatever it places.
	reply, err := bus.Request(actx, c.cfg.Conn, nats.NewMsg(bus.IDSubject(c.cfg.Service, serverIDsProbe)))
	if err != nil {
		return nil, fmt.Errorf("ask balancer: %w", err)
	}
	if err := replyError(reply); err != nil {
		return nil, fmt.Errorf("ask balancer: %w", err)
	}
	list := reply.Header.Get(bus.HdrIDs)
	if list == "" {
		return nil, errors.New("ask balancer: its answer lists no server ids (a balancer older than this client)")
	}
	ids := strings.Split(list, ",")
	if err := bus.ValidIDs(ids); err != nil {
		return nil, fmt.Errorf("ask balancer: its server ids %q: %w", list, err)
	}
	return ids, nil
}

// serverIDsProbe is the scope ServerIDs asks the balancer to place.
const serverIDsProbe = "switchyard"
