package kbatch

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines of its own, and its codecs must not
// either: the zstd coder runs synchronously.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
