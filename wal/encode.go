package wal

import (
	"fmt"

	"github.com/diskless-go/diskless/kbatch"
)

// Encode appends to dst the WAL object that holds batches (each a
// partition's RecordBatch v2 as its producer sent it), and returns it with
// the coordinate of every batch in object order: the bytes and
// coordinates an Object of those batches encodes, with no key, request or
// buffer, for tests, tools and benchmarks. A batch whose framing is not
// valid is an error (kbatch's, with Kafka's code); Encode then appends
// nothing.
func Encode(dst []byte, batches []Batch) ([]byte, []Coordinate, error) {
	for i := range batches {
		if _, err := kbatch.ParseBatch(batches[i].Data); err != nil {
			return dst, nil, fmt.Errorf("wal: batch %d (%s): %w", i, batches[i].TopicPartition, err)
		}
	}
	o := NewObject("")
	o.Add(&Request{Batches: batches})
	out, coords := o.AppendEncode(dst, nil)
	return out, coords, nil
}

// Decode returns the batches of a WAL object, with their partitions, in
// object order, after checking the object against its coordinates
// (CheckObject). The batches alias obj.
func Decode(obj []byte, coords []Coordinate) ([]Batch, error) {
	if err := CheckObject(obj, coords); err != nil {
		return nil, err
	}
	out := make([]Batch, len(coords))
	for i := range coords {
		b, err := ReadBatch(obj, 0, &coords[i])
		if err != nil {
			return nil, err
		}
		out[i] = Batch{TopicPartition: coords[i].TopicPartition, Data: b}
	}
	return out, nil
}
