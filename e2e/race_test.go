//go:build race

package e2e

// raceEnabled says the tests run under the race detector: the binary is
// built with -race too, and the heaviest tests do less work.
const raceEnabled = true
