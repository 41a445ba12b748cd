package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// shardOptions returns shard i's coordinator options.
func (c *Coordinator) shardOptions(i int) *leaderOptions {
	o := c.opts.leader(i)
	if c.bucket != nil {
		lo := c.opts.Lifecycle
		lo.Bucket = c.bucket
		lo.Peers = c.peer
		o.Lifecycle = &lo
	}
	return &o
}

// errShardDown: a shard is reopening, or Coordinator is closed.
func errShardDown(i int) error {
	return &kafkaerr.Error{Code: kafkaerr.NotLeaderOrFollower, Message: fmt.Sprintf("shard %d", i), Err: ErrShardDown}
}

// shard returns shard i's coordinator: its leader here, or in cluster
// mode the shard as led elsewhere.
func (c *Coordinator) shard(i int) (shardAPI, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(c.mu.coords) {
		return nil, fmt.Errorf("coordinator: no shard %d of %d", i, len(c.mu.coords))
	}
	if c.mu.coords[i] == nil {
		if c.remotes != nil {
			return c.remotes[i], nil
		}
		return nil, errShardDown(i)
	}
	return c.mu.coords[i], nil
}

// peer is every shard's LifecycleOptions.Peers.
func (c *Coordinator) peer(i int) (Peer, error) { return c.shard(i) }

// all returns every shard's coordinator, or an error if one is not open.
func (c *Coordinator) all() ([]shardAPI, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	out := make([]shardAPI, len(c.mu.coords))
	for i, sh := range c.mu.coords {
		switch {
		case sh != nil:
			out[i] = sh
		case c.remotes != nil:
			out[i] = c.remotes[i]
		default:
			return nil, errShardDown(i)
		}
	}
	return out, nil
}

// locals returns the shards led here, by shard (nil: led elsewhere or
// down).
func (c *Coordinator) locals() []*leader {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.mu.coords)
}

// loadCatalog rebuilds the partition map from every shard's topics.
func (c *Coordinator) loadCatalog(ctx context.Context) error {
	coords, err := c.all()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.parts = map[wal.TopicPartition]int{}
	c.mu.topics = map[uuid.UUID]*shardTopic{}
	c.mu.names = map[string]uuid.UUID{}
	c.mu.counts = make([]int, len(coords))
	for i, sh := range coords {
		topics, err := sh.Topics(ctx)
		if err != nil {
			return err
		}
		for _, t := range topics {
			c.addLocked(i, t)
		}
	}
	return nil
}

// addLocked records that shard i serves t.Assigned (nil: all) of t.
func (c *Coordinator) addLocked(i int, t TopicInfo) {
	assigned := t.Assigned
	if assigned == nil {
		assigned = state.AllPartitions(t.Partitions)
	}
	st := c.mu.topics[t.ID]
	if st == nil {
		info := t
		info.Assigned = nil
		st = &shardTopic{info: info}
		c.mu.topics[t.ID] = st
		c.mu.names[t.Name] = t.ID
	}
	if !slices.Contains(st.shards, i) {
		st.shards = append(st.shards, i)
		slices.Sort(st.shards)
	}
	for _, p := range assigned {
		tp := wal.TopicPartition{TopicID: t.ID, Partition: p}
		if prev, ok := c.mu.parts[tp]; ok && prev != i {
			c.logger.Error("coordinator: two shards serve one partition; the first one keeps it", zap.Stringer("partition", tp), zap.Int("shard", prev), zap.Int("other", i))
			continue
		}
		c.mu.parts[tp] = i
		c.mu.counts[i]++
	}
}

// removeLocked forgets that shard i serves any partition of topic id.
func (c *Coordinator) removeLocked(i int, id uuid.UUID) {
	st := c.mu.topics[id]
	if st == nil {
		return
	}
	for p := int32(0); p < st.info.Partitions; p++ {
		tp := wal.TopicPartition{TopicID: id, Partition: p}
		if sh, ok := c.mu.parts[tp]; ok && sh == i {
			delete(c.mu.parts, tp)
			c.mu.counts[i]--
		}
	}
	st.shards = slices.DeleteFunc(st.shards, func(x int) bool { return x == i })
	if len(st.shards) == 0 {
		delete(c.mu.topics, id)
		delete(c.mu.names, st.info.Name)
	}
}

// assignLeastLoaded gives each of parts, in order, to the shard with the
// fewest partitions (counts, which it raises), and returns each shard's.
func assignLeastLoaded(counts []int, parts []int32) [][]int32 {
	assigned := make([][]int32, len(counts))
	for _, p := range parts {
		i := 0
		for j := range counts {
			if counts[j] < counts[i] {
				i = j
			}
		}
		assigned[i] = append(assigned[i], p)
		counts[i]++
	}
	return assigned
}

// local returns shard i's leader here, or errShardDown.
func (c *Coordinator) local(i int) (*leader, error) {
	sh, err := c.localShard(i)
	if errors.Is(err, errNotServed) {
		return nil, errShardDown(i)
	}
	return sh, err
}

// NumShards returns how many shards there are.
func (h Shards) NumShards() int {
	c := h.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.mu.coords)
}

// ShardErr returns why shard i does not serve, or nil while it does. A
// shard stops for good when its log fails (an append that failed every
// attempt, or was fenced: then errors.Is(err, ErrNotLeader), another
// writer holds the log) or its database does, and then answers every call
// with that error, until ReopenShard replays its log into a new one. A
// shard that is reopening answers NOT_LEADER_OR_FOLLOWER; after Close,
// ErrClosed.
func (h Shards) ShardErr(i int) error {
	c := h.c
	sh, err := c.shard(i)
	if err != nil {
		return err
	}
	return sh.Err()
}

// ShardOf returns the shard that serves tp, or UNKNOWN_TOPIC_OR_PARTITION.
func (h Shards) ShardOf(tp wal.TopicPartition) (int, error) {
	c := h.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	i, ok := c.mu.parts[tp]
	if !ok {
		return -1, kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no shard serves partition %s", tp)
	}
	return i, nil
}

func (c *Coordinator) shardFor(ctx context.Context, tp wal.TopicPartition) (shardAPI, error) {
	i, err := c.Shards().ShardOf(tp)
	if err != nil && c.remotes != nil {
		c.refreshCatalog(ctx) // another broker may have created it
		i, err = c.Shards().ShardOf(tp)
	}
	if err != nil {
		return nil, err
	}
	return c.shard(i)
}

// fanOut calls f for each shard below n that pick accepts (every one when
// pick is nil), concurrently, and returns their results and errors by
// shard.
func fanOut[T any](n int, pick func(i int) bool, f func(i int) (T, error)) ([]T, []error) {
	res, errs := make([]T, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		if pick != nil && !pick(i) {
			continue
		}
		wg.Go(func() { res[i], errs[i] = f(i) })
	}
	wg.Wait()
	return res, errs
}

// Shards is the Coordinator's shards as the program that runs several
// brokers (the Broker of package diskless, a cluster's Node) drives
// them: which this broker leads, taking and giving up a shard's
// leadership, reopening a shard, serving the calls other brokers forward.
// A program with one broker and every shard here needs none of it.
type Shards struct{ c *Coordinator }

// Shards returns the handle on c's shards.
func (c *Coordinator) Shards() Shards { return Shards{c} }
