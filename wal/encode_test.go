package wal_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// TestEncodeDecode: Encode refuses a batch whose framing is not valid and
// appends nothing; Decode gives back the batches Encode packed, and
// refuses an object that does not match its coordinates.
func TestEncodeDecode(t *testing.T) {
	tp := wal.TopicPartition{TopicID: uuid.New(), Partition: 3}
	b := kbatch.NewBuilder(kbatch.CodecLZ4)
	b.Append(1, []byte("k"), []byte("v"))
	good, err := b.Batch()
	require.NoError(t, err)

	out, coords, err := wal.Encode([]byte("x"), []wal.Batch{{TopicPartition: tp, Data: good}, {TopicPartition: tp, Data: good[:20]}})
	require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err))
	require.Equal(t, []byte("x"), out)
	require.Nil(t, coords)

	obj, coords, err := wal.Encode(nil, []wal.Batch{{TopicPartition: tp, Data: good}, {TopicPartition: tp, Data: good}})
	require.NoError(t, err)
	got, err := wal.Decode(obj, coords)
	require.NoError(t, err)
	require.Equal(t, []wal.Batch{{TopicPartition: tp, Data: good}, {TopicPartition: tp, Data: good}}, got)

	obj[len(obj)-1] ^= 1
	_, err = wal.Decode(obj, coords)
	require.ErrorIs(t, err, wal.ErrCorrupt)
}
