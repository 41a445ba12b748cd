// Command kafkaload is the franz-go workload of the side-by-side runs
// (BENCHMARKS.md, "Loopback, real S3 server (versitygw), the side-by-side
// workload") against a Kafka-protocol broker (examples/kafka-broker over
// a real S3 server on loopback): records of incompressible values spread over
// the partitions of one topic, acks=all, idempotence off, one produce
// request in flight.
//
//	go run ./examples/bench/kafkaload -brokers 127.0.0.1:9092 -mode bulk -records 200000
//	go run ./examples/bench/kafkaload -brokers 127.0.0.1:9092 -mode light -rate 200 -duration 30s
//
// bulk produces -records as fast as the broker takes them and reports
// MiB/s; light produces -rate records a second for -duration and reports
// the latency of each record, from Produce to its promise. With
// -broker-pid it also reports the broker's CPU time (user and system,
// from /proc) per MiB produced, and with -bucket-dir the objects the run
// added to a versitygw posix bucket folder (its PUTs, as none is deleted
// in so short a run).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kafkaload", flag.ContinueOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "seed brokers, comma separated")
	topic := fs.String("topic", "load", "the topic (auto-created by the broker with its -partitions)")
	mode := fs.String("mode", "bulk", "bulk or light")
	records := fs.Int("records", 200_000, "bulk: how many records")
	rate := fs.Float64("rate", 200, "light: records per second")
	duration := fs.Duration("duration", 30*time.Second, "light: how long")
	size := fs.Int("size", 1024, "bytes of each record's value (random, incompressible)")
	pid := fs.Int("broker-pid", 0, "the broker's process id, for its CPU time per MiB")
	bucketDir := fs.String("bucket-dir", "", "the bucket's folder (versitygw posix), to count the objects the run added")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The topic exists (auto-created) and is known before the clock runs.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}

	value := func() []byte {
		v := make([]byte, *size)
		rand.Read(v)
		return v
	}
	objectsBefore := countFiles(*bucketDir)
	cpuBefore := cpuTime(*pid)
	start := time.Now()
	var lat []time.Duration
	var produced, count atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	record := func(d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		lat = append(lat, d)
	}
	switch *mode {
	case "bulk":
		for range *records {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: value()}, func(r *kgo.Record, err error) {
				defer wg.Done()
				produced.Add(int64(len(r.Value)))
				count.Add(1)
				if err != nil {
					record(0, err)
				}
			})
		}
	case "light":
		interval := time.Duration(float64(time.Second) / *rate)
		next := time.Now()
		for time.Since(start) < *duration && ctx.Err() == nil {
			time.Sleep(time.Until(next))
			next = next.Add(interval)
			sent := time.Now()
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: value()}, func(r *kgo.Record, err error) {
				defer wg.Done()
				produced.Add(int64(len(r.Value)))
				count.Add(1)
				record(time.Since(sent), err)
			})
		}
	default:
		return fmt.Errorf("-mode %q is neither bulk nor light", *mode)
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	mib := float64(produced.Load()) / (1 << 20)
	fmt.Printf("mode %s: %d records, %.1f MiB in %.2fs: %.1f MiB/s\n", *mode, count.Load(), mib, took.Seconds(), mib/took.Seconds())
	if *mode == "light" {
		slices.Sort(lat)
		q := func(f float64) time.Duration { return lat[min(int(f*float64(len(lat))), len(lat)-1)] }
		fmt.Printf("latency p50 %v p90 %v p99 %v max %v\n", q(0.5).Round(100*time.Microsecond), q(0.9).Round(100*time.Microsecond), q(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
	}
	if *pid > 0 {
		cpu := cpuTime(*pid) - cpuBefore
		fmt.Printf("broker CPU %.2fs: %.2f ms/MiB\n", cpu.Seconds(), float64(cpu.Milliseconds())/mib)
	}
	if *bucketDir != "" {
		fmt.Printf("objects added to the bucket: %d\n", countFiles(*bucketDir)-objectsBefore)
	}
	return nil
}

// cpuTime is a process's user and system CPU time (/proc/PID/stat), or 0.
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after the command
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// countFiles counts the regular files under dir, or 0.
func countFiles(dir string) int {
	if dir == "" {
		return 0
	}
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0
	}
	return n
}
