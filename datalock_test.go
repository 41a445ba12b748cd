package diskless

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockEnv names the data folder that the child of TestDataDirLock opens.
const lockEnv = "DISKLESS_LOCK_CHILD_DIR"

// lockChild opens a Broker on dir, prints "opened" or the error, and
// exits.
func lockChild(dir string) {
	b, err := Open(context.Background(), &Config{BucketURL: "file://" + filepath.Join(dir, "..", "bucket"), DataDir: dir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(0)
	}
	fmt.Println("opened")
	if err := b.Close(); err != nil {
		fmt.Println("close error:", err)
	}
	os.Exit(0)
}

// TestDataDirLock: a second Broker on a data folder, in this process or
// another, fails with "data folder in use by another process", and opens
// once the first is closed.
func TestDataDirLock(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	cfg := &Config{BucketURL: "file://" + filepath.Join(root, "bucket"), DataDir: filepath.Join(root, "data")}
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "t", TopicConfig{})
	require.NoError(t, err)

	_, err = Open(ctx, cfg)
	require.ErrorIs(t, err, ErrDataDirInUse)
	require.ErrorContains(t, err, "data folder in use by another process")

	child := func() string {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), lockEnv+"="+cfg.DataDir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	require.Contains(t, child(), "data folder in use by another process")

	require.NoError(t, b.Close())
	require.Equal(t, "opened", child())
	b, err = Open(ctx, cfg)
	require.NoError(t, err, "the lock is released by Close")
	ts, err := b.DescribeTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.NoError(t, b.Close())
}
