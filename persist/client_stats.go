package persist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
