// Command switchyard is the one binary of the switchyard backbone: every role
// (NATS, balancer, persist servers, forward, NNTP tools, benchmarks) is a
// subcommand, and `switchyard up` runs the embedded set in one process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

// Exit codes, listed in the root help (exitCodesHelp) and the README.
// Not-found has its own code so a script can tell "no such key" from "NATS
// unreachable" without parsing stderr.
const (
	exitRuntime  = 1 // any run-time failure
	exitUsage    = 2 // bad flags, wrong argument count, invalid values
	exitNotFound = 3 // the persist server answered not-found, or no such user
)

// exitCodesHelp ends the root help; TestRootHelpListsExitCodes keeps it in
// step with the constants.
const exitCodesHelp = `Exit codes:
  0  success
  1  run-time error (NATS unreachable, a server refused the request, ...)
  2  usage error (unknown command or flag, wrong arguments, invalid value)
  3  not found (kv get, stream get, usenet nzb, usenet users, events presence,
     events subs, work status --source: no such key, message, release or user,
     a user not connected or without durable subscriptions, an unknown source)
Errors print one line on stderr.`

// usageError marks an error as the caller's mistake in invoking a command.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error; commands return it for bad arguments.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// newRootCmd builds the whole command tree: the root with its log flags,
// every subcommand, flag and argument errors marked as usage errors. Each
// call builds a fresh tree, so tests can run commands in-process.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "switchyard",
		Short: "A backbone for services that run as a fleet",
		Long: `switchyard routes each scope to the persist server that owns it, keeps durable
streams and key-value data per scope, forwards events between regions, and hands
ranges of NNTP articles to workers under fenced leases, all over NATS. It also
has NNTP tools and side-by-side benchmarks.

Run everything embedded in one process with:  switchyard up

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addLogFlags(root)
	root.AddCommand(
		newAuthCmd(),
		newBalancerCmd(),
		newBenchCmd(),
		newCoordinatorCmd(),
		newEventsCmd(),
		newKVCmd(),
		newNNTPCmd(),
		newPersistCmd(),
		newStreamCmd(),
		newUpCmd(),
		newUsenetCmd(),
		newWatchCmd(),
		newWorkCmd(),
		newWorkerCmd(),
	)
	// Flag parse errors are usage errors.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{flagValueError(err)}
	})
	markArgErrors(root)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(root.ErrOrStderr(), err))
}

// exitCode prints err as one line on stderr and maps it to the exit code.
func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "switchyard: "+terminalSafe(oneLine(err)))
	var ue usageError
	switch {
	case errors.As(err, &ue) || isCobraUsage(err):
		return exitUsage
	case errors.Is(err, persist.ErrNotFound), errors.Is(err, usenet.ErrNotFound), errors.Is(err, users.ErrNotFound):
		return exitNotFound
	}
	return exitRuntime
}

// notFound is a not-found answer a command gives itself (exit 3), worded for
// its user: it matches persist.ErrNotFound for exitCode, but its message does
// not end in the wire code (": not-found") as a wrapped ErrNotFound's would.
type notFound struct{ msg string }

func (e notFound) Error() string        { return e.msg }
func (e notFound) Is(target error) bool { return target == persist.ErrNotFound }

// notFoundf is a notFound with a formatted message.
func notFoundf(format string, a ...any) error { return notFound{fmt.Sprintf(format, a...)} }

// oneLine is err's message on one line. The one multi-line error is
// cobra's unknown command with its "Did you mean this?" list, which becomes
// "(did you mean kv?)"; the suggestions are names of this command tree.
func oneLine(err error) string {
	msg := err.Error()
	if !isCobraUsage(err) {
		return msg
	}
	head, list, ok := strings.Cut(msg, "\n\nDid you mean this?\n")
	if !ok {
		return msg
	}
	return head + " (did you mean " + strings.Join(strings.Fields(list), " or ") + "?)"
}

// terminalSafe escapes, as Go's %q does, every rune of s a terminal could act
// on or show as something else: control characters (newlines included, so
// an error stays one line), DEL, the C1 controls, other unprintable runes
// such as bidirectional overrides, and bytes that are not UTF-8. Errors quote
// the names they carry already; this catches any a message still holds raw
// (a flag name cobra echoes, a server's text), so no byte of user input
// reaches the terminal as it was typed.
func terminalSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// flagValueError rewords pflag's error for a value its parser refused
// (`invalid argument "abc" for "--from" flag: strconv.ParseUint: parsing
// "abc": invalid syntax`) as the commands word their own checks: the flag,
// the value and what it wants, with no Go function names. Other errors,
// and values of types this does not know, keep pflag's words.
func flagValueError(err error) error {
	var nee *pflag.NotExistError
	if errors.As(err, &nee) {
		// An argument such as -1 (stream get's SEQ) reads as a cluster
		// of shorthand flags: say what it was taken for.
		if sh := nee.GetSpecifiedShortnames(); sh != "" && strings.Trim(sh, "0123456789") == "" {
			return fmt.Errorf("%q: an argument starting with - reads as a flag, and no argument here is a negative number (put -- before an argument that starts with -)", "-"+sh)
		}
		return err
	}
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	var want string
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64":
		want = "a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number, 0 or more"
	case "intSlice", "int64Slice", "int32Slice":
		want = "whole numbers separated by commas"
	case "float32", "float64":
		want = "a number"
	case "bool":
		want = "true or false"
	case "duration":
		want = "a duration with its unit, such as 500ms, 5s, 2m or 1h"
	default:
		return err
	}
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("--%s %q: out of range (want %s)", f.Name, ive.GetValue(), want)
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, ive.GetValue(), want)
}

// markArgErrors makes the argument validators of cmd and its subcommands
// return usage errors, so an argument-count mistake is recognised by type
// and no run-time error is mistaken for one by its wording.
func markArgErrors(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markArgErrors(sub)
	}
}

// isCobraUsage recognises the one untyped usage error cobra produces outside
// flag parsing and argument validation: an unknown subcommand of the root.
// It matches a prefix only, so a run-time error that merely contains these
// words (a server's reply, an OS error) keeps exit 1.
func isCobraUsage(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}
