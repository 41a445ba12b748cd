package store

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"
)

// The writer's statement of an altered topic.
const sqlUpdateTopicConfig = "UPDATE topics SET retention_ms = ?, retention_bytes = ?, flags = ?, max_message_bytes = ?, segment_bytes = ?, segment_ms = ?, " +
	"delete_retention_ms = ?, min_compaction_lag_ms = ?, max_compaction_lag_ms = ?, min_cleanable_dirty_ratio = ? WHERE topic_id = ?"

// alterTopic writes an alter topic record, given the topic as the record
// left it.
func (s *DB) alterTopic(ctx context.Context, t *state.TopicState) error {
	if t == nil {
		return nil
	}
	c := t.Config
	_, err := s.exec(ctx, sqlUpdateTopicConfig, c.RetentionMs(), c.RetentionBytes, c.Flags(), c.MaxMessageBytes, c.SegmentBytes, c.SegmentMs(),
		c.DeleteRetention.Milliseconds(), c.MinCompactionLag.Milliseconds(), c.MaxCompactionLag.Milliseconds(), c.MinCleanableDirtyRatio, t.ID[:])
	return err
}
