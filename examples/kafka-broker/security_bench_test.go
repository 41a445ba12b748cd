package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// BenchmarkSecurity is the cost of TLS and SASL_SSL against plaintext,
// in one run: a broker process per mode (a file:// bucket, linger 5 ms),
// one franz-go producer (acks all, idempotent) writing 16 KiB records to
// one partition for -bench.for, then one consumer reading them all back.
// It reports produce and fetch MB/s; BENCHMARKS.md gives each secured
// figure as a ratio to the plaintext one of the same run.
//
//	go test -run '^$' -bench Security -benchtime 1x -count 3 ./examples/kafka-broker -bench.for 10s
func BenchmarkSecurity(b *testing.B) {
	pki := newTestPKI(b)
	for _, mode := range []string{"plaintext", "ssl", "sasl_ssl"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				prod, fetch := securityThroughput(b, pki, mode, *benchFor)
				b.ReportMetric(prod, "produce-MB/s")
				b.ReportMetric(fetch, "fetch-MB/s")
			}
		})
	}
}

// securityThroughput produces for d and then consumes, through a broker
// in the given mode, and returns MB/s of each.
func securityThroughput(b *testing.B, pki *testPKI, mode string, d time.Duration) (produceMBps, fetchMBps float64) {
	var args []string
	var opts []kgo.Opt
	switch mode {
	case "ssl":
		args = []string{"-tls-cert", pki.certFile, "-tls-key", pki.keyFile}
		opts = []kgo.Opt{kgo.DialTLSConfig(pki.clientTLS())}
	case "sasl_ssl":
		args = []string{"-tls-cert", pki.certFile, "-tls-key", pki.keyFile, "-sasl-mechanisms", "SCRAM-SHA-512",
			"-scram-bootstrap", "SCRAM-SHA-512=[name=bench,password=bench-secret]"}
		opts = []kgo.Opt{kgo.DialTLSConfig(pki.clientTLS()), kgo.SASL(kscram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism())}
	}
	p := startBroker(b, append(args, "-log-level", "warn")...)
	client := func(more ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(p.addr)}, opts...), more...)...)
		require.NoError(b, err)
		return cl
	}
	admin := client()
	defer admin.Close()
	_, err := kadm.NewClient(admin).CreateTopic(b.Context(), 1, 1, nil, "bench")
	require.NoError(b, err)

	prod := client(kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchMaxBytes(1<<20))
	defer prod.Close()
	value := make([]byte, 16<<10)
	var acked atomic.Int64
	ctx, cancel := context.WithTimeout(b.Context(), d)
	defer cancel()
	start := time.Now()
	for ctx.Err() == nil {
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err == nil {
				acked.Add(1)
			}
		})
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer fcancel()
	require.NoError(b, prod.Flush(fctx))
	elapsed := time.Since(start)
	total := acked.Load()
	produceMBps = float64(total*int64(len(value))) / elapsed.Seconds() / 1e6

	cons := client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
	defer cons.Close()
	start = time.Now()
	var read int64
	for read < total {
		fs := cons.PollFetches(fctx)
		require.NoError(b, fs.Err0())
		read += int64(fs.NumRecords())
	}
	fetchMBps = float64(read*int64(len(value))) / time.Since(start).Seconds() / 1e6
	return produceMBps, fetchMBps
}
