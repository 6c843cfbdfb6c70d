package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestRuntimeErrorWordsAreNotUsage: a run-time failure whose text happens to
// contain words of cobra's messages (an OS error "invalid argument", a
// server's reply "... received ...") still exits 1; only errors cobra made
// for the invocation exit 2.
func TestRuntimeErrorWordsAreNotUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		code int
	}{
		{"syscall EINVAL", errors.New("listen tcp 127.0.0.1:0: setsockopt: invalid argument"), exitRuntime},
		{"server text", errors.New("nntp: HEAD: 430 article not received yet"), exitRuntime},
		{"server accepts", errors.New("nntp: POST: 441 server accepts no posts"), exitRuntime},
		{"usagef", usagef("--chunk must be positive"), exitUsage},
		{"wrapped usage", fmt.Errorf("kv: %w", usagef("bad")), exitUsage},
		{"not-found", fmt.Errorf("get hub/s: %w", persist.Errorf(persist.CodeNotFound, "no key \"k\"")), exitNotFound},
		{"other persist code", fmt.Errorf("set hub/s: %w", persist.Errorf(persist.CodeReject, "full")), exitRuntime},
		{"not found in words only", errors.New("open /x: no such file or directory (not found)"), exitRuntime},
		{"notFoundf", notFoundf("%q has no durable subscriptions", "alice"), exitNotFound},
		{"wrapped notFoundf", fmt.Errorf("events: %w", notFoundf("gone")), exitNotFound},
	}
	for _, c := range cases {
		if got := exitCode(io.Discard, c.err); got != c.code {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.code)
		}
	}
}

// TestNotFoundfWording: a not-found the CLI words itself prints its own
// sentence, not the wire code after it.
// (Was: "\"alice\" has no durable subscriptions: not-found".)
func TestNotFoundfWording(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	exitCode(&b, notFoundf("%q has no durable subscriptions", "alice"))
	if got, want := b.String(), "switchyard: \"alice\" has no durable subscriptions\n"; got != want {
		t.Fatalf("stderr %q, want %q", got, want)
	}
}

// TestArgErrorsAreUsage: cobra's own argument-count errors are usage errors
// by type once the tree is marked, whatever their wording.
func TestArgErrorsAreUsage(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "x"}
	sub := &cobra.Command{Use: "y", Args: cobra.ExactArgs(2), RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(sub)
	markArgErrors(root)
	err := sub.Args(sub, []string{"one"})
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("arg error %v is not a usage error", err)
	}
	if err := sub.Args(sub, []string{"a", "b"}); err != nil {
		t.Fatalf("valid args rejected: %v", err)
	}
}

// TestRootHelpListsExitCodes: the root help and the README document every
// exit code the binary uses, with the meaning the constants have.
func TestRootHelpListsExitCodes(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code int
		word string
	}{{0, "success"}, {exitRuntime, "run-time"}, {exitUsage, "usage"}, {exitNotFound, "not found"}} {
		line := fmt.Sprintf("  %d  %s", c.code, c.word)
		if !strings.Contains(newRootCmd().Long, line) {
			t.Errorf("root help lacks %q", line)
		}
		row := fmt.Sprintf("| %d | %s", c.code, c.word)
		if !strings.Contains(string(readme), row) {
			t.Errorf("README lacks the row %q", row)
		}
	}
	// Every command that exits 3 is named where code 3 is explained, so a
	// script's author knows to expect it (events presence and subs and
	// work status --source were missing).
	help := strings.Join(strings.Fields(newRootCmd().Long), " ")
	var row string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("| %d |", exitNotFound)) {
			row = l
		}
	}
	for _, cmd := range []string{"kv get", "stream get", "usenet nzb", "usenet users", "events presence", "events subs", "work status --source"} {
		if !strings.Contains(help, cmd) {
			t.Errorf("root help's exit code %d does not name %s", exitNotFound, cmd)
		}
		if !strings.Contains(row, cmd) {
			t.Errorf("README's row of exit code %d does not name %s", exitNotFound, cmd)
		}
	}
}

// TestRoleEndedExitsNonZero: a role that ends on its own after start (the
// balancer's bus connection closed for good: its password was changed on
// the server) stops the command, which prints why, naming the role, and
// exits 1, so a supervisor restarts it. (Was: the command ran on without
// the role, and its /readyz said unready for ever.)
func TestRoleEndedExitsNonZero(t *testing.T) {
	url, revoke := testnats.PasswordBus(t)
	port := strings.TrimPrefix(url, "nats://127.0.0.1:")
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, code := execute(t, "balancer", "--ids", "0", "--nats", "nats://sy:first@127.0.0.1:"+port)
		done <- result{stderr, code}
	}()
	nc, err := nats.Connect(url, nats.UserInfo("sy", "first"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the balancer answering", func() bool {
		_, err := nc.Request("persist.hub.id", nil, time.Second)
		return err == nil
	})
	nc.Close()
	revoke()
	select {
	case r := <-done:
		if r.code != exitRuntime || !strings.Contains(r.stderr, "switchyard: role conn switchyard-balancer ended") {
			t.Fatalf("exit %d, stderr %q; want exit %d and the error naming the role", r.code, r.stderr, exitRuntime)
		}
	case <-time.After(testwait.Timeout):
		t.Fatalf("the balancer still ran %v after its connection was closed for good", testwait.Timeout)
	}
}

// closeFails is SQLite storage whose Close fails (after closing): the
// persist server's Stop then fails, as on a disk that went away.
type closeFails struct{ store.Storage }

func (c closeFails) Close() error {
	_ = c.Storage.Close()
	return errors.New("close storage: the disk went away")
}

// TestSignalDuringStartWithFailedCleanup: a signal while the roles start
// is a clean stop (nil, exit 0) only when what had started stopped
// cleanly; a failed stop is the command's error. (Was: exit 0 whatever
// the cleanup returned, which was only logged.)
func TestSignalDuringStartWithFailedCleanup(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, signal := context.WithCancel(t.Context())
	defer signal()
	cfg := fleet.Config{
		NATS: fleet.NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist: fleet.PersistConfig{IDs: []string{"0", "1"}, Serve: []string{"0", "1"}, DataDir: t.TempDir(), Tune: func(c *server.Config) {
			switch c.ID {
			case "0": // started, then stopped by the cleanup, which fails
				c.Storage = closeFails{store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir})}
			case "1": // the signal comes once server 0 runs
				signal()
			}
		}},
		HTTP: fleet.HTTPConfig{Addr: "127.0.0.1:0"},
		API:  fleet.APIConfig{Dir: file}, // the start fails here if the signal did not cut it short
	}
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	err := runFleet(cmd, cfg, func(*fleet.Fleet) { t.Error("announced a fleet that failed to start") }, "")
	if err == nil || !strings.Contains(err.Error(), "the disk went away") {
		t.Fatalf("runFleet: %v, want the failed stop of persist-0", err)
	}
	if code := exitCode(io.Discard, err); code != exitRuntime {
		t.Fatalf("exit %d, want %d", code, exitRuntime)
	}
}
