// Package testinn2 connects integration tests to the INN2 server that
// scripts/inn2.sh runs, and gives clients that never send MODE READER
// (NZBGet, most downloaders) a reader port of their own: INN treats a
// loopback connection to innd as a peer's feed and answers
// "401 MODE-READER" to such clients.
package testinn2

import (
	"os"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testci"
)

// AddrEnv names the environment variable holding innd's host:port;
// scripts/test.sh sets it after starting INN2.
const AddrEnv = "SWITCHYARD_INN2_ADDR"

// DefaultGroups exist on every INN2 that scripts/inn2.sh started
// (its DEFAULT_GROUPS), and allow posting.
var DefaultGroups = []string{"switchyard.test.a", "switchyard.test.b", "switchyard.test.c"}

// Addr returns innd's host:port, or skips t saying why when INN2 is not
// set up; under CI=true it fails t instead, since CI must run the INN2
// tests.
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(AddrEnv)
	if addr != "" {
		return addr
	}
	why := AddrEnv + " is not set: INN2 integration skipped (run `bash scripts/inn2.sh start` as root to install and start INN2, then export its address)"
	testci.Missing(t, why)
	return ""
}
