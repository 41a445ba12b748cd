package diskless

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// readValues reads partition p of topic from offset 0 to its high
// watermark, as a consumer does, and returns each record's value, indexed
// by offset: it checks every batch's CRC and that the offsets are
// contiguous from 0. A fetch error that Kafka marks retriable is retried
// for up to patience (0: no error is allowed).
func readValues(t *testing.T, b *Broker, topic string, p int32, patience time.Duration) [][]byte {
	t.Helper()
	var values [][]byte
	for {
		next := int64(len(values))
		var r PartitionFetchResponse
		deadline := time.Now().Add(patience)
		for {
			f, err := b.Fetch(t.Context(), FetchRequest{Partitions: []FetchPartition{{Topic: topic, Partition: p, Offset: next, MaxBytes: 1 << 20}}})
			code := kafkaerr.CodeOf(err)
			if err == nil {
				r = f.Partitions[0]
				code, err = r.ErrorCode, r.Err
			}
			if code == kafkaerr.NoError {
				break
			}
			require.True(t, patience > 0 && code.Retriable() && time.Now().Before(deadline),
				"partition %d: fetch at %d: %v %v", p, next, code, err)
			time.Sleep(10 * time.Millisecond)
		}
		if next >= r.HighWatermark {
			return values
		}
		it := kbatch.NewBatchIter(r.Records)
		var rr kbatch.RecordReader
		for it.Next() {
			require.NoError(t, it.Batch().CheckCRC())
			require.NoError(t, rr.Reset(it.Batch()))
			for rr.Next() {
				x := rr.Record()
				if x.Offset < next {
					continue // the batch began before the offset asked
				}
				require.Equal(t, next, x.Offset, "partition %d: offsets unique and increasing, no gaps", p)
				values = append(values, bytes.Clone(x.Value)) // x.Value is the reader's buffer
				next++
			}
			require.NoError(t, rr.Err())
		}
		require.NoError(t, it.Err())
	}
}
