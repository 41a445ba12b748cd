package coordinator

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/wal"
)

// Tiered (remote) segments, KIP-1164's release of diskless metadata.
//
// The offloader (package replica) copies a partition's closed local
// segment to the bucket as a remote segment in the KIP-405 shape and
// registers it here. Registering moves the partition's diskless start
// offset past the segment and deletes the batch rows wholly below it, so
// the WAL objects that held them can go: below the diskless start, a
// partition's data is in remote segments; from it on, in WAL objects.
//
//	log start ........ diskless start ........ high watermark
//	|  remote segments  |  diskless batches      |
//
// A remote segment's files are KEY + each of RemoteSegmentExts. The
// coordinator also keeps an object row of KEY (no batches, one live
// reference: the segment's), owned by this shard alone: KnownKeys knows
// the key while the segment is known, and when trimming, retention or a
// topic's deletion drops the segment, the row becomes dead and the
// lifecycle deletes every file of the segment after the grace, exactly as
// it deletes a WAL object. The orphan collector deletes the files of
// segments that were uploaded and never registered (orphans.go).

// --- RegisterRemoteSegment -------------------------------------------------

// RegisterRemoteSegment registers a remote segment that the offloader
// uploaded: the partition's diskless start offset moves to EndOffset+1,
// and the batches wholly at or below EndOffset are released (a batch run
// that straddles EndOffset stays; readers skip what is below the offset
// they ask). The segment's files are deleted when trimming, retention or
// the topic's deletion drops it (see LifecycleOptions).
//
// Errors carry Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION (not served
// here); INVALID_REQUEST (ID not a UUIDv7, Key not RemoteSegmentKey of
// the segment under Options.Prefix, a negative size); REQUEST_TIMED_OUT
// (the ID was named longer than Options.CommitDeadline ago: upload it
// again under a new ID); OFFSET_OUT_OF_RANGE unless BaseOffset <= the
// diskless start <= EndOffset < the high watermark and BaseOffset is above
// the EndOffset of every live remote segment of the partition (the message
// says which bound). Registering a segment already registered (the same
// ID, partition and base offset), live or dropped and not yet forgotten,
// succeeds and changes nothing. RegisteredAt is ignored.
func (l *leader) RegisterRemoteSegment(ctx context.Context, seg RemoteSegment) error {
	o := &state.RegisterRemoteOp{BaseOp: state.NewBaseOp(ctx), Seg: seg}
	return l.submit(ctx, o, o.Done)
}

// RemoteSegments returns the live remote segments of tp, by BaseOffset. On
// a leader it holds every registration answered so far.
func (l *leader) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	p, err := l.pub.Lookup(tp)
	if err != nil {
		return nil, err
	}
	if err := l.readBarrier(ctx, p.AppliedAt); err != nil {
		return nil, err
	}
	return l.store.Reader.RemoteSegments(ctx, tp, p.PID)
}

// RegisterRemoteSegment registers a remote segment that the offloader
// uploaded: the partition's diskless start offset moves to EndOffset+1,
// and the batches wholly at or below EndOffset are released (a batch run
// that straddles EndOffset stays; readers skip what is below the offset
// they ask). The segment's files are deleted when trimming, retention or
// the topic's deletion drops it (see LifecycleOptions).
//
// Errors carry Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION (not served
// here); INVALID_REQUEST (ID not a UUIDv7, Key not RemoteSegmentKey of
// the segment under Options.Prefix, a negative size); REQUEST_TIMED_OUT
// (the ID was named longer than Options.CommitDeadline ago: upload it
// again under a new ID); OFFSET_OUT_OF_RANGE unless BaseOffset <= the
// diskless start <= EndOffset < the high watermark and BaseOffset is above
// the EndOffset of every live remote segment of the partition (the message
// says which bound). Registering a segment already registered (the same
// ID, partition and base offset), live or dropped and not yet forgotten,
// succeeds and changes nothing. RegisteredAt is ignored.
// It reads tp's shard.
func (c *Coordinator) RegisterRemoteSegment(ctx context.Context, seg RemoteSegment) error {
	sh, err := c.shardFor(ctx, seg.TopicPartition)
	if err != nil {
		return err
	}
	return sh.RegisterRemoteSegment(ctx, seg)
}

// RemoteSegments returns the live remote segments of tp, by BaseOffset. On
// a leader it holds every registration answered so far.
// It reads tp's shard.
func (c *Coordinator) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	sh, err := c.shardFor(ctx, tp)
	if err != nil {
		return nil, err
	}
	return sh.RemoteSegments(ctx, tp)
}

// RemoteSegments returns the live remote segments of tp, by BaseOffset. On
// a leader it holds every registration answered so far.
// It reads the follower's database, as far as it has applied.
func (f *Follower) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	return f.c.RemoteSegments(ctx, tp)
}

// --- reads ------------------------------------------------------------------
