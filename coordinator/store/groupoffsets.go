package store

import (
	"context"
	"fmt"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/google/uuid"
)

// The read pool's statements of committed offsets.
const (
	groupOffsetsQuery  = "SELECT topic, topic_id, partition, committed_offset, leader_epoch, metadata, commit_time FROM group_offsets WHERE grp = ? ORDER BY topic, partition"
	offsetGroupsQuery  = "SELECT DISTINCT grp FROM group_offsets ORDER BY grp"
	groupMetadataQuery = "SELECT generation, value FROM group_metadata WHERE grp = ?"
)

func (r *reader) GroupOffsets(ctx context.Context, group string, parts []state.GroupPartition) ([]state.GroupOffset, error) {
	rows, err := r.groupOffsetsStmt.QueryContext(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("coordinator: reading the offsets of group %q: %w", group, err)
	}
	defer rows.Close()
	var want map[state.GroupPartition]bool
	if parts != nil {
		want = make(map[state.GroupPartition]bool, len(parts))
		for _, p := range parts {
			want[p] = true
		}
	}
	out := []state.GroupOffset{}
	for rows.Next() {
		var o state.GroupOffset
		var id []byte
		if err := rows.Scan(&o.Topic, &id, &o.Partition, &o.Offset, &o.LeaderEpoch, &o.Metadata, &o.CommitTime); err != nil {
			return nil, fmt.Errorf("coordinator: reading the offsets of group %q: %w", group, err)
		}
		if len(id) != len(o.TopicID) {
			return nil, fmt.Errorf("coordinator: an offset of group %q has a topic ID of %d bytes", group, len(id))
		}
		o.TopicID = uuid.UUID(id)
		if want == nil || want[state.GroupPartition{Topic: o.Topic, Partition: o.Partition}] {
			out = append(out, o)
		}
	}
	return out, rows.Err()
}

func (r *reader) OffsetGroups(ctx context.Context) ([]string, error) {
	rows, err := r.offsetGroupsStmt.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing the groups with offsets: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, fmt.Errorf("coordinator: listing the groups with offsets: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// The writer's statements of committed offsets.
const (
	sqlUpsertGroupOffset = `INSERT INTO group_offsets (grp, topic, partition, topic_id, committed_offset, leader_epoch, metadata, commit_time)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (grp, topic, partition) DO UPDATE SET topic_id = excluded.topic_id, committed_offset = excluded.committed_offset,
leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, commit_time = excluded.commit_time`
	sqlDeleteGroupOffset      = "DELETE FROM group_offsets WHERE grp = ? AND topic = ? AND partition = ?"
	sqlDeleteGroupOffsets     = "DELETE FROM group_offsets WHERE grp = ?"
	sqlDeleteTopicGroupOffset = "DELETE FROM group_offsets WHERE topic_id = ?"
	sqlUpsertGroupMetadata    = `INSERT INTO group_metadata (grp, generation, value, stored_at) VALUES (?, ?, ?, ?)
ON CONFLICT (grp) DO UPDATE SET generation = excluded.generation, value = excluded.value, stored_at = excluded.stored_at
WHERE excluded.generation >= group_metadata.generation`
	sqlDeleteGroupMetadata = "DELETE FROM group_metadata WHERE grp = ?"
	sqlUpsertGroupClaim    = "INSERT INTO group_claims (grp, epoch) VALUES (?, ?) ON CONFLICT (grp) DO UPDATE SET epoch = max(epoch, excluded.epoch)"
)

// commitOffsets writes an offset commit record.
func (s *DB) commitOffsets(ctx context.Context, r state.OffsetCommitRecord) error {
	for _, o := range r.Offsets {
		if _, err := s.exec(ctx, sqlUpsertGroupOffset, r.Group, o.Topic, o.Partition, o.TopicID[:], o.Offset, o.LeaderEpoch, o.Metadata, r.Time); err != nil {
			return err
		}
	}
	return nil
}

// putGroupMetadata writes a group metadata record.
func (s *DB) putGroupMetadata(ctx context.Context, r state.GroupMetadataRecord) error {
	if r.Value == nil {
		_, err := s.exec(ctx, sqlDeleteGroupMetadata, r.Group)
		return err
	}
	_, err := s.exec(ctx, sqlUpsertGroupMetadata, r.Group, r.Generation, r.Value, r.Time)
	return err
}

// claimGroup writes a group claim record.
func (s *DB) claimGroup(ctx context.Context, r state.GroupClaimRecord) error {
	_, err := s.exec(ctx, sqlUpsertGroupClaim, r.Group, r.Epoch)
	return err
}

// deleteOffsets writes an offset delete record.
func (s *DB) deleteOffsets(ctx context.Context, r state.OffsetDeleteRecord) error {
	if r.Partitions == nil {
		_, err := s.exec(ctx, sqlDeleteGroupOffsets, r.Group)
		return err
	}
	for _, p := range r.Partitions {
		if _, err := s.exec(ctx, sqlDeleteGroupOffset, r.Group, p.Topic, p.Partition); err != nil {
			return err
		}
	}
	return nil
}
