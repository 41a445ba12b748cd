package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/internal/s3test"
)

var (
	sbsRecords = flag.Int("sbs.records", 200_000, "records BenchmarkSideBySide produces")
	sbsLinger  = flag.String("sbs.linger", "", "the broker's -linger in BenchmarkSideBySide (default: the broker's)")
	sbsFlags   = flag.String("sbs.flags", "", "more flags of the broker in BenchmarkSideBySide (-objects-per-second 150, say)")
	sbsLight   = flag.Bool("sbs.light", false, "BenchmarkSideBySide produces the light load instead: 200 records a second for 30 s, and reports p50 and p99")
	sbsParts   = flag.Int("sbs.partitions", 8, "the partitions of BenchmarkSideBySide's topic; past 8 the records go round robin, so that every partition is written")
)

// BenchmarkSideBySide is the bulk row of the side-by-side table (BENCHMARKS.md,
// "Loopback, real S3 server (versitygw), the side-by-side workload"): the
// example broker over a real S3 server on loopback (versitygw), one
// franz-go client producing -sbs.records records of 1 KiB incompressible
// values to 8 partitions, acks=all, idempotence off, one request in
// flight. It reports MiB/s, the broker process's CPU per produced MiB
// (user and system time, from /proc) and the objects in the bucket at the
// end (WAL objects and metadata-log entries: a PUT each). With
// -sbs.light it runs the light-load row instead: 200 records a second
// for 30 s, reporting their p50 and p99. Both report the broker
// process's peak resident memory (VmHWM, from /proc). -sbs.partitions
// spreads the load over more partitions.
//
//	go test -run '^$' -bench SideBySide -benchtime 1x -count 3 ./examples/kafka-broker
func BenchmarkSideBySide(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc for the broker's CPU time")
	}
	for b.Loop() {
		if *sbsLight {
			p50, p99, objects, rss := sideBySideLight(b)
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p99, "p99-ms")
			b.ReportMetric(float64(objects), "objects")
			b.ReportMetric(rss, "peak-RSS-MiB")
			continue
		}
		mibs, cpu, objects, rss := sideBySide(b)
		b.ReportMetric(mibs, "MiB/s")
		b.ReportMetric(cpu, "cpu-ms/MiB")
		b.ReportMetric(float64(objects), "objects")
		b.ReportMetric(rss, "peak-RSS-MiB")
	}
}

// sideBySideSetup starts the S3 server, the broker over it and a
// producer as the side-by-side table has them.
func sideBySideSetup(b *testing.B) (*brokerProc, *kgo.Client, *blob.Bucket) {
	srv := s3test.Start(b)
	bucket := srv.Bucket(b, "bucket")
	data := filepath.Join(b.TempDir(), "data")
	require.NoError(b, os.MkdirAll(data, 0o755))
	extra := []string{"-log-level", "warn", "-linger", "250ms"}
	if *sbsLinger != "" {
		extra = append(extra, "-linger", *sbsLinger)
	}
	extra = append(extra, strings.Fields(*sbsFlags)...)
	p := startBrokerAt(b, "127.0.0.1:0", data, srv.URL("bucket"), extra...)
	admin, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	require.NoError(b, err)
	defer admin.Close()
	kafkatest.CreateTopic(b, admin, "sbs", int32(*sbsParts), nil)
	opts := []kgo.Opt{kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("sbs"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(1)}
	if *sbsParts > 8 {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	prod, err := kgo.NewClient(opts...)
	require.NoError(b, err)
	b.Cleanup(prod.Close)
	return p, prod, bucket
}

// countObjects returns how many objects the bucket holds.
func countObjects(b *testing.B, bucket *blob.Bucket) int {
	n := 0
	it := bucket.List(&blob.ListOptions{})
	for {
		if _, err := it.Next(b.Context()); err != nil {
			return n
		}
		n++
	}
}

// sideBySideLight produces 200 records a second for 30 s and returns
// the p50 and p99 of their latencies in ms, and the objects in the
// bucket, and the broker's peak resident memory in MiB.
func sideBySideLight(b *testing.B) (p50, p99 float64, objects int, rssMiB float64) {
	p, prod, bucket := sideBySideSetup(b)
	defer p.stop()
	value := make([]byte, 1024)
	rand.Read(value)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range 200 * 30 {
		<-tick.C
		wg.Add(1)
		sent := time.Now()
		prod.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			require.NoError(b, err)
			mu.Lock()
			lat = append(lat, time.Since(sent))
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	return q(0.5), q(0.99), countObjects(b, bucket), procPeakRSS(b, p.cmd.Process.Pid)
}

func sideBySide(b *testing.B) (mibs, cpuMsPerMiB float64, objects int, rssMiB float64) {
	p, prod, bucket := sideBySideSetup(b)
	defer p.stop()

	values := make([][]byte, 1024) // incompressible, and not all alike
	for i := range values {
		values[i] = make([]byte, 1024)
		rand.Read(values[i])
	}
	cpu0 := procCPU(b, p.cmd.Process.Pid)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range *sbsRecords {
		wg.Add(1)
		prod.Produce(context.Background(), &kgo.Record{Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := procCPU(b, p.cmd.Process.Pid) - cpu0
	require.NoError(b, firstErr)
	mib := float64(*sbsRecords) * 1024 / (1 << 20)
	return mib / elapsed.Seconds(), float64(cpu.Milliseconds()) / mib, countObjects(b, bucket), procPeakRSS(b, p.cmd.Process.Pid)
}

// procPeakRSS returns the peak resident memory of process pid so far
// (VmHWM) in MiB.
func procPeakRSS(tb testing.TB, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(tb, err)
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(tb, err)
			return float64(kb) / 1024
		}
	}
	tb.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// procCPU returns the user and system CPU time of process pid so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	require.NoError(tb, err)
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	require.NoError(tb, err)
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks
}
