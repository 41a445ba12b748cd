package diskless

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/diskless-go/diskless/kafkaerr"
)

// TestPartitionLimits: a partition count that is not positive or is above
// MaxPartitionsPerTopic is INVALID_PARTITIONS, one that takes the broker
// past MaxPartitions POLICY_VIOLATION, and neither creates anything or
// logs above debug.
func TestPartitionLimits(t *testing.T) {
	ctx := t.Context()
	core, logs := observer.New(zap.InfoLevel)
	b := openTest(t, &Config{MaxPartitionsPerTopic: 100, MaxPartitions: 150, Logger: zap.New(core)})
	_, err := b.CreateTopic(ctx, "a", TopicConfig{Partitions: 100})
	require.NoError(t, err)
	before := logs.Len()

	for _, c := range []struct {
		partitions int32
		code       kafkaerr.Code
	}{
		{math.MaxInt32, kafkaerr.InvalidPartitions},
		{101, kafkaerr.InvalidPartitions},
		{-5, kafkaerr.InvalidPartitions},
		{51, kafkaerr.PolicyViolation}, // 100 + 51 > 150
	} {
		require.Equal(t, c.code, kafkaerr.CodeOf(b.ValidateNewTopic(ctx, TopicConfig{Partitions: c.partitions})), "%d partitions", c.partitions)
		_, err := b.CreateTopic(ctx, "b", TopicConfig{Partitions: c.partitions})
		require.Equal(t, c.code, kafkaerr.CodeOf(err), "%d partitions: %v", c.partitions, err)
	}
	ts, err := b.DescribeTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1, "nothing created")
	require.Equal(t, before, logs.Len(), "nothing logged: %v", logs.All())

	_, err = b.CreateTopic(ctx, "b", TopicConfig{Partitions: 50})
	require.NoError(t, err, "exactly up to the broker's bound")
	_, err = b.CreateTopic(ctx, "c", TopicConfig{})
	require.Equal(t, kafkaerr.PolicyViolation, kafkaerr.CodeOf(err))

	// The defaults refuse the count of the probe.
	d := openTest(t, nil)
	_, err = d.CreateTopic(ctx, "huge", TopicConfig{Partitions: math.MaxInt32})
	require.Equal(t, kafkaerr.InvalidPartitions, kafkaerr.CodeOf(err))
}
