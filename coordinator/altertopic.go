package coordinator

import (
	"cmp"
	"context"
	"slices"

	"github.com/diskless-go/diskless/coordinator/state"

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

// AlterTopicConfig replaces the config of a topic of this shard (see
// Coordinator.AlterTopicConfig).
func (l *leader) AlterTopicConfig(ctx context.Context, id uuid.UUID, cfg TopicConfig) error {
	o := &state.AlterTopicOp{BaseOp: state.NewBaseOp(ctx), ID: id, Cfg: cfg}
	return l.submit(ctx, o, o.Done)
}

// AlterTopicConfig replaces a topic's config with cfg, its partition
// count aside (cfg.Partitions is ignored), in every shard that serves the
// topic, concurrently; zeros are the defaults, as at creation. Errors
// carry Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (a value
// out of range, or a change of LogAppendTime). If a shard fails, the
// error is returned; the same call made again finishes the change (a shard
// that has it already changes nothing).
func (c *Coordinator) AlterTopicConfig(ctx context.Context, topicID uuid.UUID, cfg TopicConfig) error {
	if c.remotes != nil {
		if _, err := c.localShard(0); err != nil {
			_, err := remoteCall[bool](ctx, c.remotes[0], fwAdminAlter, alterTopicCall{TopicID: topicID, Config: cfg})
			c.refreshCatalog(ctx)
			return err
		}
	}
	return c.alterTopic(ctx, topicID, cfg)
}

// alterTopicCall is the request of a forwarded AlterTopicConfig.
type alterTopicCall struct {
	TopicID uuid.UUID
	Config  TopicConfig
}

// alterTopic is AlterTopicConfig done here (one process, or the leader
// of shard 0 of a cluster).
func (c *Coordinator) alterTopic(ctx context.Context, id uuid.UUID, cfg TopicConfig) error {
	unlock := c.lockAdmin(ctx)
	defer unlock()
	c.mu.RLock()
	st := c.mu.topics[id]
	var serving []int
	if st != nil {
		serving = slices.Clone(st.shards)
	}
	c.mu.RUnlock()
	if st == nil {
		return kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", id)
	}
	n := 0
	for _, i := range serving {
		n = max(n, i+1)
	}
	_, errs := fanOut(n, func(i int) bool { return slices.Contains(serving, i) }, func(i int) (struct{}, error) {
		sh, err := c.shard(i)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, sh.AlterTopicConfig(ctx, id, cfg)
	})
	var firstErr error
	done := 0
	for _, i := range serving {
		if err := errs[i]; err != nil {
			c.logger.Warn("coordinator: altering a topic's config", zap.Stringer("topic", id), zap.Int("shard", i), zap.Error(err))
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		done++
	}
	if done > 0 {
		// Some shards have the new config (all, unless one failed: the
		// same call again finishes it); the catalog shows it.
		c.mu.Lock()
		if st := c.mu.topics[id]; st != nil {
			sh := cfg.Normalized()
			sh.Partitions = st.info.Partitions
			st.info.Config = sh
		}
		c.mu.Unlock()
	}
	return firstErr
}
