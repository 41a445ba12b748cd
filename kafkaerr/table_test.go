package kafkaerr_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-go/diskless/kafkaerr"
)

// franz-go's kerr is a table of the same codes written independently of
// ours: every code of either table must have the same number, name and
// retriability in the other.
func TestCodesAgreeWithKerr(t *testing.T) {
	// Codes Kafka renamed after kerr named them; kafkaerr has Kafka's
	// current name (Errors.java).
	renamed := map[kafkaerr.Code]string{
		kafkaerr.NotLeaderOrFollower: "NOT_LEADER_FOR_PARTITION",
	}
	ours, theirs := 0, 0
	for i := -1; i <= 1000; i++ {
		code := kafkaerr.Code(i)
		known := !strings.HasPrefix(code.String(), "ERROR_")
		ke := kerr.TypedErrorForCode(int16(i))
		kerrKnows := i == 0 || ke.Code == int16(i)
		require.Equal(t, kerrKnows, known, "code %d (%v) is in one table only", i, code)
		if !known {
			continue
		}
		ours++
		if i == 0 {
			require.Nil(t, ke)
			require.False(t, code.Retriable())
			continue
		}
		theirs++
		name := ke.Message
		if n, ok := renamed[code]; ok {
			require.Equal(t, n, name, "code %d", i)
			name = code.String()
		}
		require.Equal(t, name, code.String(), "name of code %d", i)
		require.Equal(t, ke.Retriable, code.Retriable(), "retriability of %v", code)
	}
	require.Greater(t, ours, 130)
	require.Equal(t, ours, theirs+1) // NONE has no kerr.Error
}

// kafkaerr is the module's one table of Kafka error codes: no library
// file (any non-test file of the module) imports franz-go's kerr for
// them. The only exception reads the code out of the *kerr.Error that
// franz-go's client hands back.
func TestNoKerrOutsideTests(t *testing.T) {
	allowed := map[string]string{
		"internal/kafkatest/aclmatrix.go": "ErrCode reads the code of the *kerr.Error a kgo client returns",
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	fset := token.NewFileSet()
	seen := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		seen++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p == "github.com/twmb/franz-go/pkg/kerr" {
				if _, ok := allowed[rel]; !ok {
					t.Errorf("%s imports franz-go's kerr: use kafkaerr's codes (kafkaerr/codes.go)", rel)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, seen, 100, "walked the module from %s", root)
}
