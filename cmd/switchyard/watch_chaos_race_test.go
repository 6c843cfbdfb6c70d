//go:build race

package main

// chaosSets is the number of sets of TestWatchChaos under the race detector,
// which slows the server process (a race-built child) and the 50 watchers
// five to ten times over: every watcher re-reads the whole stream after each
// restart. The kills, the cut and the checks are the same as in a normal
// run, which keeps the full 20,000.
const chaosSets = 5000
