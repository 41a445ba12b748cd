package disklesstest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the Brokers and servers the tests start leave no
// goroutine behind once their tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
