package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist"
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
	}
	for _, c := range cases {
		if got := exitCode(io.Discard, c.err); got != c.code {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.code)
		}
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
}
