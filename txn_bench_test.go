package diskless

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/kafkaerr"
)

// BenchmarkTransactions measures one transactional producer, one
// transaction after another, each AddTxnPartitions, one batch of 10
// records, EndTxn(commit): transactions a second, and the time of each
// step, beside which the Produce is the reference (a plain produce of
// the same batch costs the same). "mem" is a bucket with no latency (the
// coordinator's own cost); "s3-express" has faultbucket's S3 Express One
// Zone profile on every PUT and GET (WAL objects and metadata-log
// entries alike).
func BenchmarkTransactions(b *testing.B) {
	for _, profile := range []string{"mem", "s3-express"} {
		b.Run(profile, func(b *testing.B) {
			bucket := memblob.OpenBucket(nil)
			if profile != "mem" {
				p, err := faultbucket.NamedProfile(profile)
				require.NoError(b, err)
				bucket, _, err = faultbucket.Wrap(bucket, &faultbucket.Options{Profile: p, Seed: 1})
				require.NoError(b, err)
			}
			br, err := Open(context.Background(), &Config{Bucket: bucket, Linger: 5 * time.Millisecond, DataDir: b.TempDir()})
			require.NoError(b, err)
			defer br.Close()
			ctx := context.Background()
			_, err = br.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
			require.NoError(b, err)
			pid, epoch, err := br.InitTxnProducer(ctx, "bench", time.Minute, -1, -1)
			require.NoError(b, err)
			var add, produce, end time.Duration
			seq := int32(0)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := br.AddTxnPartitions(ctx, "bench", pid, epoch, []TxnPartition{{"t", 0}}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				r := produceOne(b, br, "t", 0, txnBatch(b, 0, 10, pid, epoch, seq))
				if r.ErrorCode != kafkaerr.NoError {
					b.Fatal(r.Err)
				}
				seq += 10
				t2 := time.Now()
				if err := br.EndTxn(ctx, "bench", pid, epoch, true); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				add, produce, end = add+t1.Sub(t0), produce+t2.Sub(t1), end+t3.Sub(t2)
			}
			n := float64(b.N)
			total := add + produce + end
			b.ReportMetric(n/total.Seconds(), "txn/s")
			b.ReportMetric(float64(add.Microseconds())/n/1000, "add-ms")
			b.ReportMetric(float64(produce.Microseconds())/n/1000, "produce-ms")
			b.ReportMetric(float64(end.Microseconds())/n/1000, "endtxn-ms")
		})
	}
}
