package segment

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vectorTimestamp is the timestamp of the test vectors of docs/formats.md,
// "Test vectors" (package kbatch's tests hold the batch vectors).
const vectorTimestamp = 1700000000000 // 0x18bcfe56800

// unhex decodes hex with white space in it.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}
