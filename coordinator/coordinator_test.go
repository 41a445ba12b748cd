package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

func TestCommitAndFind(t *testing.T) {
	ctx := t.Context()
	c := openTest(t, newTestLog(), "", nil)
	id := mustCreate(t, c, "orders", 3, TopicConfig{})
	tp0 := wal.TopicPartition{TopicID: id, Partition: 0}
	tp1 := wal.TopicPartition{TopicID: id, Partition: 1}

	res, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/a", Size: 401, Uploader: 1, Coordinates: []wal.Coordinate{
		coord(tp0, 1, 5, -1, -1, -1, 1000),
		coord(tp0, 101, 3, -1, -1, -1, 1005),
		coord(tp1, 201, 2, -1, -1, -1, 1001),
		coord(wal.TopicPartition{TopicID: id, Partition: 9}, 301, 1, -1, -1, -1, 1001),
	}})
	require.NoError(t, err)
	require.Equal(t, int64(0), res[0].BaseOffset)
	require.Equal(t, int64(5), res[1].BaseOffset)
	require.Equal(t, int64(0), res[2].BaseOffset)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(res[3].Err))
	for _, r := range res[:3] {
		require.NoError(t, r.Err)
		require.Equal(t, int64(-1), r.LogAppendTime)
		require.Equal(t, int64(0), r.LogStartOffset)
	}

	found, err := c.FindBatches(ctx, tp0, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(8), found.HighWatermark)
	require.Equal(t, []Location{{ObjectKey: "wal/a", BytePos: 1, ByteSize: 200, BaseOffset: 0, LastOffset: 7, MaxTimestamp: 1005, LogAppendTime: -1}}, found.Batches,
		"two contiguous batches of one partition share a row")

	res, err = c.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/b", Size: 101, Coordinates: []wal.Coordinate{coord(tp0, 1, 4, -1, -1, -1, 2000)}})
	require.NoError(t, err)
	require.Equal(t, int64(8), res[0].BaseOffset)

	found, err = c.FindBatches(ctx, tp0, 6, 1)
	require.NoError(t, err)
	require.Len(t, found.Batches, 1, "at least one run, however small the budget")
	found, err = c.FindBatches(ctx, tp0, 6, 1<<20)
	require.NoError(t, err)
	require.Len(t, found.Batches, 2)
	require.Equal(t, int64(8), found.Batches[1].BaseOffset)
	require.Equal(t, "wal/b", found.Batches[1].ObjectKey)

	found, err = c.FindBatches(ctx, tp0, 12, 100)
	require.NoError(t, err)
	require.Empty(t, found.Batches)
	_, err = c.FindBatches(ctx, tp0, 13, 100)
	require.Equal(t, kafkaerr.OffsetOutOfRange, code(err))

	lo, err := c.ListOffsets(ctx, tp0, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(12), lo.Offset)
	lo, err = c.ListOffsets(ctx, tp0, 1003)
	require.NoError(t, err)
	require.Equal(t, int64(0), lo.Offset)
	require.Equal(t, int64(1005), lo.Timestamp)
	lo, err = c.ListOffsets(ctx, tp0, 1500)
	require.NoError(t, err)
	require.Equal(t, int64(8), lo.Offset)
	lo, err = c.ListOffsets(ctx, tp0, 3000)
	require.NoError(t, err)
	require.Equal(t, int64(-1), lo.Offset)
	lo, err = c.ListOffsets(ctx, tp0, MaxTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(2000), lo.Timestamp)

	low, err := c.DeleteRecords(ctx, tp0, 9)
	require.NoError(t, err)
	require.Equal(t, int64(9), low)
	found, err = c.FindBatches(ctx, tp0, 9, 1<<20)
	require.NoError(t, err)
	require.Len(t, found.Batches, 1)
	require.Equal(t, int64(9), found.LogStart)
	_, err = c.FindBatches(ctx, tp0, 0, 1<<20)
	require.Equal(t, kafkaerr.OffsetOutOfRange, code(err))
	dead, err := c.DeadObjects(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, dead, "wal/a still holds partition 1's batch")
}

func TestIdempotence(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, newTestLog(), "", nil)
	id := mustCreate(t, c, "t", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id}
	pid, epoch, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	require.Equal(t, int16(0), epoch)
	pid2, _, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	require.NotEqual(t, pid, pid2)

	objects := 0
	commit := func(seq int32, n int32, ep int16) wal.Result {
		objects++
		res, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%d", objects), Coordinates: []wal.Coordinate{coord(tp, 1, n, pid, ep, seq, 1)}})
		require.NoError(t, err)
		return res[0]
	}
	require.Equal(t, int64(0), commit(0, 5, 0).BaseOffset)
	require.Equal(t, int64(5), commit(5, 5, 0).BaseOffset)
	dup := commit(0, 5, 0)
	require.NoError(t, dup.Err)
	require.Equal(t, int64(0), dup.BaseOffset, "a duplicate answers the original offset")
	require.Equal(t, kafkaerr.OutOfOrderSequenceNumber, code(commit(20, 1, 0).Err))
	require.Equal(t, kafkaerr.OutOfOrderSequenceNumber, code(commit(3, 5, 0).Err), "overlapping, not a retained batch")
	require.Equal(t, kafkaerr.OutOfOrderSequenceNumber, code(commit(5, 1, 1).Err), "a new epoch starts at 0")
	require.Equal(t, int64(10), commit(0, 1, 1).BaseOffset)
	require.Equal(t, kafkaerr.InvalidProducerEpoch, code(commit(1, 1, 0).Err))
	hw, err := c.ListOffsets(ctx, tp, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(11), hw.Offset)
}

func TestCommitSameObjectTwice(t *testing.T) {
	ctx := t.Context()
	log, dir := newTestLog(), t.TempDir()
	c := openTest(t, log, dir, nil)
	id := mustCreate(t, c, "t", 2, TopicConfig{})
	p0, p1 := wal.TopicPartition{TopicID: id}, wal.TopicPartition{TopicID: id, Partition: 1}
	req := CommitFileRequest{ObjectKey: "wal/x", Coordinates: []wal.Coordinate{
		coord(p0, 1, 3, -1, -1, -1, 1), coord(p1, 101, 2, -1, -1, -1, 1), coord(p0, 201, 1, -1, -1, -1, 1),
		coord(wal.TopicPartition{TopicID: uuid.New()}, 301, 1, -1, -1, -1, 1),
	}}
	first, err := c.CommitFile(ctx, req)
	require.NoError(t, err)
	entries := c.Stats().Entries
	// Retried (its answer lost): answered as the first time, nothing
	// appended; also by a new leader of the log.
	again, err := c.CommitFile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, entries, c.Stats().Entries, "a retried commit logged again")
	require.NoError(t, c.Close())
	c = openTest(t, log.Writer(), t.TempDir(), nil)
	again, err = c.CommitFile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, first, again)
	hw, err := c.ListOffsets(ctx, p0, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(4), hw.Offset)

	// And by a leader whose database applied the first commit before it
	// began (its view has no recent record of it: the store's rows answer).
	require.NoError(t, c.Close())
	c = openTest(t, log.Writer(), dir, nil)
	entries = c.Stats().Entries
	again, err = c.CommitFile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, entries, c.Stats().Entries, "a retried commit logged again")
}

// TestCommitOfDuplicatesTwice: an object whose every batch was a
// duplicate (a producer's retry of batches another object committed)
// makes no row; its commit retried by a leader that has no recent record
// of it (its answer lost, the leader restarted on the same database) is
// answered as the first time, the duplicates' original offsets, not
// refused as an object committed already.
func TestCommitOfDuplicatesTwice(t *testing.T) {
	ctx := t.Context()
	log, dir := newTestLog(), t.TempDir()
	c := openTest(t, log, dir, nil)
	id := mustCreate(t, c, "t", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id}
	pid, epoch, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	batch := coord(tp, 1, 3, pid, epoch, 0, 1)
	res, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/a", Coordinates: []wal.Coordinate{coord(tp, 1, 2, -1, -1, -1, 1), batch}})
	require.NoError(t, err)
	require.Equal(t, int64(2), res[1].BaseOffset)
	retry := CommitFileRequest{ObjectKey: "wal/b", Coordinates: []wal.Coordinate{batch}}
	first, err := c.CommitFile(ctx, retry)
	require.NoError(t, err)
	require.NoError(t, first[0].Err)
	require.Equal(t, int64(2), first[0].BaseOffset, "a duplicate answers the original offset")
	require.NoError(t, c.Close())
	c = openTest(t, log.Writer(), dir, nil)
	entries := c.Stats().Entries
	again, err := c.CommitFile(ctx, retry)
	require.NoError(t, err)
	require.Equal(t, first[0].BaseOffset, again[0].BaseOffset)
	require.NoError(t, again[0].Err)
	require.Equal(t, entries, c.Stats().Entries, "a retried commit logged again")
}

// TestTopicConfig: a topic's configuration, defaults filled in, is what
// Topics returns, from the view, from the database after a restart, and
// from the log after a rebuild; a negative size is INVALID_CONFIG.
func TestTopicConfig(t *testing.T) {
	ctx := t.Context()
	log, dir := newTestLog(), t.TempDir()
	c := openTest(t, log, dir, nil)
	mustCreate(t, c, "plain", 1, TopicConfig{})
	mustCreate(t, c, "tiered", 1, TopicConfig{Compact: true, LogAppendTime: true, Retention: -1, MaxMessageBytes: 1000, SegmentBytes: 1 << 20, SegmentTime: state.MsDuration(60_000)})
	want := map[string]TopicConfig{
		"plain":  {Partitions: 1, Retention: 7 * 24 * time.Hour, RetentionBytes: -1, Delete: true, MaxMessageBytes: kbatch.DefaultMaxMessageBytes, SegmentBytes: kbatch.DefaultSegmentBytes, SegmentTime: state.MsDuration(7 * 24 * 3600 * 1000)},
		"tiered": {Partitions: 1, Retention: -1, RetentionBytes: -1, Compact: true, LogAppendTime: true, MaxMessageBytes: 1000, SegmentBytes: 1 << 20, SegmentTime: state.MsDuration(60_000)},
	}
	check := func(c *leader, when string) {
		t.Helper()
		ts, err := c.Topics(ctx)
		require.NoError(t, err)
		require.Len(t, ts, 2)
		for _, ti := range ts {
			require.Equal(t, want[ti.Name], ti.Config, "%s: %s", when, ti.Name)
		}
	}
	check(c, "created")
	for _, bad := range []TopicConfig{{SegmentBytes: -1}, {SegmentTime: state.MsDuration(-5)}, {MaxMessageBytes: -1}} {
		_, err := c.CreatePartitions(ctx, CreatePartitionsRequest{Name: "bad", Partitions: 1, Config: bad})
		require.Equal(t, kafkaerr.InvalidConfig, code(err), "%+v", bad)
	}
	require.NoError(t, c.Close())
	check(openTest(t, log, dir, nil), "reopened")
	check(openTest(t, log, t.TempDir(), nil), "rebuilt from the log")
}
