package diskless

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/faultbucket"
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

	data, coords := b.encodeObject(obj)
	require.NoError(t, b.uploadObject(t.Context(), obj, data))
	require.Equal(t, want.Bytes(), data)
	require.Equal(t, wantCoords, coords)
	stored, err := bucket.ReadAll(t.Context(), obj.Key())
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), stored)
}

// TestOpenMetadataLog: Config.OpenMetadataLog opens each shard's log in
// place of MetadataLog, and the Broker commits to it.
func TestOpenMetadataLog(t *testing.T) {
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	var logs []*metalog.Mem
	b, err := Open(context.Background(), &Config{Bucket: bucket, Shards: 2, Linger: time.Millisecond,
		OpenMetadataLog: func(ctx context.Context, shard int) (metalog.Log, error) {
			require.Equal(t, len(logs), shard)
			l := metalog.NewMem(nil)
			logs = append(logs, l)
			return l, nil
		}})
	require.NoError(t, err)
	require.Len(t, logs, 2)
	_, err = b.CreateTopic(t.Context(), "t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	resp, err := b.Produce(t.Context(), ProduceRequest{Acks: -1, Partitions: []ProducePartition{
		{Topic: "t", Partition: 0, Records: batch(t, kbatch.CodecNone, 0, 3, -1, 0)},
		{Topic: "t", Partition: 1, Records: batch(t, kbatch.CodecNone, 0, 3, -1, 0)},
	}})
	require.NoError(t, err)
	for _, p := range resp.Partitions {
		require.NoError(t, p.Err)
	}
	require.NoError(t, b.Close())
	for i, l := range logs {
		require.Greater(t, l.End(), int64(0), "shard %d's log holds its entries", i)
	}
}

// TestMetadataLogHedges: a metadata-log put that does not answer is sent
// again once the log has learned its hedge delay, and Stats counts it;
// every produce is answered, and the records read back once each.
func TestMetadataLogHedges(t *testing.T) {
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	metaInner := memblob.OpenBucket(nil)
	defer metaInner.Close()
	meta, _, err := faultbucket.Wrap(metaInner, &faultbucket.Options{
		Profile: faultbucket.Profile{Name: "one PUT slow", Ops: [faultbucket.NumOps]faultbucket.OpFaults{faultbucket.Put: {Latency: &slowCall{n: 12}}}},
	})
	require.NoError(t, err)
	defer meta.Close()
	b, err := Open(context.Background(), &Config{Bucket: inner, MetadataBucket: meta, Linger: time.Millisecond})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	const requests = 16
	for i := range requests {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{
			{Topic: "t", Partition: 0, Records: batch(t, kbatch.CodecNone, i*10, 10, -1, 0)},
		}})
		require.NoError(t, err, "answered, although one log put never answers")
		require.NoError(t, resp.Partitions[0].Err)
		require.Equal(t, int64(i*10), resp.Partitions[0].BaseOffset)
	}
	s := b.Stats()
	require.Equal(t, int64(1), s.MetadataLogHedges)
	require.Equal(t, int64(1), s.MetadataLogHedgeWins)
	f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 0, Offset: 0}}, MaxBytes: 1 << 20})
	require.NoError(t, err)
	got := records(t, f.Partitions[0].Records)
	require.Len(t, got, requests*10, "every record once")
	for i := range int64(requests * 10) {
		require.Equal(t, fmt.Sprintf("value-%d", i), got[i])
	}
	require.NoError(t, b.Close()) // waits for the cancelled put
}
