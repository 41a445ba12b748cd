package coordinator

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// catalogFresh is how old, in a cluster, the catalog may be for Topics.
const catalogFresh = 200 * time.Millisecond

// Topics returns every topic, by name (in a cluster, as the leaders of
// the shards knew them at most catalogFresh ago). Assigned is nil: see ShardOf.
func (c *Coordinator) Topics(ctx context.Context) ([]TopicInfo, error) {
	if c.remotes != nil {
		c.mu.RLock()
		stale := clock.Since(c.clock, c.mu.catalogAt) > catalogFresh
		c.mu.RUnlock()
		if stale {
			c.refreshCatalog(ctx)
		}
	}
	c.mu.RLock()
	out := make([]TopicInfo, 0, len(c.mu.topics))
	for _, t := range c.mu.topics {
		out = append(out, t.info)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CreatePartitions creates a topic and assigns each of its partitions a
// shard (see Coordinator): the shards that get some create the topic with those,
// concurrently. It returns the topic's ID. req.Assigned must be nil. If a
// shard fails, the topic is deleted from the others (best effort: what
// remains is in Topics, and DeleteTopic removes it) and the error returned.
func (c *Coordinator) CreatePartitions(ctx context.Context, req CreatePartitionsRequest) (uuid.UUID, error) {
	if c.remotes == nil {
		return c.createPartitions(ctx, req)
	}
	if _, err := c.localShard(0); err == nil {
		return c.createPartitions(ctx, req)
	}
	id, err := remoteCall[uuid.UUID](ctx, c.remotes[0], fwAdminCreate, req)
	c.refreshCatalog(ctx)
	return id, err
}

// createPartitions is CreatePartitions where this broker assigns the
// partitions (one process, or the leader of shard 0 of a cluster).
func (c *Coordinator) createPartitions(ctx context.Context, req CreatePartitionsRequest) (uuid.UUID, error) {
	if c.remotes != nil {
		c.refreshCatalog(ctx) // what the leader of shard 0 before this one created
	}
	if req.Assigned != nil {
		return uuid.UUID{}, kafkaerr.New(kafkaerr.InvalidRequest, "Coordinator assigns the partitions of a topic itself")
	}
	if req.Partitions < 1 {
		return uuid.UUID{}, kafkaerr.New(kafkaerr.InvalidPartitions, "a topic needs at least 1 partition, not %d", req.Partitions)
	}
	c.adminSem <- struct{}{}
	defer func() { <-c.adminSem }()
	id := req.TopicID
	if id == (uuid.UUID{}) {
		id = uuid.New()
	}
	c.mu.RLock()
	_, nameTaken := c.mu.names[req.Name]
	_, idTaken := c.mu.topics[id]
	counts := slices.Clone(c.mu.counts)
	c.mu.RUnlock()
	switch {
	case nameTaken:
		return uuid.UUID{}, kafkaerr.New(kafkaerr.TopicAlreadyExists, "topic %q already exists", req.Name)
	case idTaken:
		return uuid.UUID{}, kafkaerr.New(kafkaerr.TopicAlreadyExists, "a topic with ID %s already exists", id)
	}
	assigned := assignLeastLoaded(counts, state.AllPartitions(req.Partitions))
	var shards []int
	for i, a := range assigned {
		if len(a) > 0 {
			shards = append(shards, i)
		}
	}
	_, errs := fanOut(len(counts), func(i int) bool { return len(assigned[i]) > 0 }, func(i int) (uuid.UUID, error) {
		sh, err := c.shard(i)
		if err != nil {
			return uuid.UUID{}, err
		}
		r := req
		r.TopicID = id
		if int32(len(assigned[i])) < req.Partitions {
			r.Assigned = assigned[i]
		}
		// Bounded, so that no creation lands after a repair
		// (topicrepair.go) assigned its partitions elsewhere.
		ctx, cancel := context.WithTimeout(ctx, adminCallTimeout)
		defer cancel()
		return sh.CreatePartitions(ctx, r)
	})
	var firstErr error
	var created, maybe []int // maybe: created, or an answer lost
	for _, i := range shards {
		switch {
		case errs[i] == nil:
			created = append(created, i)
			maybe = append(maybe, i)
		case errors.Is(errs[i], ErrOutcomeUnknown):
			maybe = append(maybe, i)
		}
		if errs[i] != nil && firstErr == nil {
			firstErr = errs[i]
		}
	}
	if firstErr != nil {
		// Undone where it may be: where it was created, and where the
		// answer was lost, as the call may have created it (a retry of
		// such a call is refused as TOPIC_ALREADY_EXISTS, having
		// created it the first time). A shard that does not have it
		// answers UNKNOWN_TOPIC_ID, which counts as undone.
		created = c.undoCreate(ctx, id, maybe)
		if len(created) == 0 && kafkaerr.CodeOf(firstErr) == kafkaerr.TopicAlreadyExists && errors.Is(firstErr, ErrOutcomeUnknown) {
			// The name was taken by this very create, now undone: the
			// caller may try again.
			firstErr = &kafkaerr.Error{Code: kafkaerr.RequestTimedOut, Message: "creating the topic: a shard's answer was lost; undone, try again", Err: firstErr}
		}
	}
	c.mu.Lock()
	for _, i := range created {
		info := TopicInfo{ID: id, Name: req.Name, Partitions: req.Partitions, Config: req.Config, Assigned: assigned[i]}
		if i < len(c.mu.coords) && c.mu.coords[i] != nil {
			// The shard's own view has the defaults filled in.
			if got, ok := c.mu.coords[i].pub.Topic(id); ok {
				info.Config = got.Config
			}
		}
		c.addLocked(i, info)
	}
	c.mu.Unlock()
	if firstErr != nil {
		return uuid.UUID{}, firstErr
	}
	return id, nil
}

// undoCreate deletes the topic id from the shards that may have created
// it when others could not, so that a retry starts clean. It returns the shards
// where it is still there.
func (c *Coordinator) undoCreate(ctx context.Context, id uuid.UUID, created []int) []int {
	var kept []int
	for _, i := range created {
		sh, err := c.shard(i)
		if err == nil {
			err = sh.DeleteTopic(ctx, id)
		}
		if err != nil && kafkaerr.CodeOf(err) != kafkaerr.UnknownTopicID {
			c.logger.Warn("coordinator: undoing a topic that some shards could not create", zap.Int("shard", i), zap.Error(err))
			kept = append(kept, i)
		}
	}
	return kept
}

// DeleteTopic deletes a topic from every shard that serves some of its
// partitions, concurrently. A shard that no longer has it counts as done,
// so a failed call can be repeated.
func (c *Coordinator) DeleteTopic(ctx context.Context, id uuid.UUID) error {
	if c.remotes == nil {
		return c.deleteTopic(ctx, id)
	}
	if _, err := c.localShard(0); err == nil {
		return c.deleteTopic(ctx, id)
	}
	_, err := remoteCall[bool](ctx, c.remotes[0], fwAdminDelete, id)
	c.refreshCatalog(ctx)
	return err
}

// deleteTopic is DeleteTopic done here (one process, or the leader of
// shard 0 of a cluster).
func (c *Coordinator) deleteTopic(ctx context.Context, id uuid.UUID) error {
	if c.remotes != nil {
		c.refreshCatalog(ctx)
	}
	c.adminSem <- struct{}{}
	defer func() { <-c.adminSem }()
	c.mu.RLock()
	var shards []int
	if t := c.mu.topics[id]; t != nil {
		shards = slices.Clone(t.shards)
	}
	c.mu.RUnlock()
	if len(shards) == 0 {
		return kafkaerr.New(kafkaerr.UnknownTopicID, "no topic has ID %s", id)
	}
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for k, i := range shards {
		wg.Go(func() {
			sh, err := c.shard(i)
			if err == nil {
				err = sh.DeleteTopic(ctx, id)
			}
			if kafkaerr.CodeOf(err) == kafkaerr.UnknownTopicID {
				err = nil
			}
			errs[k] = err
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var firstErr error
	for k, i := range shards {
		if errs[k] == nil {
			c.removeLocked(i, id)
		} else if firstErr == nil {
			firstErr = errs[k]
		}
	}
	return firstErr
}

// DeleteRecords raises a partition's log start offset to offset (-1: the
// high watermark) and returns the new low watermark. An offset above the
// high watermark is OFFSET_OUT_OF_RANGE. Batch runs and remote segments
// wholly below the new log start go (one that straddles it stays), and
// the diskless start offset rises to it if it was below.
// It reads tp's shard.
func (c *Coordinator) DeleteRecords(ctx context.Context, tp wal.TopicPartition, offset int64) (int64, error) {
	sh, err := c.shardFor(ctx, tp)
	if err != nil {
		return -1, err
	}
	return sh.DeleteRecords(ctx, tp, offset)
}
