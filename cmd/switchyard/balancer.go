package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/web/metrics"
)

// newBalancerCmd builds switchyard balancer.
func newBalancerCmd() *cobra.Command {
	var natsOpts natsFlags
	var idsFlag, placementName string
	var httpOpts httpFlags
	cmd := &cobra.Command{
		Use:   "balancer",
		Short: "Answer {service}.{scope}.id with the id of the persist server that owns the scope",
		Long: `Runs the balancer alone (switchyard up runs one too). Replicas share a queue
group, so each question is answered once. Every party must use the same --ids,
in the same order, and the same --placement.

Try it with the plain NATS client:  nats req persist.hub.id ''`,
		Example: `  switchyard balancer --ids 0,1,2,3 --placement rendezvous --nats nats://10.0.0.5:4222`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(idsFlag)
			if err != nil {
				return err
			}
			fn, err := parsePlacement(placementName)
			if err != nil {
				return err
			}
			if err := httpOpts.validate(false); err != nil {
				return err
			}
			nc, err := natsOpts.connectRole("switchyard-balancer", 0)
			if err != nil {
				return err
			}
			defer nc.Close()
			b, err := placement.NewBalancer(placement.BalancerConfig{Conn: nc, IDs: ids, Placement: fn, Service: natsOpts.service})
			if err != nil {
				return err
			}
			ph := newProcHTTP(httpOpts)
			ph.checkBus("balancer", nc)
			ph.addMetrics(func(r *metrics.Registry) { r.AddBalancer(b) })
			if err := ph.start(cmd.Context()); err != nil {
				return err
			}
			defer stopHTTP(ph)
			if err := b.Start(cmd.Context()); err != nil {
				return err
			}
			ph.rolesStarted()
			slog.Info("balancer running", "nats", nc.ConnectedUrlRedacted(), "subject", natsOpts.service+".*.id", "ids", ids, "placement", placementName)
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.Stop(ctx); err != nil {
				return fmt.Errorf("stop balancer: %w", err)
			}
			slog.Info("balancer stopped")
			return nil
		},
	}
	natsOpts.registerServer(cmd)
	cmd.Flags().StringVar(&idsFlag, "ids", "0,1", "comma-separated persist server ids, in the order every party agrees on")
	httpOpts.register(cmd, "")
	cmd.Flags().StringVar(&placementName, "placement", placement.NameRendezvous, "placement function: rendezvous (default; adding a server moves ~1/n of scopes) or modulo (compatible with the original rule)")
	return cmd
}
