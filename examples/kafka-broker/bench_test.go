package main

import (
	"context"
	"flag"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

var (
	benchFor    = flag.Duration("bench.for", 15*time.Second, "how long each run of BenchmarkOneProducer produces")
	benchBefore = flag.String("bench.before", os.Getenv("KAFKA_BROKER_BEFORE"), "a broker binary to measure beside this one (an older build), as the sub-benchmark before")
)

// BenchmarkOneProducer is issue 23's throughput target: one producer
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
