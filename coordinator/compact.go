package coordinator

import (
	"context"
	"hash/fnv"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Compaction's replacement of a range (the coordinator's part of compacting
// diskless topics; the compactor is replica/compact.go).
//
// A compactor reads a partition's batches from From to To (FindBatches),
// keeps what Kafka's cleaner keeps, writes the result as a new WAL-format
// object and asks the partition's shard to replace the range with it:
// one record, compactRecord, that deletes every batch row of the range
// (their objects lose them, and die when they have none left: the
// existing deletion grace applies) and inserts the rows of the new
// object, at the offsets the batches had (a compacted log has holes, as
// in Kafka). A reader sees the old rows or the new ones, never a mix.
//
// The replacement is accepted only if the range is still what the
// compactor read: the request carries RangeFingerprint of the locations
// it read, and the shard's leader compares it with the committed rows
// (and refuses while a trim, an offload or another replacement of the
// partition is on its way to the log). A compactor that lost the race
// gets ErrRangeChanged and tries again later; its object is then an
// orphan the collector deletes, as is one whose commit never came (a
// crash between upload and commit).

// RangeFingerprint is the fingerprint of a range's batch rows, as the
// locations FindBatches returned for them: the FNV-1a hash of each one's
// last offset, offset count, object key, byte position and size.
func RangeFingerprint(locs []Location) uint64 {
	h := fnv.New64a()
	var b []byte
	for _, l := range locs {
		b = store.AppendRowPrint(b[:0], l.LastOffset, l.LastOffset-l.BaseOffset+1, l.ObjectKey, l.BytePos, l.ByteSize)
		h.Write(b)
	}
	return h.Sum64()
}

// --- deciding -------------------------------------------------------------

// --- the store --------------------------------------------------------------

// --- the API ----------------------------------------------------------------

// Compact replaces a range of a partition of this shard (see
// CompactRequest); ErrRangeChanged when it is no longer what was read.
func (l *leader) Compact(ctx context.Context, req CompactRequest) error {
	o := &state.CompactOp{BaseOp: state.NewBaseOp(ctx), Req: req}
	return l.submit(ctx, o, o.Done)
}

// LeadsPartition reports whether this process leads the shard that
// serves tp: there, and only there, Compact is served (exactly one
// compactor per partition at a time: the shard's leader's).
func (h Shards) LeadsPartition(tp wal.TopicPartition) bool {
	c := h.c
	i, err := c.Shards().ShardOf(tp)
	return err == nil && c.Shards().Leads(i)
}

// Compact replaces a range of a partition's batches with the compacted
// runs of a new object, at the same offsets, atomically: readers see
// the old batches or the new ones. It fails with ErrRangeChanged when the
// range is no longer what the compactor read (RangeFingerprint), and with
// Kafka's codes for a bad request (INVALID_REQUEST) or an unknown
// partition.
func (c *Coordinator) Compact(ctx context.Context, req CompactRequest) error {
	sh, err := c.shardFor(ctx, req.TopicPartition)
	if err != nil {
		return err
	}
	l, ok := sh.(*leader)
	if !ok {
		return kafkaerr.New(kafkaerr.NotLeaderOrFollower, "the shard of %s is led by another broker: compact there", req.TopicPartition)
	}
	return l.Compact(ctx, req)
}
