//go:build race

package diskless

// raceEnabled says the tests run with the race detector, which makes
// decompression some ten times slower.
const raceEnabled = true
