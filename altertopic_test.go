package diskless

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestAlterTopicConfig: a topic's altered config takes effect: Produce
// checks max.message.bytes and, once the topic is compacted, keys;
// retention.bytes cuts the partition; DescribeTopics shows it. A change
// of LogAppendTime, a value out of range and an unknown topic are
// refused with Kafka's codes, and change nothing.
func TestAlterTopicConfig(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	keyless := func(n int) []byte {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(time.Now().UnixMilli(), nil, make([]byte, n))
		data, err := bld.Build(nil)
		require.NoError(t, err)
		return data
	}
	for range 10 {
		require.Zero(t, produceOne(t, b, "t", 0, keyless(2000)).ErrorCode)
	}
	cfg := TopicConfig{MaxMessageBytes: 1000, RetentionBytes: 5000, Compact: true, Delete: true, MinCompactionLag: time.Hour}
	require.NoError(t, b.AlterTopicConfig(ctx, "t", cfg))
	ts, err := b.DescribeTopics(ctx)
	require.NoError(t, err)
	got := ts[0].Config
	require.Equal(t, []any{int32(1000), int64(5000), true, true, time.Hour, int32(1)},
		[]any{got.MaxMessageBytes, got.RetentionBytes, got.Compact, got.Delete, got.MinCompactionLag, got.Partitions})

	require.Equal(t, kafkaerr.MessageTooLarge, produceOne(t, b, "t", 0, keyless(2000)).ErrorCode, "max.message.bytes 1000")
	require.Equal(t, kafkaerr.InvalidRecord, produceOne(t, b, "t", 0, keyless(10)).ErrorCode, "compacted: every record needs a key")
	require.Zero(t, produceOne(t, b, "t", 0, batch(t, kbatch.CodecNone, 0, 1, -1, -1)).ErrorCode)

	_, err = b.coord.EnforceRetention(ctx)
	require.NoError(t, err)
	lo, err := b.ListOffsets(ctx, "t", 0, EarliestTimestamp)
	require.NoError(t, err)
	require.Positive(t, lo.Offset, "retention.bytes 5000 cut the partition")

	for _, bad := range []TopicConfig{{LogAppendTime: true}, {MinCleanableDirtyRatio: 1.5}, {RetentionBytes: 1, MaxMessageBytes: -1}} {
		require.Equal(t, kafkaerr.InvalidConfig, kafkaerr.CodeOf(b.AlterTopicConfig(ctx, "t", bad)), "%+v", bad)
	}
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(b.AlterTopicConfig(ctx, "nope", cfg)))
	ts, err = b.DescribeTopics(ctx)
	require.NoError(t, err)
	require.Equal(t, got, ts[0].Config, "unchanged by the refusals")
}

// TestAlterTopicConfigCluster: a topic altered on one broker of a cluster
// (its shards led anywhere) has the new config on the others: their
// DescribeTopics at once, their Produce once they read the topics again
// (every 10 s).
func TestAlterTopicConfigCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("an etcd cluster")
	}
	etcd := etcdtest.Start(t, nil)
	brokers, _ := clusterOf(t, etcd, 3, 3, nil)
	ctx := t.Context()
	waitLeaders(t, brokers, 3)
	_, err := brokers[1].CreateTopic(ctx, "t", TopicConfig{Partitions: 3})
	require.NoError(t, err)
	produceAll(t, brokers[2], []string{"t"}, 3, 0, 1) // broker 2 has the topic cached
	require.NoError(t, brokers[0].AlterTopicConfig(ctx, "t", TopicConfig{MaxMessageBytes: 100, MinCompactionLag: time.Hour}))
	for _, b := range brokers {
		require.Eventually(t, func() bool {
			ts, err := b.DescribeTopics(ctx)
			return err == nil && len(ts) == 1 && ts[0].Config.MinCompactionLag == time.Hour && ts[0].Config.MaxMessageBytes == 100
		}, 10*time.Second, 20*time.Millisecond)
	}
	big := batch(t, kbatch.CodecNone, 0, 10, -1, -1)
	require.Greater(t, len(big), 100)
	require.Eventually(t, func() bool {
		return produceOne(t, brokers[2], "t", 0, big).ErrorCode == kafkaerr.MessageTooLarge
	}, 30*time.Second, 100*time.Millisecond, "broker 2's Produce takes the new max.message.bytes")
}
