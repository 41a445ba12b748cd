package coordinator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/diskless-go/diskless/coordinator/state"
)

// Consumer groups' committed offsets, as records of the metadata log.
//
// Kafka keeps them in the compacted topic __consumer_offsets, so a commit
// costs a produce: here, a WAL object upload and a commit. In the
// coordinator a commit is one record in the next log entry, which the loop
// groups with whatever else is in flight: its latency is one log append,
// and it puts nothing in the bucket. A group's offsets live in one shard,
// ShardOfGroup (the FNV-1a hash of its name modulo the shards), whichever
// shards serve the topics; they are keyed as in Kafka by group, topic name
// and partition, and carry the topic's ID so that a reader can tell those
// of a topic deleted (or deleted and created again) since. They are not
// mirrored in memory: no check reads them. The table group_offsets holds
// them (see schema), so snapshots and rebuilds carry them.
//
// A group's claims fence its coordinators. Whoever takes over a group (a
// Kafka broker that became its coordinator) first claims it (ClaimGroup):
// one record that raises the group's claim epoch, answered with the new
// epoch. Commits and deletes made under a claim carry its epoch, and the
// leader refuses, with NOT_COORDINATOR, those under an epoch older than
// the group's: a coordinator that lost the group without knowing it (it
// was frozen, or partitioned away, while another took over) cannot move
// the group's offsets back once the new one has read them. The claims are
// in the view (the checks read them) and in the table group_claims; they
// are kept when a group's offsets are deleted, so epochs never repeat.

// --- CommitOffsets ------------------------------------------------------

// CommitOffsets commits offsets of a group, all in one record, replacing
// what the group had for each partition: a later commit wins. claim is
// the epoch of the caller's claim on the group (ClaimGroup), 0 for none.
// The coordinator does not check that the topics exist (they may be
// another shard's): the caller does, and sets TopicID.
//
// Errors carry Kafka's codes: INVALID_GROUP_ID (no name), NOT_COORDINATOR
// (claim older than the group's), INVALID_TOPIC_EXCEPTION (a topic name
// Kafka would refuse), UNKNOWN_TOPIC_OR_PARTITION (a negative
// partition), OFFSET_METADATA_TOO_LARGE (metadata over
// MaxGroupOffsetMetadata), INVALID_REQUEST (a partition twice); nothing
// is committed then.
func (l *leader) CommitOffsets(ctx context.Context, group string, claim int64, offsets []GroupOffset) error {
	o := &state.CommitOffsetsOp{BaseOp: state.NewBaseOp(ctx), Group: group, Claim: claim, Offsets: offsets}
	return l.submit(ctx, o, o.Done)
}

// --- DeleteOffsets ------------------------------------------------------

// DeleteOffsets deletes a group's committed offsets: those of parts, or
// every one when parts is nil. Partitions without one are ignored. claim
// is as for CommitOffsets.
func (l *leader) DeleteOffsets(ctx context.Context, group string, claim int64, parts []GroupPartition) error {
	o := &state.DeleteOffsetsOp{BaseOp: state.NewBaseOp(ctx), Group: group, Claim: claim, Parts: parts}
	return l.submit(ctx, o, o.Done)
}

// --- ClaimGroup ---------------------------------------------------------

// ClaimGroup claims a group for its caller: it raises the group's claim
// epoch and returns the new one, durable. Commits and deletes under an
// older claim are refused from then on.
func (l *leader) ClaimGroup(ctx context.Context, group string) (int64, error) {
	o := &state.ClaimGroupOp{BaseOp: state.NewBaseOp(ctx), Group: group}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return 0, err
	}
	return o.Epoch, nil
}

// --- PutGroupMetadata ---------------------------------------------------

// PutGroupMetadata stores a group's metadata: value, of generation,
// replacing what the group had unless that is of a later generation (a
// store that lost a race to a later one changes nothing); an empty value
// deletes it, whatever its generation. claim is as for CommitOffsets.
func (l *leader) PutGroupMetadata(ctx context.Context, group string, claim, generation int64, value []byte) error {
	o := &state.PutGroupMetadataOp{BaseOp: state.NewBaseOp(ctx), Group: group, Claim: claim, Generation: generation, Value: value}
	return l.submit(ctx, o, o.Done)
}

// --- reads --------------------------------------------------------------

// GroupMetadata returns a group's metadata and its generation, as last
// stored (PutGroupMetadata); nil if none.
func (l *leader) GroupMetadata(ctx context.Context, group string) (GroupMetadata, error) {
	if err := state.CheckGroupName(group); err != nil {
		return GroupMetadata{}, err
	}
	if err := l.readBarrier(ctx, l.applied.Load()); err != nil {
		return GroupMetadata{}, err
	}
	if err := l.confirmLeader(ctx); err != nil {
		return GroupMetadata{}, err
	}
	var m GroupMetadata
	err := l.store.Reader.GroupMetadataStmt.QueryRowContext(ctx, group).Scan(&m.Generation, &m.Value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return GroupMetadata{}, nil
	case err != nil:
		return GroupMetadata{}, fmt.Errorf("coordinator: reading the metadata of group %q: %w", group, err)
	}
	return m, nil
}

// GroupMetadata is a group's metadata as its coordinator stored it
// (PutGroupMetadata): an opaque value, and the generation it is of.
type GroupMetadata struct {
	Generation int64
	Value      []byte // nil: none stored
}

// FetchOffsets returns a group's committed offsets, by topic and
// partition: those of parts (a partition without one is left out), or
// every one when parts is nil. It holds every commit answered so far.
func (l *leader) FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]GroupOffset, error) {
	if err := state.CheckGroupName(group); err != nil {
		return nil, err
	}
	if err := l.readBarrier(ctx, l.applied.Load()); err != nil {
		return nil, err
	}
	if err := l.confirmLeader(ctx); err != nil {
		return nil, err
	}
	return l.store.Reader.GroupOffsets(ctx, group, parts)
}

// OffsetGroups returns the groups with committed offsets in this shard,
// sorted.
func (l *leader) OffsetGroups(ctx context.Context) ([]string, error) {
	if err := l.readBarrier(ctx, l.applied.Load()); err != nil {
		return nil, err
	}
	if err := l.confirmLeader(ctx); err != nil {
		return nil, err
	}
	return l.store.Reader.OffsetGroups(ctx)
}

// --- the store ----------------------------------------------------------

// --- the Coordinator ----------------------------------------------------

// groupShard returns the shard of a group's offsets.
func (c *Coordinator) groupShard(group string) (shardAPI, error) {
	if err := state.CheckGroupName(group); err != nil {
		return nil, err
	}
	return c.shard(ShardOfGroup(group, c.Shards().NumShards()))
}

// CommitOffsets commits offsets of a group, all in one record of its
// shard's log (ShardOfGroup), replacing what the group had for each
// partition. claim is the epoch of the caller's claim on the group
// (ClaimGroup), 0 for none. The caller checks that the topics exist, and
// sets TopicID.
//
// Errors carry Kafka's codes: INVALID_GROUP_ID (no name), NOT_COORDINATOR
// (claim older than the group's latest), INVALID_TOPIC_EXCEPTION (a topic
// name Kafka would refuse), UNKNOWN_TOPIC_OR_PARTITION (a negative
// partition), OFFSET_METADATA_TOO_LARGE (metadata over
// MaxGroupOffsetMetadata), INVALID_REQUEST (a partition twice); nothing
// is committed then.
func (c *Coordinator) CommitOffsets(ctx context.Context, group string, claim int64, offsets []GroupOffset) error {
	sh, err := c.groupShard(group)
	if err != nil {
		return err
	}
	return sh.CommitOffsets(ctx, group, claim, offsets)
}

// PutGroupMetadata stores a group's metadata in its shard (ShardOfGroup):
// an opaque value (a Kafka broker's GroupMetadataValue, say), of
// generation, replacing what the group had unless that is of a later
// generation; an empty value deletes it. claim is as for CommitOffsets
// (NOT_COORDINATOR under a claim older than the group's); a value over
// MaxGroupMetadata is RECORD_LIST_TOO_LARGE.
func (c *Coordinator) PutGroupMetadata(ctx context.Context, group string, claim, generation int64, value []byte) error {
	sh, err := c.groupShard(group)
	if err != nil {
		return err
	}
	return sh.PutGroupMetadata(ctx, group, claim, generation, value)
}

// GroupMetadata returns a group's metadata as last stored
// (PutGroupMetadata), by any broker; Value nil if none.
func (c *Coordinator) GroupMetadata(ctx context.Context, group string) (GroupMetadata, error) {
	sh, err := c.groupShard(group)
	if err != nil {
		return GroupMetadata{}, err
	}
	return sh.GroupMetadata(ctx, group)
}

// ClaimGroup claims a group for its caller (a broker taking over as the
// group's coordinator) and returns the claim's epoch, higher than every
// one before: from when it returns, CommitOffsets and DeleteOffsets under
// an older claim fail with NOT_COORDINATOR, so a coordinator that lost
// the group without knowing it commits nothing more. FetchOffsets after
// it sees every commit made under the claims before.
func (c *Coordinator) ClaimGroup(ctx context.Context, group string) (int64, error) {
	sh, err := c.groupShard(group)
	if err != nil {
		return 0, err
	}
	return sh.ClaimGroup(ctx, group)
}

// FetchOffsets returns a group's committed offsets, by topic and
// partition: those of parts (a partition without one is left out), or
// every one when parts is nil. It holds every commit answered so far, by
// any broker.
func (c *Coordinator) FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]GroupOffset, error) {
	sh, err := c.groupShard(group)
	if err != nil {
		return nil, err
	}
	return sh.FetchOffsets(ctx, group, parts)
}

// DeleteOffsets deletes a group's committed offsets: those of parts, or
// every one when parts is nil. Partitions without one are ignored. claim
// is as for CommitOffsets.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, claim int64, parts []GroupPartition) error {
	sh, err := c.groupShard(group)
	if err != nil {
		return err
	}
	return sh.DeleteOffsets(ctx, group, claim, parts)
}

// OffsetGroups returns every group with committed offsets, sorted: it
// asks every shard.
func (c *Coordinator) OffsetGroups(ctx context.Context) ([]string, error) {
	shards, err := c.all()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sh := range shards {
		gs, err := sh.OffsetGroups(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, gs...)
	}
	slices.SortFunc(out, strings.Compare)
	return slices.Compact(out), nil
}
