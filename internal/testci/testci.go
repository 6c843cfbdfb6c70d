// Package testci decides what a test does when something it needs from the
// machine (a system package, a server) is missing: locally it skips,
// saying why; under CI=true it fails, so CI cannot pass without running it.
package testci

import (
	"os"
	"testing"
)

// Missing skips t with why, or fails it when CI=true.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", why)
	}
	t.Skip(why)
}

// Require returns the path available finds, or calls Missing with why it
// found none: the Require of a package that checks for one program.
func Require(t testing.TB, available func() (path, why string)) string {
	t.Helper()
	p, why := available()
	if p == "" {
		Missing(t, why)
	}
	return p
}
