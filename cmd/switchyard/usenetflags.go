package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/work"
)

// usenetFlags are the flags of the commands that read or write the usenet
// records: where they live, and when an incomplete release shows.
type usenetFlags struct {
	scope      string
	settle     time.Duration
	completion float64
}

func (f *usenetFlags) registerScope(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.scope, "usenet-scope", usenet.DefaultScope, "the persist `SCOPE` of the usenet binaries and releases")
}

func (f *usenetFlags) registerSettle(cmd *cobra.Command) {
	f.registerScope(cmd)
	cmd.Flags().DurationVar(&f.settle, "settle", 2*time.Hour, "an incomplete release shows once unchanged for this `DURATION`...")
	cmd.Flags().Float64Var(&f.completion, "settle-completion", 0.95, "...if at least this `FRACTION` of its parts is present (complete ones show at once)")
}

func (f *usenetFlags) store(c *persist.Client) (*usenet.Store, error) {
	st, err := usenet.NewStore(c, f.scope)
	if err != nil {
		return nil, usagef("--usenet-scope: %v", err)
	}
	return st, nil
}

func (f *usenetFlags) settleConfig() (usenet.SettleConfig, error) {
	cfg := usenet.SettleConfig{Window: f.settle, MinCompletion: f.completion}
	if f.settle <= 0 {
		return cfg, usagef("--settle %v: want a positive duration", f.settle)
	}
	if f.completion <= 0 || f.completion > 1 {
		return cfg, usagef("--settle-completion %v: want a fraction in (0, 1]", f.completion)
	}
	return cfg, nil
}

// validateIndexer checks the flags of indexer name before anything
// connects.
func (f *usenetFlags) validateIndexer(name string) error {
	switch name {
	case "usenet":
		if _, err := f.settleConfig(); err != nil {
			return err
		}
		if err := usenet.ValidScope(f.scope); err != nil {
			return usagef("--usenet-scope: %v", err)
		}
		return nil
	case "count":
		return nil
	default:
		return usagef("--indexer %q: want usenet or count", name)
	}
}

// indexerFor builds the worker's indexer by name; the usenet one also needs
// its settle sweep run beside the worker (nil for the others).
func (f *usenetFlags) indexerFor(name string, c *persist.Client) (work.Indexer, *usenet.Settler, error) {
	switch name {
	case "usenet":
		cfg, err := f.settleConfig()
		if err != nil {
			return nil, nil, err
		}
		st, err := f.store(c)
		if err != nil {
			return nil, nil, err
		}
		return &usenet.Indexer{Store: st}, usenet.NewSettler(st, cfg, nil), nil
	case "count":
		return work.CountingIndexer{}, nil, nil
	default:
		return nil, nil, usagef("--indexer %q: want usenet or count", name)
	}
}

// lifecycles starts its members in order and stops them in reverse.
type lifecycles []lifecycle

func (ls lifecycles) Start(ctx context.Context) error {
	for i, l := range ls {
		if err := l.Start(ctx); err != nil {
			_ = lifecycles(ls[:i]).Stop(context.WithoutCancel(ctx))
			return err
		}
	}
	return nil
}

func (ls lifecycles) Stop(ctx context.Context) error {
	var errs []error
	for i := len(ls) - 1; i >= 0; i-- {
		errs = append(errs, ls[i].Stop(ctx))
	}
	return errors.Join(errs...)
}

// startStop is a lifecycle of two funcs.
type startStop struct{ start, stop func(context.Context) error }

func (s startStop) Start(ctx context.Context) error { return s.start(ctx) }
func (s startStop) Stop(ctx context.Context) error  { return s.stop(ctx) }
