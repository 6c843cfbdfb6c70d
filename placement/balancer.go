package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Balancer defaults.
const (
	// QueueGroupDefault is the queue group balancer replicas share, so each
	// question is answered once however many replicas run.
	QueueGroupDefault = "switchyard-balancer"
	// RetryMinDefault is the first wait before re-subscribing after an error.
	RetryMinDefault = 100 * time.Millisecond
	// RetryMaxDefault caps the wait between re-subscribe attempts (the seed's 3s).
	RetryMaxDefault = 3 * time.Second
)

// BalancerConfig configures a Balancer.
type BalancerConfig struct {
	// Conn is the NATS connection to serve on. Required.
	Conn *nats.Conn
	// IDs are the persist server ids, in the order every party agrees on. Required.
	IDs []string
	// Placement picks the owner. Nil means Rendezvous.
	Placement Func
	// Service is the first subject token. Zero means bus.DefaultService ("persist").
	Service string
	// QueueGroup is shared by replicas. Zero means QueueGroupDefault.
	QueueGroup string
	// RetryMin and RetryMax bound the backoff between re-subscribe attempts.
	// Zero means RetryMinDefault and RetryMaxDefault.
	RetryMin, RetryMax time.Duration
	// Logger receives errors, with role=balancer. Nil means slog.Default().
	Logger *slog.Logger
}

func (c BalancerConfig) withDefaults() BalancerConfig {
	if c.Placement == nil {
		c.Placement = Rendezvous
	}
	if c.Service == "" {
		c.Service = bus.DefaultService
	}
	if c.QueueGroup == "" {
		c.QueueGroup = QueueGroupDefault
	}
	if c.RetryMin == 0 {
		c.RetryMin = RetryMinDefault
	}
	if c.RetryMax == 0 {
		c.RetryMax = RetryMaxDefault
	}
	c.Logger = lifecycle.Logger(c.Logger, "balancer")
	return c
}

func (c BalancerConfig) validate() error {
	if c.Conn == nil {
		return errors.New("balancer: no NATS connection")
	}
	if err := bus.ValidIDs(c.IDs); err != nil {
		return fmt.Errorf("balancer: %w", err)
	}
	if err := bus.ValidService(c.Service); err != nil {
		return fmt.Errorf("balancer: service: %w", err)
	}
	return nil
}

// Balancer answers "{service}.{scope}.id" with the id of the server that owns
// scope. It keeps no memory per scope and uses only the second subject token.
// After any subscription error it re-subscribes with a capped backoff.
//
// Each answer also states the rule (bus.HdrPlacement, bus.HdrIDs) when it
// is a named one, so a client that has asked once can place every other
// scope itself instead of asking per scope (persist.Client does). The body
// stays the owner alone: `nats req persist.hub.id ”` prints it as before.
type Balancer struct {
	cfg  BalancerConfig
	life lifecycle.Base
	rule nats.Header // the headers of every answer; nil for an unnamed rule

	mu      sync.Mutex // protects done, sub and the counts
	done    chan struct{}
	sub     *nats.Subscription
	answers uint64
	resubs  uint64
	refused uint64
}

// NewBalancer validates cfg and returns a stopped balancer.
func NewBalancer(cfg BalancerConfig) (*Balancer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.IDs = append([]string(nil), cfg.IDs...)
	b := &Balancer{cfg: cfg}
	if name := NameOf(cfg.Placement); name != "" {
		b.rule = nats.Header{bus.HdrPlacement: {name}, bus.HdrIDs: {strings.Join(cfg.IDs, ",")}}
	}
	return b, nil
}

// Owner returns the id that owns scope under this balancer's placement.
func (b *Balancer) Owner(scope string) string { return b.cfg.Placement(b.cfg.IDs, scope) }

// Start subscribes and serves until Stop. The first subscription is made
// before Start returns, so a request sent after Start is answered. The
// lifecycle is lifecycle.Base's: Start twice is an error, Stop before Start
// or twice is safe, a stopped balancer does not start again.
func (b *Balancer) Start(ctx context.Context) error {
	return b.life.Start(ctx, "balancer", func(ctx context.Context) error {
		// Start returns once the balancer serves: the NATS server must have
		// the subscription, or a lookup right after gets no responders, and
		// must not have refused it, or no lookup is ever answered.
		run := b.life.Run()
		sub, guard, err := b.subscribe(run, ctx)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.done, b.sub = make(chan struct{}), sub
		done := b.done
		b.mu.Unlock()
		go b.run(run, sub, guard, done)
		return nil
	})
}

// Stop ends serving and waits, until ctx ends, for the loop to exit.
func (b *Balancer) Stop(ctx context.Context) error {
	return b.life.Stop(ctx, func(ctx context.Context) error {
		b.mu.Lock()
		done := b.done
		b.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("balancer stop: %w", ctx.Err())
		}
	})
}

// Stats reports answers given and re-subscriptions made since Start.
func (b *Balancer) Stats() (answers, resubscribes uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answers, b.resubs
}

// ReplyRefused reports the questions left unanswered since Start because
// their reply subject was missing or not an inbox (bus.IsInbox).
func (b *Balancer) ReplyRefused() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused
}

// subscribe subscribes and waits, until ctx ends, for the NATS server to
// have the subscription: its refusal is an error matching bus.ErrForbidden.
// The guard's context, derived from run, ends should the server refuse the
// subscription later (after a reconnect); serve waits under it.
func (b *Balancer) subscribe(run, ctx context.Context) (*nats.Subscription, *bus.SubscriptionGuard, error) {
	subject := b.cfg.Service + ".*.id"
	guard := bus.GuardSubscription(run, b.cfg.Conn, subject, b.cfg.QueueGroup)
	sub, err := b.cfg.Conn.QueueSubscribeSync(subject, b.cfg.QueueGroup)
	if err != nil {
		guard.Release()
		return nil, nil, fmt.Errorf("balancer: subscribe %s: %w", subject, err)
	}
	// Generous pending limits: answers are tiny and cheap, a burst should queue.
	_ = sub.SetPendingLimits(1<<20, 64<<20)
	if err := guard.Confirm(ctx); err != nil {
		_ = sub.Unsubscribe()
		guard.Release()
		return nil, nil, fmt.Errorf("balancer: subscribe %s: %w", subject, err)
	}
	return sub, guard, nil
}

// run serves one subscription at a time; any error other than shutdown,
// a refusal by the NATS server's permissions included, drops it and
// subscribes again after a backoff. A re-subscription the server refuses
// is a failed attempt like any other.
func (b *Balancer) run(ctx context.Context, sub *nats.Subscription, guard *bus.SubscriptionGuard, done chan struct{}) {
	defer close(done)
	retry := bus.Retry{Min: b.cfg.RetryMin, Max: b.cfg.RetryMax}.Start()
	for {
		err := b.serve(guard.Context(), sub)
		_ = sub.Unsubscribe()
		guard.Release()
		if ctx.Err() != nil {
			return
		}
		b.cfg.Logger.Warn("balancer subscription failed; re-subscribing", "err", err)
		for {
			if retry.Wait(ctx) != nil {
				return
			}
			var serr error
			sub, guard, serr = b.resubscribe(ctx)
			if serr == nil {
				// Serving again: the next failure starts from RetryMin.
				retry.Reset()
				break
			}
			b.cfg.Logger.Warn("balancer re-subscribe failed", "err", serr, "failures", retry.Failures())
		}
		b.mu.Lock()
		b.sub = sub
		b.resubs++
		b.mu.Unlock()
	}
}

// resubscribe is subscribe from run, each attempt bounded as Start's is
// by default.
func (b *Balancer) resubscribe(ctx context.Context) (*nats.Subscription, *bus.SubscriptionGuard, error) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return b.subscribe(ctx, actx)
}

// serve answers sub's questions until ctx, the subscription's guarded
// context, ends: with a *bus.PermissionError when the NATS server refused
// the subscription.
func (b *Balancer) serve(ctx context.Context, sub *nats.Subscription) error {
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if errors.Is(err, nats.ErrSlowConsumer) {
			// Questions came faster than they were answered and nats.go
			// dropped some (their askers time out and ask again); the
			// subscription itself is fine. Dropping it would throw away
			// every question still queued and answer none until the
			// re-subscription: a flood would keep the balancer deaf.
			b.cfg.Logger.Debug("balancer: questions dropped (slow consumer)", "err", err)
			continue
		}
		if err != nil {
			if pe := bus.Refused(ctx); pe != nil {
				return fmt.Errorf("balancer: subscription: %w", pe)
			}
			return err
		}
		// The requester picks the reply subject and allow_responses lets
		// the balancer publish there whatever its permissions: answer only
		// an inbox, never $JS.API.…, a feed or an API subject, where this
		// trusted role's publish would be one the requester aimed.
		if !bus.IsInbox(msg.Reply) {
			b.mu.Lock()
			b.refused++
			b.mu.Unlock()
			b.cfg.Logger.Debug("balancer: question whose reply subject is not an inbox dropped", "subject", msg.Subject, "reply", msg.Reply)
			continue
		}
		b.mu.Lock()
		b.answers++
		b.mu.Unlock()
		scope := bus.SubjectToken(msg.Subject, 1)
		if !bus.ValidScope(scope) {
			// No owner to name: a placement of any token would give one,
			// which a client would then ask for a scope no server serves.
			// The refusal is in the persist wire's error form, so a client
			// decodes it as it decodes a server's.
			out := &nats.Msg{Subject: msg.Reply, Header: nats.Header{bus.HdrError: []string{bus.CodeBadRequest}},
				Data: []byte(fmt.Sprintf("invalid scope %s: want [a-z0-9][a-z0-9_-]{0,127}", quoteScope(scope)))}
			if err := msg.RespondMsg(out); err != nil {
				b.cfg.Logger.Debug("balancer respond", "err", err)
			}
			continue
		}
		// The rule's headers are shared by every answer: nats.go only
		// reads a message's header when it publishes it.
		out := &nats.Msg{Subject: msg.Reply, Header: b.rule, Data: []byte(b.Owner(scope))}
		if err := msg.RespondMsg(out); err != nil {
			b.cfg.Logger.Debug("balancer respond", "err", err)
		}
	}
}

// currentSub is the live subscription (tests use it to force an error).
func (b *Balancer) currentSub() *nats.Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sub
}

// scopeQuoteMax is the most of an invalid scope a refusal quotes: a valid
// scope's length. Quoted, each byte at most 4 ("\xff"), it keeps the
// message within an error's 1,024 bytes (docs/wire.md) whatever the token.
const scopeQuoteMax = 128

// quoteScope is scope quoted for a refusal, cut to scopeQuoteMax bytes
// and marked as cut with its length.
func quoteScope(scope string) string {
	if len(scope) <= scopeQuoteMax {
		return fmt.Sprintf("%q", scope)
	}
	return fmt.Sprintf("%q… (%d bytes)", scope[:scopeQuoteMax], len(scope))
}
