package coordinator

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, or, when a crash test re-executes the test
// binary with its environment variable set, that test's child process.
func TestMain(m *testing.M) {
	if dir := os.Getenv(coordinatorCrashEnv); dir != "" {
		coordinatorCrashChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}
