package kafkaerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

func TestCodes(t *testing.T) {
	require.Equal(t, "CORRUPT_MESSAGE", kafkaerr.CorruptMessage.String())
	require.Equal(t, "NOT_LEADER_OR_FOLLOWER", kafkaerr.NotLeaderOrFollower.String())
	require.Equal(t, "NONE", kafkaerr.NoError.String())
	require.Equal(t, "ERROR_999", kafkaerr.Code(999).String())
	require.True(t, kafkaerr.NotLeaderOrFollower.Retriable())
	require.True(t, kafkaerr.KafkaStorageError.Retriable())
	require.False(t, kafkaerr.InvalidRecord.Retriable())
	require.False(t, kafkaerr.Code(999).Retriable())
	require.Equal(t, kafkaerr.Code(6), kafkaerr.NotLeaderOrFollower)
	require.Equal(t, kafkaerr.Code(90), kafkaerr.ProducerFenced)
}

func TestError(t *testing.T) {
	cause := errors.New("disk on fire")
	err := fmt.Errorf("committing: %w", kafkaerr.Wrap(kafkaerr.KafkaStorageError, cause, "upload failed"))
	require.Equal(t, kafkaerr.KafkaStorageError, kafkaerr.CodeOf(err))
	require.ErrorIs(t, err, kafkaerr.ErrKafkaStorageError)
	require.NotErrorIs(t, err, kafkaerr.ErrCorruptMessage)
	require.ErrorIs(t, err, cause)
	require.Equal(t, "committing: kafka: KAFKA_STORAGE_ERROR: upload failed: disk on fire", err.Error())
	require.Equal(t, kafkaerr.NoError, kafkaerr.CodeOf(nil))
	require.Equal(t, kafkaerr.UnknownServerError, kafkaerr.CodeOf(cause))

	many := &kafkaerr.Error{Code: kafkaerr.InvalidRecord, Message: "m", RecordErrors: []kafkaerr.RecordError{
		{BatchIndex: 0, Message: "a"}, {BatchIndex: 1, Message: "b"}, {BatchIndex: 2, Message: "c"}, {BatchIndex: 5, Message: "d"}}}
	require.Equal(t, "kafka: INVALID_RECORD: m; record 0: a; record 1: b; record 2: c (and 1 more)", many.Error())
	require.False(t, many.Retriable())
}

// A broker puts the code of whatever error a request got into its
// response.
func ExampleCodeOf() {
	err := kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic %q", "orders")
	code := kafkaerr.CodeOf(fmt.Errorf("produce: %w", err))
	fmt.Println(int16(code), code, code.Retriable())
	// Output: 3 UNKNOWN_TOPIC_OR_PARTITION true
}
