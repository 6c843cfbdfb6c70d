package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
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
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.code {
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
