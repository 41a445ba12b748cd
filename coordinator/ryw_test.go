package coordinator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// TestReadYourWrites, through the exported API only: every commit that
// CommitFile answered is readable by the next call, batches and high
// watermark alike (FindBatches, ListOffsets by time, a follower's
// WaitApplied), over each kind of metadata log, with the default
// ApplyInterval (the database commits behind the answers).
func TestReadYourWrites(t *testing.T) {
	logs := map[string]func(t *testing.T) metalog.Log{
		"mem": func(t *testing.T) metalog.Log { return metalog.NewMem(nil) },
		"file": func(t *testing.T) metalog.Log {
			l, err := metalog.OpenFile(t.TempDir(), nil)
			require.NoError(t, err)
			return l
		},
		"bucket": func(t *testing.T) metalog.Log {
			b := memblob.OpenBucket(nil)
			t.Cleanup(func() { b.Close() })
			l, err := metalog.OpenBucket(t.Context(), b, "meta/0/", nil)
			require.NoError(t, err)
			return l
		},
	}
	for name, open := range logs {
		t.Run("log="+name, func(t *testing.T) {
			ctx := t.Context()
			log := open(t)
			t.Cleanup(func() { log.Close() })
			c, err := coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			id, err := c.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "ryw", Partitions: 1})
			require.NoError(t, err)
			tp := wal.TopicPartition{TopicID: id}

			const n = 50
			for i := range int64(n) {
				res, err := c.CommitFile(ctx, coordinator.CommitFileRequest{
					ObjectKey: fmt.Sprintf("obj-%d", i), Size: 100,
					Coordinates: []wal.Coordinate{{TopicPartition: tp, Offset: 1, Size: 99, NumRecords: 2, BaseTimestamp: 1000 + i, MaxTimestamp: 1000 + i, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}},
				})
				require.NoError(t, err)
				require.NoError(t, res[0].Err)
				require.Equal(t, 2*i, res[0].BaseOffset)

				// At once: the batch just acknowledged and every one before.
				found, err := c.FindBatches(ctx, tp, 0, 1<<30)
				require.NoError(t, err)
				require.Equal(t, 2*(i+1), found.HighWatermark)
				require.Len(t, found.Batches, int(i+1), "commit %d: the high watermark says %d, the batches end at %d", i, found.HighWatermark, lastOf(found))
				require.Equal(t, 2*i+1, found.Batches[i].LastOffset)
				require.Equal(t, fmt.Sprintf("obj-%d", i), found.Batches[i].ObjectKey)

				lo, err := c.ListOffsets(ctx, tp, 1000+i)
				require.NoError(t, err)
				require.Equal(t, 2*i, lo.Offset, "ListOffsets by time, commit %d", i)
			}
		})
	}
}

// lastOf returns the last offset of the batches found, or -1.
func lastOf(f coordinator.FindResult) int64 {
	if len(f.Batches) == 0 {
		return -1
	}
	return f.Batches[len(f.Batches)-1].LastOffset
}

// TestFollowerWaitApplied: a follower tailing a shard's log reads a
// commit as soon as WaitApplied reaches the log offset the commit's entry
// took.
func TestFollowerWaitApplied(t *testing.T) {
	ctx := t.Context()
	log := metalog.NewMem(nil)
	t.Cleanup(func() { log.Close() })
	c, err := coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	id, err := c.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "f", Partitions: 1})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id}
	f, err := coordinator.OpenFollower(ctx, log.Writer(), &coordinator.FollowerOptions{Options: coordinator.Options{Dir: t.TempDir()}, Tail: true})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	for i := range int64(20) {
		_, err := c.CommitFile(ctx, coordinator.CommitFileRequest{
			ObjectKey: fmt.Sprintf("o-%d", i), Size: 100,
			Coordinates: []wal.Coordinate{{TopicPartition: tp, Offset: 1, Size: 99, NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}},
		})
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 10e9)
		require.NoError(t, f.WaitApplied(wctx, log.End()-1))
		cancel()
		found, err := f.FindBatches(ctx, tp, 0, 1<<30)
		require.NoError(t, err)
		require.Equal(t, i+1, found.HighWatermark)
		require.Len(t, found.Batches, int(i+1))
	}
}
