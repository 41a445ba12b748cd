//go:build race

package sim

// raceEnabled: under -race a simulated hour takes several times longer,
// so TestSeeds runs fewer seeds for less virtual time.
const raceEnabled = true
