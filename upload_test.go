package diskless

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// TestUploadObjectAppendEncode: the upload path encodes with
// wal.AppendEncode; the object it puts (and returns, for the cache) is
// byte for byte what Encode writes, with the same coordinates, for
// batches of many partitions that arrived out of partition order.
func TestUploadObjectAppendEncode(t *testing.T) {
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	b, err := Open(context.Background(), &Config{Bucket: bucket, MetadataLog: MetadataInMemory})
	require.NoError(t, err)
	defer b.Close()

	obj := wal.NewObject("wal/test-object")
	topics := []uuid.UUID{uuid.New(), uuid.New()}
	for i := range 40 {
		p := int32((i * 7) % 13)
		tp := wal.TopicPartition{TopicID: topics[i%2], Partition: p}
		obj.Add(&wal.Request{Batches: []wal.Batch{{TopicPartition: tp, Data: kbatch.Batch(batch(t, kbatch.CodecNone, i, 1+i%3, -1, 0))}}})
	}
	var want bytes.Buffer
	wantCoords, err := obj.Encode(&want, nil)
	require.NoError(t, err)

	data, coords, err := b.uploadObject(t.Context(), obj)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), data)
	require.Equal(t, wantCoords, coords)
	stored, err := bucket.ReadAll(t.Context(), obj.Key())
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), stored)
}
