package coordinator

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// TestShardsPartialFailure: when one shard's part of an object's commit
// fails and another's succeeds, the failed part's batches carry a code a
// producer retries (KAFKA_STORAGE_ERROR), not UNKNOWN_SERVER_ERROR.
func TestShardsPartialFailure(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 2, nil, nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
	require.NoError(t, err)
	tp0, tp1 := wal.TopicPartition{TopicID: id, Partition: 0}, wal.TopicPartition{TopicID: id, Partition: 1}
	s0, err := f.s.Shards().ShardOf(tp0)
	require.NoError(t, err)
	s1, err := f.s.Shards().ShardOf(tp1)
	require.NoError(t, err)
	require.NotEqual(t, s0, s1, "the partitions are spread over the shards")

	f.logs[s0].(*metalog.Mem).FailNext(errors.New("the store is down"))
	res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: "p/wal/x", Size: 200, Coordinates: coordsFor(tp0, tp1)})
	require.NoError(t, err, "one shard committed")
	require.Equal(t, kafkaerr.KafkaStorageError, kafkaerr.CodeOf(res[0].Err), "%v", res[0].Err)
	require.True(t, kafkaerr.CodeOf(res[0].Err).Retriable())
	require.NoError(t, res[1].Err)
}
