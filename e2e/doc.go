// Package e2e holds the system tests: they run the switchyard binary as
// separate processes against real servers (an embedded NATS, INN2, NZBGet,
// a headless Chromium) and check what a user or an operator would see.
// Linearizability and durability of the persist server across SIGKILL and
// SIGSTOP, watchers across restarts, the work fleet against INN2, the
// usenet round trip through NZBGet, the plain nats client against up, and
// up's pages in a browser.
//
// TestMain builds the binary once, with `go build ./cmd/switchyard` (the go
// of $GOROOT, else the one on PATH) into a temporary directory it removes
// at the end, with -race when the tests themselves run under the race
// detector, so the processes are checked as strictly as the tests. Tests
// whose machine dependency is missing skip locally and fail under CI=true
// (internal/testci).
//
// The package has no code outside its tests; this file carries its doc.
package e2e
