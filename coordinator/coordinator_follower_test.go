package coordinator

import (
	"testing"

	"github.com/diskless-go/diskless/wal"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
)

// TestFollower: a follower tailing the leader's log answers FindBatches
// and ListOffsets as the leader does once it has caught up, and can start
// from a snapshot when the log is trimmed.
func TestFollower(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := newTestLog()
	leader := openTest(t, log, "", &Options{Bucket: bucket, SnapshotEvery: -1})
	id := mustCreate(t, leader, "f", 2, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 1}
	commit := func(key string) {
		_, err := leader.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: []wal.Coordinate{coord(tp, 1, 4, -1, -1, -1, 1)}})
		require.NoError(t, err)
	}
	commit("wal/1")

	f, err := OpenFollower(ctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket}})
	require.NoError(t, err)
	defer f.Close()
	got, err := f.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), got.HighWatermark)

	commit("wal/2")
	got, err = f.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), got.HighWatermark, "a follower is behind until it catches up")
	require.NoError(t, f.CatchUp(ctx))
	want, err := leader.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	got, err = f.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, want, got)
	lo, err := f.ListOffsets(ctx, tp, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(8), lo.Offset)
	require.Equal(t, leader.applied.Load(), f.Applied())

	// A new follower after a snapshot and trim starts from the snapshot.
	_, err = leader.Snapshot(ctx)
	require.NoError(t, err)
	commit("wal/3")
	f2, err := OpenFollower(ctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket}})
	require.NoError(t, err)
	defer f2.Close()
	got, err = f2.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(12), got.HighWatermark)
}
