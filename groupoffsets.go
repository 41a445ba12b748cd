package diskless

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/coordinator"
)

// GroupOffset is a consumer group's committed offset of one partition.
type GroupOffset struct {
	Topic     string
	Partition int32
	// Offset is the next record the group reads.
	Offset int64
	// LeaderEpoch is the leader epoch of the record before Offset, -1 if
	// unknown.
	LeaderEpoch int32
	// Metadata is the client's string for the commit, at most
	// coordinator.MaxGroupOffsetMetadata bytes.
	Metadata string
	// CommitTime is when it was committed; CommitOffsets ignores it.
	CommitTime time.Time
}

// GroupPartition names a partition among a group's committed offsets.
type GroupPartition = coordinator.GroupPartition

// CommitOffsets commits a consumer group's offsets, all or none, replacing
// what the group had for each partition. It is one record in the
// coordinator's log (the shard of the group: coordinator.ShardOfGroup),
// not a produce to an offsets topic: its latency is one metadata-log
// append, and it writes nothing to the bucket. claim is the epoch of a
// claim on the group (ClaimGroup) the commit is made under, or 0 for none:
// a commit under a claim older than the group's latest fails with
// NOT_COORDINATOR. Every partition must exist (UNKNOWN_TOPIC_OR_PARTITION
// otherwise, and nothing is committed); see
// coordinator.Coordinator.CommitOffsets for the other errors.
func (b *Broker) CommitOffsets(ctx context.Context, group string, claim int64, offsets []GroupOffset) error {
	if b.closed.Load() {
		return ErrClosed
	}
	out, err := b.coordOffsets(ctx, offsets)
	if err != nil {
		return err
	}
	return b.closedErr(b.coord.CommitOffsets(ctx, group, claim, out))
}

// coordOffsets converts offsets to the coordinator's, with their topics'
// IDs: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
func (b *Broker) coordOffsets(ctx context.Context, offsets []GroupOffset) ([]coordinator.GroupOffset, error) {
	out := make([]coordinator.GroupOffset, len(offsets))
	for i, o := range offsets {
		_, tp, err := b.partition(ctx, o.Topic, o.Partition)
		if err != nil {
			return nil, err
		}
		out[i] = coordinator.GroupOffset{Topic: o.Topic, TopicID: tp.TopicID, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return out, nil
}

// ClaimGroup claims a consumer group for the caller, as a Kafka broker
// does when it becomes the group's coordinator, and returns the claim's
// epoch: higher than any before, on any broker of a cluster. From when
// it returns, CommitOffsets and DeleteOffsets under an older claim fail
// with NOT_COORDINATOR, so a coordinator that lost the group without
// knowing it (frozen, or cut off, while another took over) cannot move
// the group's offsets back; and FetchOffsets sees every commit made
// under the claims before. Claims are not needed by a single broker.
func (b *Broker) ClaimGroup(ctx context.Context, group string) (int64, error) {
	if b.closed.Load() {
		return 0, ErrClosed
	}
	e, err := b.coord.ClaimGroup(ctx, group)
	return e, b.closedErr(err)
}

// FetchOffsets returns a consumer group's committed offsets, by topic and
// partition: those of parts (a partition without one is left out), or
// every one when parts is nil. It holds every commit answered so far, on
// any broker of a cluster. Offsets of a topic deleted since (or deleted
// and created again) are left out, as Kafka deletes them with the topic.
func (b *Broker) FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]GroupOffset, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	got, err := b.coord.FetchOffsets(ctx, group, parts)
	if err != nil {
		return nil, b.closedErr(err)
	}
	out := make([]GroupOffset, 0, len(got))
	current := map[string]uuid.UUID{} // topic name -> its ID now; zero: none
	for _, o := range got {
		id, ok := current[o.Topic]
		if !ok {
			// b.topic refreshes the cache for a name it does not know; a
			// known name of another ID may be a topic created again on
			// another broker since the cache was filled.
			t, err := b.topic(ctx, o.Topic)
			if err == nil && t.ID != o.TopicID {
				b.coord.Shards().RefreshTopics(ctx)
				b.refreshTopics(ctx)
				t, err = b.topic(ctx, o.Topic)
			}
			if err == nil {
				id = t.ID
			}
			current[o.Topic] = id
		}
		if id != o.TopicID {
			continue
		}
		out = append(out, GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
			Metadata: o.Metadata, CommitTime: time.UnixMilli(o.CommitTime)})
	}
	return out, nil
}

// DeleteOffsets deletes a consumer group's committed offsets: those of
// parts, or every one when parts is nil (the group is then gone from
// OffsetGroups). Partitions without one are ignored. claim is as for
// CommitOffsets.
func (b *Broker) DeleteOffsets(ctx context.Context, group string, claim int64, parts []GroupPartition) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return b.closedErr(b.coord.DeleteOffsets(ctx, group, claim, parts))
}

// OffsetGroups returns the consumer groups with committed offsets, sorted.
func (b *Broker) OffsetGroups(ctx context.Context) ([]string, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	gs, err := b.coord.OffsetGroups(ctx)
	return gs, b.closedErr(err)
}

// GroupMetadata is a consumer group's membership as its coordinator
// stored it (PutGroupMetadata): an opaque value, and the generation it is
// of.
type GroupMetadata = coordinator.GroupMetadata

// PutGroupMetadata stores a consumer group's metadata, as a Kafka group
// coordinator keeps its groups in __consumer_offsets: value (opaque here;
// kafkaserver stores Kafka's GroupMetadataValue), of generation, replacing
// what the group had unless that is of a later generation; an empty value
// deletes it. A broker that takes the group over reads it back
// (GroupMetadata), so the group's members carry on without a rebalance.
// claim is as for CommitOffsets.
func (b *Broker) PutGroupMetadata(ctx context.Context, group string, claim, generation int64, value []byte) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return b.closedErr(b.coord.PutGroupMetadata(ctx, group, claim, generation, value))
}

// GroupMetadata returns a consumer group's metadata as last stored by
// any broker (PutGroupMetadata); its Value is nil if none is.
func (b *Broker) GroupMetadata(ctx context.Context, group string) (GroupMetadata, error) {
	if b.closed.Load() {
		return GroupMetadata{}, ErrClosed
	}
	m, err := b.coord.GroupMetadata(ctx, group)
	return m, b.closedErr(err)
}
