package coordinator

import (
	"cmp"
	"context"
	"sync"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Altering a topic's config (Kafka's AlterConfigs and
// IncrementalAlterConfigs of the configs a TopicConfig holds). One record
// (alterTopicRecord) replaces the config of a topic of the shard, its
// partition count aside; every shard serving the topic applies one. What
// reads the config reads it when it acts: retention and compaction at
// their next pass, produce at the next request (the Broker's cached
// topics once it refreshes them), the tiered offloader of package replica
// when it is assigned the partition again (a broker's restart).
// message.timestamp.type cannot change: Fetch stamps a LogAppendTime
// topic's batches as it serves them, so a change would rewrite what was
// already read.

// alterTopicRecord replaces a topic's config (its partitions aside).
type alterTopicRecord struct {
	TopicID uuid.UUID
	Config  TopicConfig
}

func (alterTopicRecord) kind() recordType { return recAlterTopic }

func (r alterTopicRecord) appendTo(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	return appendTopicConfig(b, r.Config)
}

func (d *decoder) alterTopic() alterTopicRecord {
	return alterTopicRecord{TopicID: d.uuid(), Config: d.topicConfig()}
}

// applyAlter applies an alter topic record to the view.
func (v *view) applyAlter(r alterTopicRecord) {
	t := v.topic(r.TopicID)
	if t == nil {
		return
	}
	c := *t
	c.Config = r.Config
	c.Config.Partitions = t.Partitions
	v.setTopic(c.ID, c.Name, &c)
}

type alterTopicOp struct {
	baseOp
	id  uuid.UUID
	cfg TopicConfig
}

func (o *alterTopicOp) check(g *group) {
	t := g.spec.topic(o.id)
	switch {
	case t == nil:
		o.finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", o.id))
		return
	case o.cfg.check() != nil:
		o.finish(o.cfg.check())
		return
	}
	cfg := o.cfg.normalized()
	cfg.Partitions = t.Partitions
	switch {
	case cfg.LogAppendTime != t.Config.LogAppendTime:
		o.finish(kafkaerr.New(kafkaerr.InvalidConfig, "message.timestamp.type cannot change on a diskless topic: its batches are stamped as they are read"))
		return
	case cfg == t.Config:
		o.finish(nil) // nothing changes: a repeated request
		return
	}
	g.add(alterTopicRecord{TopicID: o.id, Config: cfg})
}

// AlterTopicConfig replaces the config of a topic of this shard (see
// Coordinator.AlterTopicConfig).
func (c *leader) AlterTopicConfig(ctx context.Context, id uuid.UUID, cfg TopicConfig) error {
	o := &alterTopicOp{baseOp: newBaseOp(ctx), id: id, cfg: cfg}
	return c.submit(ctx, o, o.done)
}

// The writer's statement of an altered topic.
const sqlUpdateTopicConfig = "UPDATE topics SET retention_ms = ?, retention_bytes = ?, flags = ?, max_message_bytes = ?, segment_bytes = ?, segment_ms = ?, " +
	"delete_retention_ms = ?, min_compaction_lag_ms = ?, max_compaction_lag_ms = ?, min_cleanable_dirty_ratio = ? WHERE topic_id = ?"

// alterTopic writes an alter topic record, given the topic as the record
// left it.
func (s *store) alterTopic(ctx context.Context, t *topicState) error {
	if t == nil {
		return nil
	}
	c := t.Config
	_, err := s.exec(ctx, sqlUpdateTopicConfig, c.retentionMs(), c.RetentionBytes, c.flags(), c.MaxMessageBytes, c.SegmentBytes, c.segmentMs(),
		c.DeleteRetention.Milliseconds(), c.MinCompactionLag.Milliseconds(), c.MaxCompactionLag.Milliseconds(), c.MinCleanableDirtyRatio, t.ID[:])
	return err
}

// AlterTopicConfig replaces a topic's config with cfg, its partition
// count aside (cfg.Partitions is ignored), in every shard that serves the
// topic, concurrently; zeros are the defaults, as at creation. Errors
// carry Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (a value
// out of range, or a change of LogAppendTime). If a shard fails, the
// error is returned; the same call made again finishes the change (a shard
// that has it already changes nothing).
func (s *Coordinator) AlterTopicConfig(ctx context.Context, topicID uuid.UUID, cfg TopicConfig) error {
	if s.remotes != nil {
		if _, err := s.localShard(0); err != nil {
			_, err := remoteCall[bool](ctx, s.remotes[0], fwAdminAlter, alterTopicCall{TopicID: topicID, Config: cfg})
			s.refreshCatalog(ctx)
			return err
		}
	}
	return s.alterTopic(ctx, topicID, cfg)
}

// alterTopicCall is the request of a forwarded AlterTopicConfig.
type alterTopicCall struct {
	TopicID uuid.UUID
	Config  TopicConfig
}

// alterTopic is AlterTopicConfig done here (one process, or the leader
// of shard 0 of a cluster).
func (s *Coordinator) alterTopic(ctx context.Context, id uuid.UUID, cfg TopicConfig) error {
	if s.remotes != nil {
		s.refreshCatalog(ctx)
	}
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.RLock()
	st := s.mu.topics[id]
	var serving []int
	if st != nil {
		serving = append(serving, st.shards...)
	}
	s.mu.RUnlock()
	if st == nil {
		return kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", id)
	}
	errs := make([]error, len(serving))
	var wg sync.WaitGroup
	for j, i := range serving {
		wg.Go(func() {
			c, err := s.shard(i)
			if err == nil {
				err = c.AlterTopicConfig(ctx, id, cfg)
			}
			errs[j] = err
		})
	}
	wg.Wait()
	var firstErr error
	done := 0
	for j, err := range errs {
		if err != nil {
			s.logger.Warn("coordinator: altering a topic's config", zap.Stringer("topic", id), zap.Int("shard", serving[j]), zap.Error(err))
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		done++
	}
	if done > 0 {
		// Some shards have the new config (all, unless one failed: the
		// same call again finishes it); the catalog shows it.
		s.mu.Lock()
		if st := s.mu.topics[id]; st != nil {
			c := cfg.normalized()
			c.Partitions = st.info.Partitions
			st.info.Config = c
		}
		s.mu.Unlock()
	}
	return firstErr
}
