package main

import "github.com/spf13/cobra"

// newUsenetCmd builds switchyard usenet, the commands of the usenet indexer:
// parse, releases, nzb, serve (the Newznab API of a fleet) and users (its
// accounts).
func newUsenetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usenet",
		Short: "The usenet indexer: parse subjects, list releases, write NZB files, serve the Newznab API and manage its users",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newUsenetParseCmd(), newUsenetReleasesCmd(), newUsenetNZBCmd(), newUsenetPostprocessCmd(), newUsenetServeCmd(), newUsenetUsersCmd())
	return cmd
}
