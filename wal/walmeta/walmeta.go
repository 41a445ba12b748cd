// Package walmeta holds the vocabulary the WAL shares with the batch
// coordinator: a partition's name, a batch's coordinates in an object, a
// batch's produce result and the object key's form. It is a leaf, with no
// I/O, so that the coordinator's pure state package (coordinator/state)
// can use it without the WAL's buffer and its logging; package wal
// aliases each name.
package walmeta

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kbatch"
)

// KeyDir is the folder of WAL objects under a bucket prefix: an object's
// key is <prefix>wal/<UUIDv7>. It is part of the format.
const KeyDir = "wal/"

// TopicPartition names a partition by its topic's ID.
type TopicPartition struct {
	TopicID   uuid.UUID
	Partition int32
}

// Compare orders partitions as objects order their regions: by topic ID
// (bytewise), then partition number.
func (tp TopicPartition) Compare(o TopicPartition) int {
	if c := bytes.Compare(tp.TopicID[:], o.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(tp.Partition, o.Partition)
}

// String returns "topicID-partition".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.TopicID, tp.Partition) }

// Result is the outcome of one batch, as a Kafka produce response gives it
// for a partition.
type Result struct {
	// BaseOffset is the offset assigned to the batch's first record, or -1.
	BaseOffset int64
	// LogAppendTime is the append time for LogAppendTime topics, else -1.
	LogAppendTime int64
	// LogStartOffset is the partition's log start offset, or -1.
	LogStartOffset int64
	// Err is the batch's error, nil on success.
	Err error
}

// Coordinate locates one batch in an object and carries what the
// coordinator needs of its header. Coordinates come in object order.
type Coordinate struct {
	TopicPartition
	// Offset and Size are the batch's byte range in the object.
	Offset int64
	Size   int32
	// NumRecords is the batch's record count.
	NumRecords int32
	// BaseTimestamp and MaxTimestamp are the batch's header fields.
	BaseTimestamp int64
	MaxTimestamp  int64
	// TimestampType is the batch's timestamp type.
	TimestampType kbatch.TimestampType
	// ProducerID, ProducerEpoch and BaseSequence are the batch's producer
	// fields (-1 when none).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Transactional and Control are the batch's attribute flags.
	Transactional bool
	Control       bool
}

// End returns the byte offset just after the batch.
func (c *Coordinate) End() int64 { return c.Offset + int64(c.Size) }

// ParseObjectKey returns the UUID and the creation time (millisecond
// precision) of an object key with the given prefix.
func ParseObjectKey(prefix, key string) (uuid.UUID, time.Time, error) {
	rest, ok := strings.CutPrefix(key, prefix+KeyDir)
	if !ok {
		return uuid.UUID{}, time.Time{}, fmt.Errorf("wal: key %q is not under %q", key, prefix+KeyDir)
	}
	id, err := uuid.Parse(rest)
	if err != nil || id.Version() != 7 {
		return uuid.UUID{}, time.Time{}, fmt.Errorf("wal: key %q does not end in a UUIDv7", key)
	}
	ms := int64(binary.BigEndian.Uint64(id[:8]) >> 16)
	return id, time.UnixMilli(ms), nil
}
