package metalog_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, or, when the crash test re-executes the test
// binary with its environment variable set, the test's child process.
func TestMain(m *testing.M) {
	if dir := os.Getenv(fileLogCrashEnv); dir != "" {
		fileLogCrashChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}
