package coordinator

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/wal"
)

// Topics left partial, and their repair.
//
// A topic's creation (and a partition addition) asks several shards, each
// for its partitions; when one fails, the creation is undone on the
// others. A shard that cannot be reached then, neither for the creation's
// answer nor for the undo, keeps its part, and the topic is left partial:
// its name taken, some of its partitions served by no shard, before and
// after every broker restarts. A deletion that fails half way leaves the
// same.
//
// The leader of shard 0, which makes every creation and addition, repairs
// them: a topic that every catalog refresh for repairAfter has found
// partial, each time with every shard answering (a shard that does not
// answer may be the one that serves the partitions missing), gets its
// missing partitions assigned and created as an addition that failed half
// way is finished (addPartitions). repairAfter is longer than any call of
// a creation or addition can take (adminCallTimeout), so that none of them
// under way, from this leader or one before it, can still land a
// partition that the repair assigned elsewhere. The records of the
// partitions that were served stay; the failed call's caller, told
// REQUEST_TIMED_OUT or TOPIC_ALREADY_EXISTS, finds the topic whole. A
// topic whose deletion failed half way comes back whole, as a failed
// deletion leaves it in Kafka; deleting it again deletes it.

const (
	// adminCallTimeout bounds each call to a shard of a creation or a
	// partition addition.
	adminCallTimeout = 20 * time.Second
	// repairAfter is how long a topic must be found partial before it is
	// repaired.
	repairAfter = time.Minute
	// repairInterval is how often the leader of shard 0 looks for topics
	// to repair.
	repairInterval = 10 * time.Second
)

// notePartialLocked records the topics that the catalog, just read from
// every shard at now, finds partial, and forgets the others; only where
// shard 0 is led, since its leader alone repairs (a new leader counts
// from its own refreshes). The caller holds c.mu.
func (c *Coordinator) notePartialLocked(now time.Time) {
	old := c.mu.partialSince
	c.mu.partialSince = nil
	if len(c.mu.coords) == 0 || c.mu.coords[0] == nil {
		return
	}
	for id, st := range c.mu.topics {
		for p := range st.info.Partitions {
			if _, ok := c.mu.parts[wal.TopicPartition{TopicID: id, Partition: p}]; ok {
				continue
			}
			if c.mu.partialSince == nil {
				c.mu.partialSince = map[uuid.UUID]time.Time{}
			}
			since, ok := old[id]
			if !ok {
				since = now
			}
			c.mu.partialSince[id] = since
			break
		}
	}
}

// repairTopics, on the leader of shard 0, creates the missing partitions
// of each topic found partial for repairAfter.
func (c *Coordinator) repairTopics(ctx context.Context) {
	if _, err := c.localShard(0); err != nil {
		return
	}
	now := c.clock.Now()
	var due []uuid.UUID
	c.mu.RLock()
	for id, since := range c.mu.partialSince {
		if now.Sub(since) >= repairAfter {
			due = append(due, id)
		}
	}
	c.mu.RUnlock()
	for _, id := range due {
		c.mu.RLock()
		st := c.mu.topics[id]
		var info TopicInfo
		if st != nil {
			info = st.info
		}
		c.mu.RUnlock()
		if st == nil {
			continue
		}
		err := c.addPartitions(ctx, id, info.Partitions)
		c.logger.Warn("coordinator: repairing a topic left with partitions no shard serves", zap.String("topic", info.Name), zap.Stringer("id", id), zap.Int32("partitions", info.Partitions), zap.Error(err))
	}
}
