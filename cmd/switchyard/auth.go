package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
)

// newAuthCmd builds switchyard auth and its subcommands.
func newAuthCmd() *cobra.Command {
	a := &cobra.Command{
		Use:   "auth",
		Short: "Make NATS users and permissions for every role (see docs/security.md)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	a.AddCommand(newAuthInitCmd())
	return a
}

func newAuthInitCmd() *cobra.Command {
	var idsFlag, service string
	var tenants []string
	var nkey bool
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Write a creds file per role and a nats-server.conf with the same users and permissions",
		Long: `Creates DIR (mode 0700) and writes, each readable by its owner only:
  server-ID.creds   one per --ids: subscribes {service}.*.api.ID, publishes feeds, answers requests
  balancer.creds    answers {service}.*.id
  client.creds      requests any scope, watches any feed; publishes no feed, answers nothing
  NAME.creds        one per --tenant NAME=SCOPE,...: requests and watches only those scopes
  nats-server.conf  the same users and permissions, for an external NATS server or cluster,
                    in an account of their own (` + auth.Account + `) with JetStream disabled
Every user gets a fresh random password (or NKey with --nkey) and its own
reply inbox. Run the embedded bus with them: switchyard up --auth DIR.
Give each role its file: --creds DIR/client.creds (or $` + auth.EnvCreds + `).
It refuses to overwrite an existing DIR/nats-server.conf.`,
		Example: `  switchyard auth init ./sy-auth --tenant acme=account-acme,project-web --tenant bob=account-bob
  switchyard up --auth ./sy-auth --host 0.0.0.0 --tls-cert cert.pem --tls-key key.pem
  switchyard kv get account-acme prefs theme --creds ./sy-auth/acme.creds --tls-ca ca.pem`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(idsFlag)
			if err != nil {
				return err
			}
			plan := auth.Plan{Service: service, IDs: ids, Tenants: map[string][]string{}}
			for _, t := range tenants {
				name, scopes, ok := strings.Cut(t, "=")
				if !ok || scopes == "" {
					return usagef("--tenant %q: want NAME=SCOPE[,SCOPE...]", t)
				}
				if _, dup := plan.Tenants[name]; dup {
					return usagef("--tenant %q given twice", name)
				}
				plan.Tenants[name] = strings.Split(scopes, ",")
			}
			if _, err := plan.Users(); err != nil {
				return usagef("%v", err)
			}
			users, err := auth.Init(args[0], plan, nkey)
			if err != nil {
				return fmt.Errorf("auth init: %w", err)
			}
			w := stdout(cmd)
			for _, u := range users {
				fmt.Fprintf(w, "%-22s %s\n", auth.CredsFile(args[0], u.Name), u.Role)
			}
			fmt.Fprintf(w, "%-22s nats-server configuration\n", args[0]+"/"+auth.ConfFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&idsFlag, "ids", "0,1", "persist server ids, one user each (switchyard up --servers N uses 0..N-1)")
	cmd.Flags().StringVar(&service, "service", bus.DefaultService, "first subject token of the persist service")
	cmd.Flags().StringArrayVar(&tenants, "tenant", nil, "a tenant user confined to scopes; `SPEC` is NAME=SCOPE[,SCOPE...] (repeatable)")
	cmd.Flags().BoolVar(&nkey, "nkey", false, "make NKey users (a seed in each creds file) instead of passwords")
	return cmd
}
