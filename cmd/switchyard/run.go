package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/fleet"
)

// runFleet is the life of every long-running command (up and the role
// commands): start the roles of cfg, announce them, wait for the command's
// context to end (SIGTERM or Ctrl-C), log stopping (if not ""), then stop
// the roles in reverse order under fleet.StopTimeoutDefault. A stop cut
// short by its deadline, or a role that fails to stop, is an error (exit
// 1): requests in flight may have been answered unavailable. A role that
// ends on its own (fleet.Fleet.Done) stops the others as a signal would,
// and is an error (exit 1): a supervisor then restarts the process rather
// than leave it running without that role. A signal while the roles are
// still starting is a stop too (exit 0), not a failed start: fleet.Start
// has stopped what it started — unless that stop failed, which is exit 1
// as after a start.
func runFleet(cmd *cobra.Command, cfg fleet.Config, announce func(*fleet.Fleet), stopping string, attrs ...any) error {
	f, err := fleet.Start(cmd.Context(), cfg)
	if err != nil && cmd.Context().Err() != nil {
		// The context ends only on a signal, so Start failed because the
		// signal cut a step short ("context canceled"): the command was
		// asked to stop, as it may be once started. Any other failure
		// comes with the context still live and stays exit 1.
		slog.Info("stopped while starting", append([]any{"err", err}, attrs...)...)
		if ce := (*fleet.CleanupError)(nil); errors.As(err, &ce) {
			return ce
		}
		return nil
	}
	if ue := (*fleet.UnreachableError)(nil); errors.As(err, &ue) {
		return unreachable(ue.URL, ue.Err)
	}
	if me := (*auth.ModeError)(nil); errors.As(err, &me) {
		// A creds file of --auth DIR (up, events serve): the commands
		// that take one have --insecure-creds, as for --creds.
		return fmt.Errorf("%w (or --insecure-creds to use it anyway)", err)
	}
	if err != nil {
		return err
	}
	announce(f)
	select {
	case <-cmd.Context().Done():
		if stopping != "" {
			slog.Info(stopping, attrs...)
		}
		return f.Stop(context.WithoutCancel(cmd.Context()))
	case <-f.Done():
		// The fleet logged the role's end under its name; the error
		// returned says it again, last.
		slog.Info("stopping the other roles", attrs...)
		return errors.Join(f.Err(), f.Stop(context.WithoutCancel(cmd.Context())))
	}
}
