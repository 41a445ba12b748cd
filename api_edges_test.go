package diskless

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestProduceBadAcks: acks other than -1, 0 and 1 is
// INVALID_REQUIRED_ACKS for every partition, and appends nothing.
func TestProduceBadAcks(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, nil)
	_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	for _, acks := range []int16{5, 2, -2} {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: acks, Partitions: []ProducePartition{
			{Topic: "t", Partition: 0, Records: batch(t, kbatch.CodecNone, 0, 1, -1, -1)},
			{Topic: "t", Partition: 1, Records: batch(t, kbatch.CodecNone, 0, 1, -1, -1)},
		}})
		require.NoError(t, err)
		require.Len(t, resp.Partitions, 2)
		for _, p := range resp.Partitions {
			require.Equal(t, kafkaerr.InvalidRequiredAcks, p.ErrorCode, "acks %d", acks)
			require.Equal(t, kafkaerr.InvalidRequiredAcks, kafkaerr.CodeOf(p.Err))
			require.Equal(t, int64(-1), p.BaseOffset)
		}
	}
	for p := range int32(2) {
		lo, err := b.ListOffsets(ctx, "t", p, LatestTimestamp)
		require.NoError(t, err)
		require.Equal(t, int64(0), lo.Offset, "nothing appended")
	}
}

// TestCallsAfterClose: every call on a closed Broker returns ErrClosed.
func TestCallsAfterClose(t *testing.T) {
	ctx := t.Context()
	b, err := Open(ctx, &Config{})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "t", TopicConfig{})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close twice")

	calls := map[string]func(context.Context) error{
		"CreateTopic": func(ctx context.Context) error { _, err := b.CreateTopic(ctx, "u", TopicConfig{}); return err },
		"DeleteTopic": func(ctx context.Context) error { return b.DeleteTopic(ctx, "t") },
		"DescribeTopics": func(ctx context.Context) error {
			_, err := b.DescribeTopics(ctx)
			return err
		},
		"Produce": func(ctx context.Context) error {
			_, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 1, -1, -1)}}})
			return err
		},
		"Fetch": func(ctx context.Context) error {
			_, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t"}}})
			return err
		},
		"ListOffsets": func(ctx context.Context) error {
			_, err := b.ListOffsets(ctx, "t", 0, LatestTimestamp)
			return err
		},
		"DeleteRecords": func(ctx context.Context) error {
			_, err := b.DeleteRecords(ctx, "t", 0, 0)
			return err
		},
		"InitProducerID": func(ctx context.Context) error {
			_, _, err := b.InitProducerID(ctx)
			return err
		},
		"CollectOrphans": func(ctx context.Context) error {
			_, err := b.CollectOrphans(ctx)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call(ctx), ErrClosed)
		})
	}
}
