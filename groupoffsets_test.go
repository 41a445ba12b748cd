package diskless

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// TestGroupOffsets: the facade commits only offsets of partitions that
// exist (all or none), reads them back across a restart, leaves out those
// of a topic deleted (and created again) since, and deletes them.
func TestGroupOffsets(t *testing.T) {
	ctx := t.Context()
	bucket, data := t.TempDir(), t.TempDir()
	cfg := func() *Config { return &Config{BucketURL: "file://" + bucket, DataDir: data} }
	b := openTest(t, cfg())
	_, err := b.CreateTopic(ctx, "orders", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "audit", TopicConfig{Partitions: 1})
	require.NoError(t, err)

	err = b.CommitOffsets(ctx, "readers", 0, []GroupOffset{{Topic: "orders", Partition: 0, Offset: 5}, {Topic: "orders", Partition: 2, Offset: 1}})
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(err))
	err = b.CommitOffsets(ctx, "readers", 0, []GroupOffset{{Topic: "missing", Partition: 0, Offset: 5}})
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(err))
	got, err := b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Empty(t, got, "nothing of a refused commit")

	require.NoError(t, b.CommitOffsets(ctx, "readers", 0, []GroupOffset{
		{Topic: "orders", Partition: 1, Offset: 7, LeaderEpoch: 2, Metadata: "m"},
		{Topic: "audit", Partition: 0, Offset: 3, LeaderEpoch: -1},
	}))
	require.NoError(t, b.Close())
	b = openTest(t, cfg())
	got, err = b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "audit", got[0].Topic)
	require.Equal(t, GroupOffset{Topic: "orders", Partition: 1, Offset: 7, LeaderEpoch: 2, Metadata: "m", CommitTime: got[1].CommitTime}, got[1])
	require.False(t, got[1].CommitTime.IsZero())
	got, err = b.FetchOffsets(ctx, "readers", []GroupPartition{{Topic: "audit", Partition: 0}})
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A topic deleted and created again: its old offsets are not its.
	require.NoError(t, b.DeleteTopic(ctx, "audit"))
	_, err = b.CreateTopic(ctx, "audit", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	got, err = b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "orders", got[0].Topic)

	groups, err := b.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"readers"}, groups)
	require.NoError(t, b.DeleteOffsets(ctx, "readers", 0, nil))
	groups, err = b.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Empty(t, groups)
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.CommitOffsets(ctx, "readers", 0, nil), ErrClosed)
	_, err = b.FetchOffsets(ctx, "readers", nil)
	require.ErrorIs(t, err, ErrClosed)
}
