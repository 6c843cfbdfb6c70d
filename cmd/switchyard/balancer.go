package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/placement"
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
			bus, err := natsOpts.fleetNATS()
			if err != nil {
				return err
			}
			cfg := fleet.Config{
				Service:  natsOpts.service,
				NATS:     bus,
				Persist:  fleet.PersistConfig{IDs: ids, Placement: fn},
				Balancer: true,
				HTTP:     httpOpts.fleetHTTP(),
			}
			err = runFleet(cmd, cfg, func(f *fleet.Fleet) {
				slog.Info("balancer running", "nats", shownBusURL(f), "subject", natsOpts.service+".*.id", "ids", ids, "placement", placementName)
			}, "")
			if err == nil {
				slog.Info("balancer stopped")
			}
			return err
		},
	}
	natsOpts.registerServer(cmd)
	cmd.Flags().StringVar(&idsFlag, "ids", "0,1", "comma-separated persist server ids, in the order every party agrees on")
	httpOpts.register(cmd, "")
	cmd.Flags().StringVar(&placementName, "placement", placement.NameRendezvous, "placement function: rendezvous (default; adding a server moves ~1/n of scopes) or modulo (compatible with the original rule)")
	return cmd
}
