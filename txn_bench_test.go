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
// entries alike). With one shard a transaction is added in one log entry
// and ended in one; "4-shards" spreads 4 partitions over 4 coordinator
// shards and writes one batch to each in one produce: its end is two
// phases (PREPARE, the markers in each shard at once, Complete).
func BenchmarkTransactions(b *testing.B) {
	for _, bc := range []struct {
		name    string
		profile string
		shards  int
	}{{"mem", "", 1}, {"s3-express", "s3-express", 1}, {"s3-express-4-shards", "s3-express", 4}} {
		b.Run(bc.name, func(b *testing.B) {
			bucket := memblob.OpenBucket(nil)
			if bc.profile != "" {
				p, err := faultbucket.NamedProfile(bc.profile)
				require.NoError(b, err)
				bucket, _, err = faultbucket.Wrap(bucket, &faultbucket.Options{Profile: p, Seed: 1})
				require.NoError(b, err)
			}
			br, err := Open(context.Background(), &Config{Bucket: bucket, Linger: 5 * time.Millisecond, DataDir: b.TempDir(), Shards: bc.shards})
			require.NoError(b, err)
			defer br.Close()
			ctx := context.Background()
			_, err = br.CreateTopic(ctx, "t", TopicConfig{Partitions: int32(bc.shards)})
			require.NoError(b, err)
			var parts []TxnPartition
			for p := range int32(bc.shards) {
				parts = append(parts, TxnPartition{"t", p})
			}
			pid, epoch, err := br.InitTxnProducer(ctx, "bench", time.Minute, -1, -1)
			require.NoError(b, err)
			var add, produce, end time.Duration
			seq := int32(0)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := br.AddTxnPartitions(ctx, "bench", pid, epoch, parts); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				req := ProduceRequest{Acks: -1}
				for _, p := range parts {
					req.Partitions = append(req.Partitions, ProducePartition{Topic: "t", Partition: p.Partition, Records: txnBatch(b, 0, 10, pid, epoch, seq)})
				}
				resp, err := br.Produce(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range resp.Partitions {
					if r.ErrorCode != kafkaerr.NoError {
						b.Fatal(r.Err)
					}
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
