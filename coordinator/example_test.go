package coordinator_test

import (
	"context"
	"fmt"
	"os"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// A coordinator of one shard over an in-memory metadata log: create a
// topic, commit the batches an uploaded WAL object holds, and find them
// again, with the offsets the coordinator assigned.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "coordinator-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	log := metalog.NewMem(nil)
	defer log.Close()
	c, err := coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	id, err := c.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "orders", Partitions: 2})
	if err != nil {
		panic(err)
	}
	p0 := wal.TopicPartition{TopicID: id, Partition: 0}
	// The coordinates of two batches of partition 0 (3 and 2 records) in
	// an object that a broker uploaded: wal.Object.Encode gives them.
	batch := func(pos int64, records int32) wal.Coordinate {
		return wal.Coordinate{TopicPartition: p0, Offset: pos, Size: 100, NumRecords: records, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	}
	results, err := c.CommitFile(ctx, coordinator.CommitFileRequest{
		ObjectKey: "wal/object-1", Size: 201, Coordinates: []wal.Coordinate{batch(1, 3), batch(101, 2)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("base offsets:", results[0].BaseOffset, results[1].BaseOffset)

	found, err := c.FindBatches(ctx, p0, 0, 1<<20)
	if err != nil {
		panic(err)
	}
	for _, run := range found.Batches {
		fmt.Printf("offsets %d-%d: %s bytes %d-%d\n", run.BaseOffset, run.LastOffset, run.ObjectKey, run.BytePos, run.BytePos+run.ByteSize)
	}
	fmt.Println("high watermark:", found.HighWatermark)
	// Output:
	// base offsets: 0 3
	// offsets 0-4: wal/object-1 bytes 1-201
	// high watermark: 5
}
