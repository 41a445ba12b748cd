package diskless

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// fetchAllFrom reads a partition from offset to its high watermark, one
// fetch after another.
func fetchAllFrom(t *testing.T, b *Broker, topic string, partition int32, from int64) []byte {
	t.Helper()
	var out []byte
	for {
		f, err := b.Fetch(t.Context(), FetchRequest{Partitions: []FetchPartition{{Topic: topic, Partition: partition, Offset: from, MaxBytes: 64 << 10}}})
		require.NoError(t, err)
		r := f.Partitions[0]
		require.NoError(t, r.Err)
		if from >= r.HighWatermark {
			return out
		}
		require.NotEmpty(t, r.Records, "a fetch at %d below the high watermark %d", from, r.HighWatermark)
		out = append(out, r.Records...)
		from = kbatch.LastOffset(r.Records) + 1
	}
}

// TestBrokerOffload: a broker with Offload tiers closed segments; a
// consumer reading from offset 0 then gets exactly the bytes it got
// before, from tiered segments, the local log and WAL objects; the WAL
// objects below the tiered data are deleted; ListOffsets by time finds
// records in tiered segments; a restart without the data folder serves
// the same bytes.
func TestBrokerOffload(t *testing.T) {
	ctx := t.Context()
	bucketDir := t.TempDir()
	cfg := &Config{BucketURL: "file://" + bucketDir, Linger: 2 * time.Millisecond, DeletionGrace: 100 * time.Millisecond}
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 2, Retention: -1, SegmentBytes: 2 << 10})
	require.NoError(t, err)
	stamps := map[int64]int64{} // offset -> timestamp of partition 0's records
	for i := range 60 {
		for p := range int32(2) {
			resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: p, Records: batch(t, kbatch.CodecZstd, i*10, 10, -1, 0)}}})
			require.NoError(t, err)
			require.NoError(t, resp.Partitions[0].Err)
		}
	}
	before := [2][]byte{fetchAllFrom(t, b, "t", 0, 0), fetchAllFrom(t, b, "t", 1, 0)}
	it := kbatch.NewBatchIter(before[0])
	var rr kbatch.RecordReader
	for it.Next() {
		require.NoError(t, rr.Reset(it.Batch()))
		for rr.Next() {
			stamps[rr.Record().Offset] = rr.Record().Timestamp
		}
	}
	objectsBefore := len(walKeys(t, mustOpenBucket(t, cfg.BucketURL), ""))
	require.NoError(t, b.Close())

	// A local retention of 1 ns: offloaded segments leave the local log at
	// once, so reads below the diskless start go to tiered segments.
	cfg.Offload, cfg.OffloadInterval, cfg.DataDir, cfg.LocalRetention = true, 50*time.Millisecond, t.TempDir(), time.Nanosecond
	b, err = Open(ctx, cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Stats().Offloaded >= 6 }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { // the local retention runs after a catch-up
		_, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 0}}})
		require.NoError(t, err)
		return b.Stats().ReadsTiered > 0
	}, 30*time.Second, 20*time.Millisecond)
	for p := range int32(2) {
		require.Equal(t, before[p], fetchAllFrom(t, b, "t", p, 0), "partition %d: the same bytes after offload", p)
	}
	s := b.Stats()
	require.Positive(t, s.ReadsTiered, "%+v", s)
	require.Positive(t, s.ReadsLocal, "%+v", s)
	require.Eventually(t, func() bool {
		return len(walKeys(t, mustOpenBucket(t, cfg.BucketURL), "")) < objectsBefore
	}, 30*time.Second, 20*time.Millisecond, "WAL objects wholly tiered are deleted")

	// ListOffsets by time, answered from a tiered segment.
	lo, err := b.ListOffsets(ctx, "t", 0, stamps[25])
	require.NoError(t, err)
	require.LessOrEqual(t, lo.Offset, int64(25))
	require.Equal(t, stamps[lo.Offset], lo.Timestamp)
	require.GreaterOrEqual(t, lo.Timestamp, stamps[25])

	// DeleteRecords into tiered data.
	_, err = b.DeleteRecords(ctx, "t", 1, 55)
	require.NoError(t, err)
	f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 1, Offset: 10}}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.OffsetOutOfRange, f.Partitions[0].ErrorCode)
	got := fetchAllFrom(t, b, "t", 1, 55)
	require.Equal(t, before[1][len(before[1])-len(got):], got)
	require.NoError(t, b.Close())

	// A new broker, its data folder gone: the same bytes.
	require.NoError(t, os.RemoveAll(cfg.DataDir))
	b, err = Open(ctx, cfg)
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, before[0], fetchAllFrom(t, b, "t", 0, 0))
	got = fetchAllFrom(t, b, "t", 1, 55)
	require.Equal(t, before[1][len(before[1])-len(got):], got)
}

func mustOpenBucket(t *testing.T, url string) *blob.Bucket {
	bucket, err := blob.OpenBucket(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { bucket.Close() })
	return bucket
}
