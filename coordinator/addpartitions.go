package coordinator

import (
	"context"
	"slices"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Adding partitions to a topic (Kafka's CreatePartitions).
//
// A topic's partitions are numbered by PIDs, this shard's partition
// numbers: at creation, partition i has PID FirstPID+i. Partitions added
// later get a new range of PIDs, an extent: from partition From on,
// partition i has PID FirstPID+(i-From) of the extent (topicState.pid).
// The extents are in the table topic_extents; the topics row holds the
// count and the served partitions. One record (addPartitionsRecord) raises
// the count, adding an extent, and names the new partitions this shard
// serves; the same record with the count unchanged only adds served
// partitions of the ranges already there (a Coordinator that finishes an
// addition a shard failed before).

// --- AddPartitions (a shard) -------------------------------------------

// AddPartitions adds partitions to a topic of this shard. Errors carry
// Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (fewer
// partitions than the topic has, or as many with nothing to assign),
// INVALID_REQUEST. A request repeated once it is done changes nothing.
func (l *leader) AddPartitions(ctx context.Context, req AddPartitionsRequest) error {
	o := &state.AddPartitionsOp{BaseOp: state.NewBaseOp(ctx), Req: req}
	return l.submit(ctx, o, o.Done)
}

// --- the store ----------------------------------------------------------

// --- the Coordinator ----------------------------------------------------

// AddPartitions raises a topic's partition count to partitions, as
// Kafka's CreatePartitions: each new partition is assigned a shard (the
// least loaded, as at creation), and every shard that serves the topic
// learns the new count, concurrently. Errors carry Kafka's codes:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not more than it has).
// If a shard fails, the error is returned; the others have their
// partitions, and the same call made again finishes the addition.
func (c *Coordinator) AddPartitions(ctx context.Context, topicID uuid.UUID, partitions int32) error {
	if c.remotes == nil {
		return c.addPartitions(ctx, topicID, partitions)
	}
	if _, err := c.localShard(0); err == nil {
		return c.addPartitions(ctx, topicID, partitions)
	}
	_, err := remoteCall[bool](ctx, c.remotes[0], fwAdminAdd, addPartitionsCall{TopicID: topicID, Partitions: partitions})
	c.refreshCatalog(ctx)
	return err
}

// addPartitionsCall is the request of a forwarded AddPartitions.
type addPartitionsCall struct {
	TopicID    uuid.UUID
	Partitions int32
}

// addPartitions is AddPartitions done here (one process, or the leader of
// shard 0 of a cluster).
func (c *Coordinator) addPartitions(ctx context.Context, id uuid.UUID, total int32) error {
	unlock := c.lockAdmin(ctx)
	defer unlock()
	c.mu.RLock()
	st := c.mu.topics[id]
	var info TopicInfo
	var serving []int
	var unserved []int32 // partitions below total no shard serves yet
	counts := slices.Clone(c.mu.counts)
	if st != nil {
		info, serving = st.info, slices.Clone(st.shards)
		for p := int32(0); p < total; p++ {
			if _, ok := c.mu.parts[wal.TopicPartition{TopicID: id, Partition: p}]; !ok {
				unserved = append(unserved, p)
			}
		}
	}
	c.mu.RUnlock()
	switch {
	case st == nil:
		return kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", id)
	case total <= info.Partitions && len(unserved) == 0:
		return kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s has %d partitions, not fewer than %d", info.Name, info.Partitions, total)
	}
	assigned := assignLeastLoaded(counts, unserved)
	// One shard serving the whole topic, and getting every new
	// partition, keeps serving "all".
	whole := len(serving) == 1 && len(unserved) > 0 && len(assigned[serving[0]]) == len(unserved) && unserved[0] == info.Partitions
	_, errs := fanOut(len(counts), func(i int) bool { return slices.Contains(serving, i) || len(assigned[i]) > 0 }, func(i int) (struct{}, error) {
		sh, err := c.shard(i)
		if err != nil {
			return struct{}{}, err
		}
		// Bounded, as a creation's calls (topicrepair.go).
		ctx, cancel := context.WithTimeout(ctx, adminCallTimeout)
		defer cancel()
		if !slices.Contains(serving, i) {
			req := CreatePartitionsRequest{TopicID: id, Name: info.Name, Partitions: total, Config: info.Config, Assigned: assigned[i]}
			if _, err = sh.CreatePartitions(ctx, req); kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
				return struct{}{}, err
			}
		}
		req := AddPartitionsRequest{TopicID: id, Partitions: total, Assigned: assigned[i]}
		if req.Assigned == nil {
			req.Assigned = []int32{}
		}
		if whole {
			req.Assigned = nil
		}
		return struct{}{}, sh.AddPartitions(ctx, req)
	})
	return c.noteAdded(id, info, total, assigned, whole, errs)
}

// noteAdded records in the catalog the partitions each shard added (errs
// says which failed: the first error is returned).
func (c *Coordinator) noteAdded(id uuid.UUID, info TopicInfo, total int32, assigned [][]int32, whole bool, errs []error) error {
	var firstErr error
	c.mu.Lock()
	for i, err := range errs {
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			c.logger.Warn("coordinator: adding partitions", zap.Stringer("topic", id), zap.Int("shard", i), zap.Error(err))
			continue
		}
		got := TopicInfo{ID: id, Name: info.Name, Partitions: total, Config: info.Config, Assigned: assigned[i]}
		switch {
		case i < len(c.mu.coords) && c.mu.coords[i] != nil:
			// A shard of this process: its own view.
			t, ok := c.mu.coords[i].pub.Topic(id)
			if !ok {
				continue
			}
			got = t
		case whole:
			got.Assigned = nil
		case len(assigned[i]) == 0:
			continue // serves none of the new ones
		}
		c.addLocked(i, got)
	}
	if firstErr == nil {
		if st := c.mu.topics[id]; st != nil {
			st.info.Partitions = total
			st.info.Config.Partitions = total
		}
	}
	c.mu.Unlock()
	return firstErr
}

// lockAdmin takes the lock of topic administration, after bringing the
// catalog up to date in a cluster (what the leader of shard 0 before
// this one did); it returns the unlock.
func (c *Coordinator) lockAdmin(ctx context.Context) (unlock func()) {
	if c.remotes != nil {
		c.refreshCatalog(ctx)
	}
	c.adminSem <- struct{}{}
	return func() { <-c.adminSem }
}
