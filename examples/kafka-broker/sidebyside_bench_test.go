package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/internal/s3test"
)

var (
	sbsRecords = flag.Int("sbs.records", 200_000, "records BenchmarkSideBySide produces")
	sbsLinger  = flag.String("sbs.linger", "", "the broker's -linger in BenchmarkSideBySide (default: the broker's)")
)

// BenchmarkSideBySide is the bulk row of issue 24's side-by-side table: the
// example broker over a real S3 server on loopback (versitygw), one
// franz-go client producing -sbs.records records of 1 KiB incompressible
// values to 8 partitions, acks=all, idempotence off, one request in
// flight. It reports MiB/s, the broker process's CPU per produced MiB
// (user and system time, from /proc) and the objects in the bucket at the
// end (WAL objects and metadata-log entries: a PUT each).
//
//	go test -run '^$' -bench SideBySide -benchtime 1x -count 3 ./examples/kafka-broker
func BenchmarkSideBySide(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc for the broker's CPU time")
	}
	for b.Loop() {
		mibs, cpu, objects := sideBySide(b)
		b.ReportMetric(mibs, "MiB/s")
		b.ReportMetric(cpu, "cpu-ms/MiB")
		b.ReportMetric(float64(objects), "objects")
	}
}

func sideBySide(b *testing.B) (mibs, cpuMsPerMiB float64, objects int) {
	srv := s3test.Start(b)
	bucket := srv.Bucket(b, "bucket")
	data := filepath.Join(b.TempDir(), "data")
	require.NoError(b, os.MkdirAll(data, 0o755))
	extra := []string{"-log-level", "warn", "-linger", "250ms"}
	if *sbsLinger != "" {
		extra = append(extra, "-linger", *sbsLinger)
	}
	p := startBrokerAt(b, "127.0.0.1:0", data, srv.URL("bucket"), extra...)
	defer p.stop()
	admin, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	require.NoError(b, err)
	defer admin.Close()
	createTopic(b, admin, "sbs", 8, nil)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("sbs"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(1))
	require.NoError(b, err)
	defer prod.Close()

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
	it := bucket.List(&blob.ListOptions{})
	for {
		if _, err := it.Next(b.Context()); err != nil {
			break
		}
		objects++
	}
	return mib / elapsed.Seconds(), float64(cpu.Milliseconds()) / mib, objects
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
