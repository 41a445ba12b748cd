package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// shardOptions returns shard i's coordinator options.
func (s *Coordinator) shardOptions(i int) *leaderOptions {
	o := s.opts.leader(i)
	if s.bucket != nil {
		lo := s.opts.Lifecycle
		lo.Bucket = s.bucket
		lo.Peers = s.peer
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
func (s *Coordinator) shard(i int) (shardAPI, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(s.mu.coords) {
		return nil, fmt.Errorf("coordinator: no shard %d of %d", i, len(s.mu.coords))
	}
	if s.mu.coords[i] == nil {
		if s.remotes != nil {
			return s.remotes[i], nil
		}
		return nil, errShardDown(i)
	}
	return s.mu.coords[i], nil
}

// peer is every shard's LifecycleOptions.Peers.
func (s *Coordinator) peer(i int) (Peer, error) { return s.shard(i) }

// all returns every shard's coordinator, or an error if one is not open.
func (s *Coordinator) all() ([]shardAPI, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	out := make([]shardAPI, len(s.mu.coords))
	for i, c := range s.mu.coords {
		switch {
		case c != nil:
			out[i] = c
		case s.remotes != nil:
			out[i] = s.remotes[i]
		default:
			return nil, errShardDown(i)
		}
	}
	return out, nil
}

// locals returns the shards led here, by shard (nil: led elsewhere or
// down).
func (s *Coordinator) locals() []*leader {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.mu.coords)
}

// loadCatalog rebuilds the partition map from every shard's topics.
func (s *Coordinator) loadCatalog(ctx context.Context) error {
	coords, err := s.all()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.parts = map[wal.TopicPartition]int{}
	s.mu.topics = map[uuid.UUID]*shardTopic{}
	s.mu.names = map[string]uuid.UUID{}
	s.mu.counts = make([]int, len(coords))
	for i, c := range coords {
		topics, err := c.Topics(ctx)
		if err != nil {
			return err
		}
		for _, t := range topics {
			s.addLocked(i, t)
		}
	}
	return nil
}

// addLocked records that shard i serves t.Assigned (nil: all) of t.
func (s *Coordinator) addLocked(i int, t TopicInfo) {
	assigned := t.Assigned
	if assigned == nil {
		assigned = state.AllPartitions(t.Partitions)
	}
	st := s.mu.topics[t.ID]
	if st == nil {
		info := t
		info.Assigned = nil
		st = &shardTopic{info: info}
		s.mu.topics[t.ID] = st
		s.mu.names[t.Name] = t.ID
	}
	if !slices.Contains(st.shards, i) {
		st.shards = append(st.shards, i)
		slices.Sort(st.shards)
	}
	for _, p := range assigned {
		tp := wal.TopicPartition{TopicID: t.ID, Partition: p}
		if prev, ok := s.mu.parts[tp]; ok && prev != i {
			s.logger.Error("coordinator: two shards serve one partition; the first one keeps it", zap.Stringer("partition", tp), zap.Int("shard", prev), zap.Int("other", i))
			continue
		}
		s.mu.parts[tp] = i
		s.mu.counts[i]++
	}
}

// removeLocked forgets that shard i serves any partition of topic id.
func (s *Coordinator) removeLocked(i int, id uuid.UUID) {
	st := s.mu.topics[id]
	if st == nil {
		return
	}
	for p := int32(0); p < st.info.Partitions; p++ {
		tp := wal.TopicPartition{TopicID: id, Partition: p}
		if sh, ok := s.mu.parts[tp]; ok && sh == i {
			delete(s.mu.parts, tp)
			s.mu.counts[i]--
		}
	}
	st.shards = slices.DeleteFunc(st.shards, func(x int) bool { return x == i })
	if len(st.shards) == 0 {
		delete(s.mu.topics, id)
		delete(s.mu.names, st.info.Name)
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
func (s *Coordinator) local(i int) (*leader, error) {
	c, err := s.localShard(i)
	if errors.Is(err, errNotServed) {
		return nil, errShardDown(i)
	}
	return c, err
}

// NumShards returns how many shards there are.
func (s *Coordinator) NumShards() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.mu.coords)
}

// ShardErr returns why shard i does not serve, or nil while it does. A
// shard stops for good when its log fails (an append that failed every
// attempt, or was fenced: then errors.Is(err, ErrNotLeader), another
// writer holds the log) or its database does, and then answers every call
// with that error, until ReopenShard replays its log into a new one. A
// shard that is reopening answers NOT_LEADER_OR_FOLLOWER; after Close,
// ErrClosed.
func (s *Coordinator) ShardErr(i int) error {
	c, err := s.shard(i)
	if err != nil {
		return err
	}
	return c.Err()
}

// ShardOf returns the shard that serves tp, or UNKNOWN_TOPIC_OR_PARTITION.
func (s *Coordinator) ShardOf(tp wal.TopicPartition) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.mu.parts[tp]
	if !ok {
		return -1, kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no shard serves partition %s", tp)
	}
	return i, nil
}

func (s *Coordinator) shardFor(ctx context.Context, tp wal.TopicPartition) (shardAPI, error) {
	i, err := s.ShardOf(tp)
	if err != nil && s.remotes != nil {
		s.refreshCatalog(ctx) // another broker may have created it
		i, err = s.ShardOf(tp)
	}
	if err != nil {
		return nil, err
	}
	return s.shard(i)
}
