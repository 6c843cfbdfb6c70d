package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

// usersDataDefault is usenet serve's --data default: the users commands
// find the store where the API keeps it.
const usersDataDefault = "switchyard-usenet"

// usersFlags are the flags every users command has.
type usersFlags struct {
	dir string
}

func (f *usersFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "data", usersDataDefault, "the API's data `DIR` (usenet serve's --data; for up, DATA/_usenet-api)")
}

// path is the users store's file in --data.
func (f *usersFlags) path() string { return filepath.Join(f.dir, users.File) }

// open opens the users store in --data; create says a missing store is
// made (add, registration), else it is an error naming the directory, so
// that a wrong --data is not taken for a store without users. A store made
// in a directory no API has used (no admin key file) is one no API reads
// yet: most often --data was left at usenet serve's default while the API
// is up's, so a note on stderr says where up's is.
func (f *usersFlags) open(stderr io.Writer, create bool) (*users.Store, error) {
	path := f.path()
	_, statErr := os.Stat(path)
	missing := errors.Is(statErr, fs.ErrNotExist)
	if create {
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return nil, fmt.Errorf("users: %w", err)
		}
	} else if missing {
		return nil, fmt.Errorf("no users store %s: check --data (usenet serve's --data, or up's DATA/_usenet-api)", path)
	}
	s, err := users.Open(path, users.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(f.dir, newznab.KeyFile)); missing && errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "note: made a new users store %s in a directory no API has used yet (no %s there); up's API reads DATA/%s (--data %s for up's default data), usenet serve's its --data\n",
			path, newznab.KeyFile, upAPIDir, upDataDefault+"/"+upAPIDir)
	}
	return s, nil
}

// with runs fn on the store in --data (see open), closed after it.
func (f *usersFlags) with(cmd *cobra.Command, create bool, fn func(ctx context.Context, s *users.Store) error) error {
	s, err := f.open(cmd.ErrOrStderr(), create)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(cmd.Context(), s)
}

// limitFlags are --requests-per-day and --grabs-per-day.
type limitFlags struct {
	requests, grabs int
}

func (f *limitFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().IntVar(&f.requests, "requests-per-day", 0, "`N` API requests a day "+what+" (searches, details; 0 = unlimited)")
	cmd.Flags().IntVar(&f.grabs, "grabs-per-day", 0, "`N` NZB downloads (t=get) a day "+what+" (0 = unlimited)")
}

func (f *limitFlags) validate() error {
	if f.requests < 0 {
		return usagef("--requests-per-day %d: want 0 (unlimited) or more", f.requests)
	}
	if f.grabs < 0 {
		return usagef("--grabs-per-day %d: want 0 (unlimited) or more", f.grabs)
	}
	return nil
}

func (f *limitFlags) limits() users.Limits {
	return users.Limits{RequestsPerDay: f.requests, GrabsPerDay: f.grabs}
}

// userNameArg is the Args of the commands on one user: one NAME, valid,
// checked before anything is opened.
func userNameArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usagef("want one user NAME, got %d arguments", len(args))
	}
	if err := users.ValidName(args[0]); err != nil {
		return usageError{err}
	}
	return nil
}

// newUsenetUsersCmd builds switchyard usenet users.
func newUsenetUsersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage the Newznab API's users: their keys and daily request and grab limits",
		Long: `Manages the accounts of the Newznab API (/api of usenet serve and up), kept in
DIR/users.db beside the admin key (DIR/apikey). Each user has its own API key and
daily limits: --requests-per-day counts searches and details, --grabs-per-day
NZB downloads (t=get); 0 is unlimited. Past a limit the API answers error 500
"Request limit reached" or 501 "Download limit reached" until midnight UTC, when
the counts start again. The admin key has no limits.

A key is printed once, by add and reset, alone on stdout (KEY=$(switchyard usenet
users add NAME)); the store keeps only its SHA-256, so a lost key is replaced with
reset, never shown again. The commands work while the API runs: a change applies
to the next request.

--data is the API's data directory: usenet serve's --data (default
switchyard-usenet), or DATA/_usenet-api for 'switchyard up --data DATA'. See
docs/usenet-api.md#users-and-limits.`,
		Example: `  switchyard usenet users add alice --requests-per-day 1000 --grabs-per-day 100
  switchyard usenet users list --data ./switchyard-data/_usenet-api
  switchyard usenet users limits alice --grabs-per-day 0
  switchyard usenet users reset alice
  switchyard usenet users registration open --requests-per-day 500 --grabs-per-day 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newUsersAddCmd(), newUsersListCmd(), newUsersLimitsCmd(), newUsersResetCmd(), newUsersRemoveCmd(), newUsersRegistrationCmd())
	return cmd
}

func newUsersAddCmd() *cobra.Command {
	var uf usersFlags
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user and print its API key (once)",
		Long: `Adds user NAME (letters, digits and . _ - + @) with the given daily limits and
prints its new API key alone on stdout. The key is not stored, only its hash:
copy it now into the user's Sonarr, Radarr, Prowlarr or NZBGet.`,
		Example: `  switchyard usenet users add alice --requests-per-day 1000 --grabs-per-day 100`,
		Args:    userNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.validate(); err != nil {
				return err
			}
			return uf.with(cmd, true, func(ctx context.Context, s *users.Store) error {
				key, err := s.Add(ctx, args[0], lf.limits())
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout(cmd), key)
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s added to %s (requests/day %s, grabs/day %s); its key is shown only now\n", args[0], uf.path(), limitText(lf.requests), limitText(lf.grabs))
				return nil
			})
		},
	}
	uf.register(cmd)
	lf.register(cmd, "the user may make")
	return cmd
}

func newUsersListCmd() *cobra.Command {
	var uf usersFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the users, their limits and what they used today (never keys)",
		Long: `Lists every user: name, daily limits and today's requests and grabs (since
midnight UTC), and who made the account (an operator, or t=register). Keys are
never shown: the store does not have them.`,
		Example: `  switchyard usenet users list
  switchyard usenet users list --data ./switchyard-data/_usenet-api   # up's`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return uf.with(cmd, false, func(ctx context.Context, s *users.Store) error {
				list, err := s.List(ctx)
				if err != nil {
					return err
				}
				printUsers(stdout(cmd), list)
				return nil
			})
		},
	}
	uf.register(cmd)
	return cmd
}

// limitText is a limit as the commands print it.
func limitText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func printUsers(w io.Writer, list []users.User) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no users (add one with: switchyard usenet users add NAME)")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tREQUESTS/DAY\tGRABS/DAY\tREQUESTS TODAY\tGRABS TODAY\tCREATED\tBY")
	for _, u := range list {
		by := "operator"
		if u.Registered {
			by = "t=register"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", u.Name, limitText(u.RequestsPerDay), limitText(u.GrabsPerDay),
			u.RequestsToday, u.GrabsToday, u.Created.Format("2006-01-02 15:04Z"), by)
	}
	_ = tw.Flush()
}

func newUsersLimitsCmd() *cobra.Command {
	var uf usersFlags
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "limits NAME",
		Short: "Change a user's daily limits",
		Long: `Sets the daily limits of user NAME that are given; the other is kept. 0 is
unlimited. What the user used today still counts against the new limit.`,
		Example: `  switchyard usenet users limits alice --requests-per-day 2000
  switchyard usenet users limits alice --grabs-per-day 0`,
		Args: userNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.validate(); err != nil {
				return err
			}
			var req, grabs *int
			if cmd.Flags().Changed("requests-per-day") {
				req = &lf.requests
			}
			if cmd.Flags().Changed("grabs-per-day") {
				grabs = &lf.grabs
			}
			if req == nil && grabs == nil {
				return usagef("limits %s: give --requests-per-day, --grabs-per-day or both", args[0])
			}
			return uf.with(cmd, false, func(ctx context.Context, s *users.Store) error {
				if err := s.SetLimits(ctx, args[0], req, grabs); err != nil {
					return err
				}
				u, err := s.User(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout(cmd), "user %s: requests/day %s, grabs/day %s\n", u.Name, limitText(u.RequestsPerDay), limitText(u.GrabsPerDay))
				return nil
			})
		},
	}
	uf.register(cmd)
	lf.register(cmd, "the user may make")
	return cmd
}

func newUsersResetCmd() *cobra.Command {
	var uf usersFlags
	cmd := &cobra.Command{
		Use:   "reset NAME",
		Short: "Give a user a new API key (printed once); the old one stops working",
		Long: `Replaces the API key of user NAME and prints the new one alone on stdout. The
old key is refused from the next request on (error 100). Today's counts are kept.`,
		Example: `  switchyard usenet users reset alice`,
		Args:    userNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return uf.with(cmd, false, func(ctx context.Context, s *users.Store) error {
				key, err := s.Reset(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout(cmd), key)
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s has a new key, shown only now; the old one no longer works\n", args[0])
				return nil
			})
		},
	}
	uf.register(cmd)
	return cmd
}

func newUsersRemoveCmd() *cobra.Command {
	var uf usersFlags
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Short:   "Remove a user; its key stops working",
		Example: `  switchyard usenet users remove alice`,
		Args:    userNameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return uf.with(cmd, false, func(ctx context.Context, s *users.Store) error {
				if err := s.Remove(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(stdout(cmd), "user %s removed\n", args[0])
				return nil
			})
		},
	}
	uf.register(cmd)
	return cmd
}

func newUsersRegistrationCmd() *cobra.Command {
	var uf usersFlags
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "registration [open|closed]",
		Short: "Open or close t=register (closed by default); without an argument, show it",
		Long: `Opens or closes the API's t=register, with which anyone who can reach the API
creates an account by e-mail address (t=register&email=ADDRESS) and gets its key
in the answer. It is closed by default (error 104 "Registrations are closed").
While open, new accounts get --requests-per-day and --grabs-per-day (0 =
unlimited), and at most ` + strconv.Itoa(users.RegistrationsPerDayDefault) + ` accounts are registered a day (then error 103 until
midnight UTC). The address is not mailed: it only names the account.`,
		Example: `  switchyard usenet users registration open --requests-per-day 500 --grabs-per-day 50
  switchyard usenet users registration closed
  switchyard usenet users registration`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.validate(); err != nil {
				return err
			}
			limits := cmd.Flags().Changed("requests-per-day") || cmd.Flags().Changed("grabs-per-day")
			var set *users.Registration
			switch {
			case len(args) == 0:
				if limits {
					return usagef("registration without open or closed shows the setting: the limits are for registration open")
				}
			case args[0] == "open":
				set = &users.Registration{Open: true, Limits: lf.limits()}
			case args[0] == "closed":
				if limits {
					return usagef("registration closed: the limits are for registration open")
				}
				set = &users.Registration{}
			default:
				return usagef("registration %q: want open or closed", args[0])
			}
			return uf.with(cmd, set != nil, func(ctx context.Context, s *users.Store) error {
				if set != nil {
					if err := s.SetRegistration(ctx, *set); err != nil {
						return err
					}
				}
				r, err := s.Registration(ctx)
				if err != nil {
					return err
				}
				if !r.Open {
					fmt.Fprintln(stdout(cmd), "registration closed")
					return nil
				}
				fmt.Fprintf(stdout(cmd), "registration open: new accounts get requests/day %s, grabs/day %s\n", limitText(r.RequestsPerDay), limitText(r.GrabsPerDay))
				return nil
			})
		},
	}
	uf.register(cmd)
	lf.register(cmd, "a registered account may make")
	return cmd
}
