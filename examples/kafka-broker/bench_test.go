package main

import (
	"context"
	"flag"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

var (
	benchFor    = flag.Duration("bench.for", 15*time.Second, "how long each run of BenchmarkOneProducer produces")
	benchBefore = flag.String("bench.before", os.Getenv("KAFKA_BROKER_BEFORE"), "a broker binary to measure beside this one (an older build), as the sub-benchmark before")
)

// BenchmarkOneProducer is the example broker's throughput target
// (BENCHMARKS.md, "One producer connection, one partition"): one producer
// connection (franz-go's defaults: idempotent, acks all, up to five
// requests in flight), one partition, 1 KiB records, the broker's
// default linger (250 ms) over the s3-standard store profile (PUT p50 100
// ms, p99 400 ms, the bucket metadata log too). It produces for
// -bench.for and reports records/s. With -bench.before (or
// KAFKA_BROKER_BEFORE) naming another broker binary, that one runs as
// the sub-benchmark "before" in the same run, each count alternating.
//
//	go test -run '^$' -bench OneProducer -benchtime 1x -count 3 ./examples/kafka-broker -bench.before /tmp/kafka-broker-main
func BenchmarkOneProducer(b *testing.B) {
	bins := []struct{ name, bin string }{{"after", brokerBin}}
	if *benchBefore != "" {
		bins = append([]struct{ name, bin string }{{"before", *benchBefore}}, bins...)
	}
	for _, bb := range bins {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(produceFor(b, bb.bin, *benchFor), "records/s")
			}
		})
	}
}

// produceFor starts the broker binary bin with the s3-standard profile,
// produces 1 KiB records to one partition with one franz-go producer for
// d, and returns the records acknowledged per second.
func produceFor(b *testing.B, bin string, d time.Duration) float64 {
	old := brokerBin
	brokerBin = bin
	defer func() { brokerBin = old }()
	p := startBroker(b, "-store-profile", "s3-standard", "-linger", "250ms", "-log-level", "info")
	admin, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	require.NoError(b, err)
	defer admin.Close()
	kafkatest.CreateTopic(b, admin, "bench", 1, nil)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("bench"))
	require.NoError(b, err)
	defer prod.Close()
	value := make([]byte, 1024)
	var acked atomic.Int64
	ctx, cancel := context.WithTimeout(b.Context(), d)
	defer cancel()
	start := time.Now()
	for ctx.Err() == nil {
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err == nil && time.Since(start) <= d {
				acked.Add(1)
			}
		})
	}
	elapsed := time.Since(start)
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	_ = prod.Flush(fctx)
	return float64(acked.Load()) / elapsed.Seconds()
}

var benchCommits = flag.Int("bench.commits", 300, "how many OffsetCommit requests each run of BenchmarkOffsetCommit sends")

// BenchmarkOffsetCommit is the example broker's commit latency target
// (BENCHMARKS.md, "OffsetCommit p99"): a consumer's
// synchronous OffsetCommit (one partition, kadm's request: generation -1,
// as a client outside a group commits), one at a time, against the
// broker with its defaults (linger 250 ms, the metadata log in the
// bucket, a file:// folder) and with -metadata-log file. It reports the p50 and p99 in ms.
// -bench.before runs an older build beside it, as for BenchmarkOneProducer.
//
//	go test -run '^$' -bench OffsetCommit -benchtime 1x -count 3 ./examples/kafka-broker -bench.before /tmp/kafka-broker-main
func BenchmarkOffsetCommit(b *testing.B) {
	bins := []struct{ name, bin string }{{"after", brokerBin}}
	if *benchBefore != "" {
		bins = append([]struct{ name, bin string }{{"before", *benchBefore}}, bins...)
	}
	for _, bb := range bins {
		for _, mlog := range []string{"bucket", "file"} {
			b.Run(bb.name+"/metadata-log="+mlog, func(b *testing.B) {
				for b.Loop() {
					p50, p99 := commitLatency(b, bb.bin, mlog, *benchCommits)
					b.ReportMetric(p50, "p50-ms")
					b.ReportMetric(p99, "p99-ms")
				}
			})
		}
	}
}

// commitLatency starts the broker binary bin with -metadata-log mlog,
// commits n times in a row and returns the p50 and p99 of the commits'
// latency in ms.
func commitLatency(b *testing.B, bin, mlog string, n int) (p50, p99 float64) {
	old := brokerBin
	brokerBin = bin
	defer func() { brokerBin = old }()
	p := startBroker(b, "-metadata-log", mlog, "-linger", "250ms", "-log-level", "warn") // the default linger
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	require.NoError(b, err)
	defer cl.Close()
	kafkatest.CreateTopic(b, cl, "bench", 1, nil)
	adm := kadm.NewClient(cl)
	ctx := b.Context()
	lat := make([]float64, 0, n)
	for i := range n + 10 {
		var offs kadm.Offsets
		offs.AddOffset("bench", 0, int64(i), -1)
		start := time.Now()
		resp, err := adm.CommitOffsets(ctx, "bench-group", offs)
		require.NoError(b, err)
		require.NoError(b, resp.Error())
		if i >= 10 { // the first find the coordinator
			lat = append(lat, float64(time.Since(start).Microseconds())/1000)
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
