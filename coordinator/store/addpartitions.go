package store

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"
)

// The writer's statements of added partitions.
const (
	sqlUpdateTopicPartitions = "UPDATE topics SET partitions = ?, assigned = ? WHERE topic_id = ?"
	sqlInsertExtent          = "INSERT OR IGNORE INTO topic_extents (topic_id, from_partition, first_pid) VALUES (?, ?, ?)"
	sqlDeleteExtents         = "DELETE FROM topic_extents WHERE topic_id = ?"
	sqlLoadExtents           = "SELECT topic_id, from_partition, first_pid FROM topic_extents ORDER BY topic_id, from_partition"
)

// addPartitions writes an add partitions record, given the topic as the
// record left it.
func (s *DB) addPartitions(ctx context.Context, t *state.TopicState) error {
	if t == nil {
		return nil
	}
	if _, err := s.exec(ctx, sqlUpdateTopicPartitions, t.Partitions, Int32sBlob(t.Assigned), t.ID[:]); err != nil {
		return err
	}
	for _, e := range t.Extents {
		if _, err := s.exec(ctx, sqlInsertExtent, t.ID[:], e.From, e.FirstPID); err != nil {
			return err
		}
	}
	for i := range t.Partitions {
		if pid := t.PID(i); t.Serves(i) && s.bytes[pid] == nil {
			s.bytes[pid] = &partBytes{}
		}
	}
	return nil
}
