// Package testtls makes a throwaway certificate authority and a server
// certificate for tests and benchmarks, written into a temporary directory,
// so no key is ever committed.
package testtls

import (
	"crypto/tls"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/devcert"
)

// Files are the PEM files of a test CA and of a server certificate it
// signed for 127.0.0.1 and localhost.
type Files = devcert.Files

// New writes a CA and a server certificate into t.TempDir().
func New(t testing.TB) Files {
	t.Helper()
	f, err := devcert.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ServerConfig loads the server certificate of f.
func ServerConfig(t testing.TB, f Files) *tls.Config {
	t.Helper()
	c, err := f.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
