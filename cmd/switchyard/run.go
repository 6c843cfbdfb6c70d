package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/fleet"
)

// runFleet is the life of every long-running command (up and the role
// commands): start the roles of cfg, announce them, wait for the command's
// context to end (SIGTERM or Ctrl-C), log stopping (if not ""), then stop
// the roles in reverse order under fleet.StopTimeoutDefault. A stop cut
// short by its deadline, or a role that fails to stop, is an error (exit
// 1): requests in flight may have been answered unavailable.
func runFleet(cmd *cobra.Command, cfg fleet.Config, announce func(*fleet.Fleet), stopping string, attrs ...any) error {
	f, err := fleet.Start(cmd.Context(), cfg)
	if ue := (*fleet.UnreachableError)(nil); errors.As(err, &ue) {
		return unreachable(ue.URL, ue.Err)
	}
	if err != nil {
		return err
	}
	announce(f)
	<-cmd.Context().Done()
	if stopping != "" {
		slog.Info(stopping, attrs...)
	}
	return f.Stop(context.WithoutCancel(cmd.Context()))
}
