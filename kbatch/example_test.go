package kbatch_test

import (
	"fmt"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// A producer's batch: build it, validate it as a Kafka leader does, give
// it its offsets, and read its records back.
func Example() {
	now := time.UnixMilli(1_700_000_000_000)
	b := kbatch.NewBuilder(kbatch.CodecZstd)
	b.SetProducer(42, 0, 0) // an idempotent producer: ID, epoch, first sequence
	b.Append(now.UnixMilli(), []byte("k1"), []byte("hello"))
	b.Append(now.UnixMilli()+1, []byte("k2"), []byte("world"))
	batch, err := b.Batch()
	if err != nil {
		panic(err)
	}

	if _, err := kbatch.Validate(batch, &kbatch.ValidateOptions{Now: now}); err != nil {
		panic(err)
	}
	batch.SetBaseOffset(100) // what a leader writes in
	fmt.Println(batch.Codec(), batch.BaseOffset(), batch.LastOffset(), batch.ProducerID())

	var rr kbatch.RecordReader
	if err := rr.Reset(batch); err != nil {
		panic(err)
	}
	for rr.Next() {
		r := rr.Record()
		fmt.Printf("%d %s=%s\n", r.Offset, r.Key, r.Value)
	}
	// Output:
	// zstd 100 101 42
	// 100 k1=hello
	// 101 k2=world
}

// Bad input gets the error code a Kafka broker answers with.
func ExampleValidate() {
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.Append(time.Now().UnixMilli(), nil, []byte("no key"))
	batch, _ := b.Batch()
	_, err := kbatch.Validate(batch, &kbatch.ValidateOptions{Compacted: true})
	fmt.Println(kafkaerr.CodeOf(err))
	// Output: INVALID_RECORD
}
