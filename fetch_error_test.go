package diskless

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestFetchErrorAnswersAtOnce checks that a long poll with a partition in
// error is answered at once, as Kafka's is: a consumer below the log start
// offset learns it is out of range without waiting MaxWait.
func TestFetchErrorAnswersAtOnce(t *testing.T) {
	b := openTest(t, nil)
	ctx := t.Context()
	_, err := b.CreateTopic(ctx, "t", TopicConfig{})
	require.NoError(t, err)
	bld := kbatch.NewBuilder(kbatch.CodecNone)
	for range 4 {
		bld.Append(time.Now().UnixMilli(), nil, []byte("v"))
	}
	batch, err := bld.Build(nil)
	require.NoError(t, err)
	_, err = b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch}}})
	require.NoError(t, err)
	_, err = b.DeleteRecords(ctx, "t", 0, 2)
	require.NoError(t, err)

	for _, p := range []FetchPartition{{Topic: "t", Offset: 0}, {Topic: "missing"}} {
		// Answered at once, not after MaxWait: an hour outlasts the test.
		resp, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{p}, MinBytes: 1, MaxWait: time.Hour})
		require.NoError(t, err)
		require.NotEqual(t, kafkaerr.NoError, resp.Partitions[0].ErrorCode)
	}
}
