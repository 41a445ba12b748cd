package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// TestCommitFileAsync: commits submitted one after another, each without
// waiting for the one before, are decided in submission order (an
// idempotent producer's sequences stay in order) and share log entries:
// those queued behind an append in flight go into the next one.
func TestCommitFileAsync(t *testing.T) {
	ctx := t.Context()
	log := metalog.NewMem(&metalog.MemOptions{Latency: 20 * time.Millisecond, MaxInFlight: 1})
	t.Cleanup(func() { log.Close() })
	c := openTest(t, log, "", nil)
	id := mustCreate(t, c, "orders", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 0}
	pid, ep, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	entries := c.Stats().Entries

	const n = 40
	waits := make([]func() ([]wal.Result, error), n)
	for i := range n {
		waits[i], err = c.CommitFileAsync(ctx, CommitFileRequest{
			ObjectKey: fmt.Sprintf("wal/%03d", i), Size: 100,
			Coordinates: []wal.Coordinate{coord(tp, 0, 2, pid, ep, int32(2*i), 1)},
		})
		require.NoError(t, err)
	}
	for i, wait := range waits {
		res, err := wait()
		require.NoError(t, err)
		require.NoError(t, res[0].Err, "commit %d", i)
		require.Equal(t, int64(2*i), res[0].BaseOffset, "commit %d is decided in submission order", i)
	}
	used := c.Stats().Entries - entries
	require.Less(t, used, int64(n/2), "commits queued behind an append share the next entry")
	t.Logf("%d commits in %d log entries", n, used)
}
