package cache

import (
	"testing"

	"go.uber.org/goleak"
)

// Fills run in goroutines of their own; Close must have stopped every one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
