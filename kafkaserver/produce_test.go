package kafkaserver

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestProduceConsumeCodecs produces with an idempotent franz-go producer
// in each codec and consumes everything back: every record in order in its
// partition, at consecutive offsets, with its key, value, headers and
// timestamp, in batches of the codec it was produced in.
func TestProduceConsumeCodecs(t *testing.T) {
	p := startBroker(t, nil)
	admin := p.client(t)
	const records, partitions = 300, 3
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
		attr  uint8 // the batch attribute's codec
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			topic := "codec-" + tc.name
			kafkatest.CreateTopic(t, admin, topic, partitions, nil)
			prod := p.client(t, kgo.ProducerBatchCompression(tc.codec), kgo.ProducerLinger(5*time.Millisecond),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			want := make([]*kgo.Record, records)
			var got kafkatest.Acked
			for i := range want {
				want[i] = &kgo.Record{
					Partition: int32(i % partitions),
					Key:       []byte("key-" + strconv.Itoa(i)),
					Value:     fmt.Appendf(nil, "value %d %s", i, tc.name),
					Headers:   []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}, {Key: "codec", Value: []byte(tc.name)}},
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				}
				prod.Produce(t.Context(), want[i], got.Done)
			}
			require.NoError(t, prod.Flush(t.Context()))
			require.Empty(t, got.Errors())
			require.Len(t, got.Records(), records)

			rs := kafkatest.ConsumeAll(t, p.addr, topic, records)
			parts := kafkatest.ByPartition(rs)
			require.Len(t, parts, partitions)
			for part, prs := range parts {
				for j, r := range prs {
					i := j*partitions + int(part)
					w := want[i]
					require.Equal(t, int64(j), r.Offset, "partition %d", part)
					require.Equal(t, w.Key, r.Key)
					require.Equal(t, w.Value, r.Value)
					require.Equal(t, w.Headers, r.Headers)
					require.Equal(t, w.Timestamp.UnixMilli(), r.Timestamp.UnixMilli())
					require.Equal(t, tc.attr, uint8(r.Attrs.CompressionType()), "codec of the batch of offset %d", r.Offset)
					require.Equal(t, w.Offset, r.Offset, "acknowledged offset of record %d", i)
					require.NotEqual(t, int64(-1), r.ProducerID, "an idempotent producer's batch")
				}
			}
		})
	}
}
