package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/wal"
)

// TestCallsDuringClose: a call made while Close is under way is answered
// (ErrClosed, or its result if the loop took it), never left waiting.
// A request could reach the loop's queue after the loop's last look at it
// and wait for ever: the Broker's commit loop, with no deadline, would
// then stop answering producers.
func TestCallsDuringClose(t *testing.T) {
	var hung, closed, ok atomic.Int64
	for range 40 {
		c := openTest(t, newTestLog(), "", nil)
		id := mustCreate(t, c, "x", 1, TopicConfig{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					var err error
					if wait, serr := c.CommitFileAsync(ctx, CommitFileRequest{ObjectKey: "wal/k", Coordinates: []wal.Coordinate{coord(wal.TopicPartition{TopicID: id}, 1, 1, -1, -1, -1, 1)}}, false); serr != nil {
						err = serr
					} else {
						_, err = wait()
					}
					cancel()
					switch {
					case errors.Is(err, context.DeadlineExceeded):
						hung.Add(1)
						return
					case errors.Is(err, ErrClosed):
						closed.Add(1)
						return
					case err == nil:
						ok.Add(1)
					}
				}
			})
		}
		time.Sleep(time.Millisecond)
		require.NoError(t, c.Close())
		wg.Wait()
	}
	t.Logf("%d calls answered ErrClosed, %d committed", closed.Load(), ok.Load())
	require.Zero(t, hung.Load(), "calls left unanswered by a closing coordinator")
}

// TestDirWithURICharacters: a Dir whose name holds what a SQLite URI reads
// as syntax ('#', '?', '%') still gets its own database, inside it.
func TestDirWithURICharacters(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	for i, name := range []string{"shard#1", "shard?2", "shard%253", "sh ard%3f#?4"} {
		dir := filepath.Join(root, name)
		c := openTest(t, newTestLog(), dir, nil)
		mustCreate(t, c, fmt.Sprintf("only-in-%d", i), 1, TopicConfig{})
		topics, err := c.Topics(ctx)
		require.NoError(t, err)
		require.Len(t, topics, 1, "%s sees only its own topic", name)
		require.NoError(t, c.Close())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.NotEmpty(t, entries, "%s holds its database", name)
	}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, entries, 4, "no database outside the folders")
}
