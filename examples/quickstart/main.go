// Command quickstart runs diskless end to end with no setup: it opens a
// broker over a file:// bucket in a fresh folder, creates a 6-partition
// topic, produces records from several goroutines with an idempotent
// producer, reads them all back and checks each, and prints what it took
// and what the same rate would cost on S3 against a classic cluster.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -bucket 's3://my-bucket?region=eu-west-1' -records 1000000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kbatch"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	bucket     string
	records    int
	partitions int
	batch      int
	valueSize  int
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.bucket, "bucket", "", "bucket URL (default: a file:// bucket in a fresh temporary folder)")
	fs.IntVar(&o.records, "records", 100_000, "records to produce")
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of the topic (one producer goroutine each)")
	fs.IntVar(&o.batch, "batch", 1000, "records per batch")
	fs.IntVar(&o.valueSize, "value-size", 100, "bytes per record value")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.records < 1 || o.partitions < 1 || o.batch < 1 || o.valueSize < 0 {
		return o, errors.New("-records, -partitions and -batch must be positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	bucketURL, dataDir := o.bucket, ""
	tmp, err := os.MkdirTemp("", "diskless-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bucketURL == "" {
		if err := os.Mkdir(tmp+"/bucket", 0o755); err != nil {
			return err
		}
		bucketURL = "file://" + tmp + "/bucket"
	}
	dataDir = tmp + "/data"

	b, err := diskless.Open(ctx, &diskless.Config{BucketURL: bucketURL, DataDir: dataDir})
	if err != nil {
		return err
	}
	defer b.Close()
	const topic = "quickstart"
	if _, err := b.CreateTopic(ctx, topic, diskless.TopicConfig{Partitions: int32(o.partitions)}); err != nil {
		return err
	}
	producerID, epoch, err := b.InitProducerID(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "diskless quickstart: %d records of %d bytes into %d partitions, over %s\n", o.records, o.valueSize, o.partitions, bucketURL)

	// Produce: one goroutine per partition, each an idempotent producer
	// sending one batch at a time with its sequence numbers.
	start := time.Now()
	perPartition := make([]int, o.partitions)
	for i := 0; i < o.records; i++ {
		perPartition[i%o.partitions]++
	}
	var wg sync.WaitGroup
	errs := make(chan error, o.partitions)
	var produced sync.Map
	for p := 0; p < o.partitions; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := int32(0)
			for seq < int32(perPartition[p]) {
				n := min(o.batch, perPartition[p]-int(seq))
				bld := kbatch.NewBuilder(kbatch.CodecLZ4)
				bld.SetProducer(producerID, epoch, seq)
				for i := 0; i < n; i++ {
					k := int(seq) + i
					bld.Append(time.Now().UnixMilli(), key(p, k), value(p, k, o.valueSize))
				}
				raw, err := bld.Build(nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: topic, Partition: int32(p), Records: raw}}})
				if err != nil {
					errs <- err
					return
				}
				if r := resp.Partitions[0]; r.Err != nil {
					errs <- fmt.Errorf("partition %d: %v", p, r.Err)
					return
				}
				seq += int32(n)
			}
			produced.Store(p, int(seq))
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	produceTime := time.Since(start)

	// Read everything back and check every record.
	readStart := time.Now()
	bytesRead := 0
	for p := 0; p < o.partitions; p++ {
		next := int64(0)
		for next < int64(perPartition[p]) {
			resp, err := b.Fetch(ctx, diskless.FetchRequest{Partitions: []diskless.FetchPartition{{Topic: topic, Partition: int32(p), Offset: next, MaxBytes: 4 << 20}}, MaxWait: time.Second, MinBytes: 1})
			if err != nil {
				return err
			}
			r := resp.Partitions[0]
			if r.Err != nil {
				return fmt.Errorf("fetching partition %d at %d: %v", p, next, r.Err)
			}
			bytesRead += len(r.Records)
			if next, err = check(r.Records, p, next, o.valueSize); err != nil {
				return err
			}
		}
	}
	readTime := time.Since(readStart)

	s := b.Stats()
	mb := float64(o.records*(o.valueSize+16)) / 1e6
	fmt.Fprintf(out, "produced  %d records (%.1f MB) in %v: %.1f MB/s, %.0f records/s\n", o.records, mb, produceTime.Round(time.Millisecond), mb/produceTime.Seconds(), float64(o.records)/produceTime.Seconds())
	fmt.Fprintf(out, "consumed  %d records, every one checked, in %v\n", o.records, readTime.Round(time.Millisecond))
	fmt.Fprintf(out, "produce latency  p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n", ms(s.Total.P50), ms(s.Total.P90), ms(s.Total.P99), ms(s.Total.P999), ms(s.Total.Max))
	fmt.Fprintf(out, "objects   %d WAL objects, %d PUTs in all (%d GETs), %d batch coordinates committed\n", s.Objects, s.Store["PUT"].Calls, s.Store["GET"].Calls, s.Coordinates)
	fmt.Fprintf(out, "cache     hit rate %.1f%%\n", 100*s.CacheHitRate)

	// What the same rate would cost for a month, with the simple model of
	// the notes: cross-zone replication at 0.02 USD/GiB for a classic
	// cluster of 3 replicas; S3 PUT 0.005 and GET 0.0004 USD per 1,000,
	// storage 0.023 USD per GB-month (7 days retained) for diskless.
	const month = 30 * 24 * 3600.0
	rate := mb * 1e6 / produceTime.Seconds() // bytes/s
	ingressGiB := rate * month / (1 << 30)
	classic := ingressGiB * 2 * 0.02
	puts := float64(s.Store["PUT"].Calls) / produceTime.Seconds() * month
	gets := float64(s.Store["GET"].Calls) / max(produceTime.Seconds()+readTime.Seconds(), 1e-9) * month
	storage := rate * 7 * 24 * 3600 / 1e9 * 0.023
	diskless := puts/1000*0.005 + gets/1000*0.0004 + storage
	fmt.Fprintf(out, "cost      at %.1f MB/s for a month: classic 3-replica cross-zone replication %.0f USD; diskless on S3 %.0f USD (PUTs %.0f, GETs %.0f, storage %.0f)\n",
		rate/1e6, classic, diskless, puts/1000*0.005, gets/1000*0.0004, storage)
	return nil
}

func key(p, i int) []byte { return []byte(fmt.Sprintf("p%d-%09d", p, i)) }

func value(p, i, size int) []byte {
	v := make([]byte, size)
	for j := range v {
		v[j] = byte('a' + (p*31+i+j)%26)
	}
	return v
}

// check verifies the records in data from offset next on, in order, and
// returns the offset after the last.
func check(data []byte, p int, next int64, size int) (int64, error) {
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		if err := rr.Reset(it.Batch()); err != nil {
			return next, err
		}
		for rr.Next() {
			r := rr.Record()
			if r.Offset < next {
				continue
			}
			if r.Offset != next || string(r.Key) != string(key(p, int(next))) || string(r.Value) != string(value(p, int(next), size)) {
				return next, fmt.Errorf("partition %d offset %d: record %q is not the one produced", p, r.Offset, r.Key)
			}
			next++
		}
		if err := rr.Err(); err != nil {
			return next, err
		}
	}
	return next, it.Err()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/1e6) }
