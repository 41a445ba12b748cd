package replica_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cache"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/replica"
	"github.com/diskless-go/diskless/wal"
)

// produce does what a broker does with a batch of n records of 100 bytes
// for tp: it packs it into a WAL object, uploads the object to bucket as
// key and commits it to c.
func produce(ctx context.Context, c *coordinator.Coordinator, bucket *blob.Bucket, key string, tp wal.TopicPartition, n int) error {
	b := kbatch.NewBuilder(kbatch.CodecNone)
	for i := range n {
		b.Append(1_764_500_000_000+int64(i), nil, make([]byte, 100))
	}
	batch, err := b.Batch()
	if err != nil {
		return err
	}
	obj, coords, err := wal.Encode(nil, []wal.Batch{{TopicPartition: tp, Data: batch}})
	if err != nil {
		return err
	}
	if err := bucket.WriteAll(ctx, key, obj, nil); err != nil {
		return err
	}
	res, err := c.CommitFile(ctx, coordinator.CommitFileRequest{ObjectKey: key, Size: int64(len(obj)), Coordinates: coords})
	if err != nil {
		return err
	}
	return res[0].Err
}

// A Materializer keeps a classic local log of a diskless partition in step
// with the coordinator: the batches come from the WAL objects (through
// the object cache) with the offsets the coordinator assigned written in.
// Sync catches up at once; in the background each partition catches up
// every Poll.
func ExampleMaterializer() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "replica-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := metalog.NewMem(nil)
	defer log.Close()
	c, err := coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: filepath.Join(dir, "coordinator")})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	objects, err := cache.New(bucket, nil)
	if err != nil {
		panic(err)
	}
	defer objects.Close()

	id, err := c.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "orders", Partitions: 1})
	if err != nil {
		panic(err)
	}
	tp := wal.TopicPartition{TopicID: id}
	for i := range 3 {
		if err := produce(ctx, c, bucket, fmt.Sprintf("wal/%d", i), tp, 2); err != nil {
			panic(err)
		}
	}

	m, err := replica.NewMaterializer(c, objects, filepath.Join(dir, "replica"), &replica.MaterializerOptions{Start: replica.StartEarliest})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if err := m.Add(ctx, tp, nil); err != nil {
		panic(err)
	}
	end, err := m.Sync(ctx, tp)
	if err != nil {
		panic(err)
	}
	fmt.Println("local end offset:", end)

	local, err := m.Log(tp)
	if err != nil {
		panic(err)
	}
	r, err := local.Read(ctx, 0, 1<<20)
	if err != nil {
		panic(err)
	}
	it := kbatch.NewBatchIter(r.Records)
	for it.Next() {
		fmt.Printf("batch at offsets %d-%d\n", it.Batch().BaseOffset(), it.Batch().NextOffset()-1)
	}
	// Output:
	// local end offset: 6
	// batch at offsets 0-1
	// batch at offsets 2-3
	// batch at offsets 4-5
}

// An Offloader turns the closed segments of a partition's local log into
// tiered segments in the bucket and registers them with the coordinator,
// which moves the partition's diskless start offset past them: reads
// below it are served from the tiered segments.
func ExampleOffloader() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "replica-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := metalog.NewMem(nil)
	defer log.Close()
	c, err := coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: filepath.Join(dir, "coordinator"), Bucket: bucket})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	objects, err := cache.New(bucket, nil)
	if err != nil {
		panic(err)
	}
	defer objects.Close()

	// Segments of about 4 KiB, so that 20 batches of 10 records roll a few.
	cfg := coordinator.TopicConfig{Retention: -1, SegmentBytes: 4 << 10}
	id, err := c.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "events", Partitions: 1, Config: cfg})
	if err != nil {
		panic(err)
	}
	tp := wal.TopicPartition{TopicID: id}
	for i := range 20 {
		if err := produce(ctx, c, bucket, fmt.Sprintf("wal/%02d", i), tp, 10); err != nil {
			panic(err)
		}
	}

	m, err := replica.NewMaterializer(c, objects, filepath.Join(dir, "replica"), nil)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	// Interval -1: no background passes, Offload runs one now.
	o, err := replica.NewOffloader(c, m, bucket, &replica.OffloaderOptions{Interval: -1})
	if err != nil {
		panic(err)
	}
	defer o.Close()
	if err := o.Assign(ctx, tp, cfg); err != nil {
		panic(err)
	}
	run, err := o.Offload(ctx, tp)
	if err != nil {
		panic(err)
	}
	fmt.Println("segments offloaded:", run.Segments)
	fmt.Println("diskless start offset:", run.DisklessStart)

	segs, err := c.RemoteSegments(ctx, tp)
	if err != nil {
		panic(err)
	}
	for _, s := range segs {
		fmt.Printf("tiered offsets %d-%d\n", s.BaseOffset, s.EndOffset)
	}
	// Output:
	// segments offloaded: 6
	// diskless start offset: 180
	// tiered offsets 0-29
	// tiered offsets 30-59
	// tiered offsets 60-89
	// tiered offsets 90-119
	// tiered offsets 120-149
	// tiered offsets 150-179
}
