package wal_test

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// Batches of several partitions packed into one WAL object, and read back
// through their coordinates, as the coordinator stores them.
func Example() {
	topic := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	batch := func(value string) kbatch.Batch {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.Append(1_700_000_000_000, nil, []byte(value))
		batch, err := b.Batch()
		if err != nil {
			panic(err)
		}
		return batch
	}
	p0, p1 := wal.TopicPartition{TopicID: topic, Partition: 0}, wal.TopicPartition{TopicID: topic, Partition: 1}
	obj, coords, err := wal.Encode(nil, []wal.Batch{
		{TopicPartition: p1, Data: batch("b")},
		{TopicPartition: p0, Data: batch("a")},
		{TopicPartition: p1, Data: batch("c")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("object of", len(obj), "bytes, version", obj[0])
	for _, c := range coords { // partition order, then arrival order
		fmt.Printf("partition %d: bytes %d-%d, %d record\n", c.Partition, c.Offset, c.End(), c.NumRecords)
	}

	batches, err := wal.Decode(obj, coords)
	if err != nil {
		panic(err)
	}
	var rr kbatch.RecordReader
	for _, b := range batches {
		rr.Reset(b.Data)
		for rr.Next() {
			fmt.Printf("partition %d: %s\n", b.Partition, rr.Record().Value)
		}
	}
	// Output:
	// object of 208 bytes, version 0
	// partition 0: bytes 1-70, 1 record
	// partition 1: bytes 70-139, 1 record
	// partition 1: bytes 139-208, 1 record
	// partition 0: a
	// partition 1: b
	// partition 1: c
}
