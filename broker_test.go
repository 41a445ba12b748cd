package diskless

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestMain runs the tests, or the child of the crash test, of
// TestClusterProcesses, of TestCompactCrash or of TestDataDirLock when its
// environment variable says so.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if raw := os.Getenv(clusterChildEnv); raw != "" {
		clusterChild(raw)
		return
	}
	if raw := os.Getenv(compactCrashEnv); raw != "" {
		compactCrashChild(raw)
		return
	}
	if dir := os.Getenv(lockEnv); dir != "" {
		lockChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

func openTest(t testing.TB, cfg *Config) *Broker {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.Linger == 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	b, err := Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// batch builds a producer batch of n records "key-i"/"value-i".
func batch(t testing.TB, codec kbatch.Codec, first, n int, producer int64, seq int32) []byte {
	b := kbatch.NewBuilder(codec)
	if producer >= 0 {
		b.SetProducer(producer, 0, seq)
	}
	for i := first; i < first+n; i++ {
		b.Append(time.Now().UnixMilli(), []byte(fmt.Sprintf("key-%d", i)), []byte(fmt.Sprintf("value-%d", i)),
			kbatch.Header{Key: "h", Value: []byte{byte(i)}})
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

// records reads every record of fetched batches: offset -> value.
func records(t testing.TB, data []byte) map[int64]string {
	out := map[int64]string{}
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		require.NoError(t, it.Batch().CheckCRC())
		require.NoError(t, rr.Reset(it.Batch()))
		for rr.Next() {
			out[rr.Record().Offset] = string(rr.Record().Value)
		}
		require.NoError(t, rr.Err())
	}
	require.NoError(t, it.Err())
	return out
}

// bucketKinds are the buckets the facade's tests run over: memory, a
// folder, and a real S3 server over HTTP.
func bucketKinds(t *testing.T) map[string]func(t *testing.T) *Config {
	return map[string]func(t *testing.T) *Config{
		"mem":  func(t *testing.T) *Config { return &Config{} },
		"file": func(t *testing.T) *Config { return &Config{BucketURL: "file://" + t.TempDir()} },
		"s3": func(t *testing.T) *Config {
			return &Config{Bucket: s3test.Start(t).Bucket(t, "broker")}
		},
	}
}

func TestProduceFetch(t *testing.T) {
	for name, cfg := range bucketKinds(t) {
		t.Run(name, func(t *testing.T) { testProduceFetch(t, openTest(t, cfg(t))) })
	}
}

func testProduceFetch(t *testing.T, b *Broker) {
	ctx := t.Context()
	_, err := b.CreateTopic(ctx, "orders", TopicConfig{Partitions: 3})
	require.NoError(t, err)
	pid, _, err := b.InitProducerID(ctx)
	require.NoError(t, err)

	for i := 0; i < 5; i++ {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{
			{Topic: "orders", Partition: 1, Records: batch(t, kbatch.CodecZstd, i*10, 10, pid, int32(i*10))},
		}})
		require.NoError(t, err)
		r := resp.Partitions[0]
		require.NoError(t, r.Err)
		require.Equal(t, int64(i*10), r.BaseOffset)
	}
	f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "orders", Partition: 1, Offset: 15}}})
	require.NoError(t, err)
	p := f.Partitions[0]
	require.NoError(t, p.Err)
	require.Equal(t, int64(50), p.HighWatermark)
	got := records(t, p.Records)
	require.Len(t, got, 40, "from the batch holding offset 15")
	for o := int64(10); o < 50; o++ {
		require.Equal(t, fmt.Sprintf("value-%d", o), got[o])
	}
	// An idempotent retry is not stored twice.
	resp, err := b.Produce(ctx, ProduceRequest{Acks: 1, Partitions: []ProducePartition{
		{Topic: "orders", Partition: 1, Records: batch(t, kbatch.CodecZstd, 40, 10, pid, 40)},
	}})
	require.NoError(t, err)
	require.Equal(t, int64(40), resp.Partitions[0].BaseOffset)
	lo, err := b.ListOffsets(ctx, "orders", 1, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(50), lo.Offset)

	_, err = b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "orders", Partition: 1, Offset: 51}}})
	require.NoError(t, err)
	f, _ = b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "orders", Partition: 1, Offset: 51}}})
	require.Equal(t, kafkaerr.OffsetOutOfRange, f.Partitions[0].ErrorCode)
	s := b.Stats()
	require.Positive(t, s.Objects)
	require.Positive(t, s.Store["PUT"].Calls)
}
