package diskless

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// BenchmarkCompact: one million updates of 10,000 keys (100-byte values,
// 1,000 records a batch, uncompressed) in one partition of a compacted
// topic, then one CompactPartition: its throughput (MB/s of batches
// read; beside it, as the reference, a consumer's Fetch of the same
// batches), and the bytes a consumer reads from the start before and
// after.
func BenchmarkCompact(b *testing.B) {
	const updates, keys, perBatch = 1_000_000, 10_000, 1_000
	value := make([]byte, 100)
	for b.Loop() {
		b.StopTimer()
		ctx := context.Background()
		br, err := Open(ctx, &Config{Linger: time.Millisecond, DataDir: b.TempDir(), CompactInterval: -1})
		require.NoError(b, err)
		_, err = br.CreateTopic(ctx, "c", TopicConfig{Partitions: 1, Compact: true, Retention: -1})
		require.NoError(b, err)
		for i := 0; i < updates; i += perBatch {
			require.Equal(b, 0, int(produceOne(b, br, "c", 0, updateBatch(b, i, perBatch, keys, value)).ErrorCode))
		}
		_, tp, err := br.partition(ctx, "c", 0)
		require.NoError(b, err)
		readStart := time.Now()
		before := consumedBytes(b, br)
		readTook := time.Since(readStart)
		b.StartTimer()
		start := time.Now()
		st, err := br.CompactPartition(ctx, tp)
		took := time.Since(start)
		b.StopTimer()
		require.NoError(b, err)
		require.True(b, st.Cleaned)
		after := consumedBytes(b, br)
		b.ReportMetric(float64(st.BytesRead)/1e6/took.Seconds(), "MB/s-read")
		// The reference, in the same run: a consumer reading the same
		// batches from the start through Fetch.
		b.ReportMetric(float64(before)/1e6/readTook.Seconds(), "MB/s-fetch")
		b.ReportMetric(float64(before)/(1<<20), "MiB-before")
		b.ReportMetric(float64(after)/(1<<20), "MiB-after")
		require.NoError(b, br.Close())
		b.StartTimer()
	}
}

// updateBatch is a batch of the updates from the first on, n of them, to
// keys keys ("key-%05d", the update's number modulo keys), each with value.
func updateBatch(tb testing.TB, first, n, keys int, value []byte) []byte {
	bld := kbatch.NewBuilder(kbatch.CodecNone)
	for j := first; j < first+n; j++ {
		bld.Append(time.Now().UnixMilli(), fmt.Appendf(nil, "key-%05d", j%keys), value)
	}
	data, err := bld.Build(nil)
	require.NoError(tb, err)
	return data
}

// consumedBytes reads partition 0 of "c" from the start and returns the
// bytes a consumer gets.
func consumedBytes(b *testing.B, br *Broker) int64 {
	var n int64
	for off := int64(0); ; {
		f := fetchOne(b, br, "c", 0, off, false)
		if len(f.Records) == 0 {
			return n
		}
		n += int64(len(f.Records))
		off = kbatch.LastOffset(f.Records) + 1
	}
}
