//go:build !race

package main

// raceEnabled is whether the tests run with the race detector, and so
// build the broker with it.
const raceEnabled = false
