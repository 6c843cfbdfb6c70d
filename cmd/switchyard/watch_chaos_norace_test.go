//go:build !race

package main

// chaosSets is the number of sets of TestWatchChaos: the full figure of the
// issue in a normal run.
const chaosSets = 20000
