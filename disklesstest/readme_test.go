package disklesstest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadme checks that the test README.md shows is this package's
// TestExactlyOnce, from its imports on, so that what the README promises
// is what make test runs.
func TestReadme(t *testing.T) {
	code, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	s := string(code)
	body := s[strings.Index(s, "import ("):]
	require.Contains(t, string(readme), "```go\npackage orders_test\n\n"+body+"```\n", "README.md's test is example_test.go's")
}
