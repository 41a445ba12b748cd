package diskless_test

import (
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kbatch"
)

// A broker over an in-memory bucket: create a topic, produce a batch as a
// Kafka producer would, fetch it back with its offsets.
func Example() {
	ctx := context.Background()
	b, err := diskless.Open(ctx, &diskless.Config{Linger: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(ctx, "greetings", diskless.TopicConfig{Partitions: 3}); err != nil {
		panic(err)
	}

	bld := kbatch.NewBuilder(kbatch.CodecZstd)
	bld.Append(time.Now().UnixMilli(), []byte("en"), []byte("hello"))
	bld.Append(time.Now().UnixMilli(), []byte("fr"), []byte("bonjour"))
	batch, _ := bld.Build(nil)
	resp, err := b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{
		{Topic: "greetings", Partition: 2, Records: batch},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println("base offset:", resp.Partitions[0].BaseOffset, resp.Partitions[0].ErrorCode)

	f, err := b.Fetch(ctx, diskless.FetchRequest{Partitions: []diskless.FetchPartition{{Topic: "greetings", Partition: 2}}})
	if err != nil {
		panic(err)
	}
	it := kbatch.NewBatchIter(f.Partitions[0].Records)
	var rr kbatch.RecordReader
	for it.Next() {
		rr.Reset(it.Batch())
		for rr.Next() {
			r := rr.Record()
			fmt.Printf("%d %s=%s\n", r.Offset, r.Key, r.Value)
		}
	}
	fmt.Println("high watermark:", f.Partitions[0].HighWatermark)
	// Output:
	// base offset: 0 NONE
	// 0 en=hello
	// 1 fr=bonjour
	// high watermark: 2
}

// Bad input is answered with the error code a Kafka broker gives, per
// partition, and changes nothing.
func ExampleBroker_Produce_badInput() {
	ctx := context.Background()
	b, _ := diskless.Open(ctx, nil)
	defer b.Close()
	b.CreateTopic(ctx, "events", diskless.TopicConfig{Compact: true})

	bld := kbatch.NewBuilder(kbatch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("no key")) // compacted topics need keys
	batch, _ := bld.Build(nil)
	resp, _ := b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: "events", Records: batch}}})
	r := resp.Partitions[0]
	fmt.Println(r.ErrorCode, int16(r.ErrorCode), r.ErrorCode.Retriable(), len(r.RecordErrors))

	resp, _ = b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: "missing", Records: batch}}})
	fmt.Println(resp.Partitions[0].ErrorCode)
	// Output:
	// INVALID_RECORD 87 false 1
	// UNKNOWN_TOPIC_OR_PARTITION
}

// ListOffsets finds the first record at or after a time; DeleteRecords
// moves the log start offset.
func ExampleBroker_ListOffsets() {
	ctx := context.Background()
	b, _ := diskless.Open(ctx, &diskless.Config{Linger: 10 * time.Millisecond})
	defer b.Close()
	b.CreateTopic(ctx, "metrics", diskless.TopicConfig{})
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	bld := kbatch.NewBuilder(kbatch.CodecNone)
	for i := int64(0); i < 5; i++ {
		bld.Append(t0+i*1000, nil, []byte("sample"))
	}
	batch, _ := bld.Build(nil)
	b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: "metrics", Records: batch}}})

	at, _ := b.ListOffsets(ctx, "metrics", 0, t0+2500)
	fmt.Println("first at or after t0+2.5s:", at.Offset, at.Timestamp-t0)
	low, _ := b.DeleteRecords(ctx, "metrics", 0, 3)
	first, _ := b.ListOffsets(ctx, "metrics", 0, diskless.EarliestTimestamp)
	last, _ := b.ListOffsets(ctx, "metrics", 0, diskless.LatestTimestamp)
	fmt.Println("log start:", low, first.Offset, "high watermark:", last.Offset)
	// Output:
	// first at or after t0+2.5s: 3 3000
	// log start: 3 3 high watermark: 5
}
