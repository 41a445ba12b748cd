package diskless

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// TopicConfig is a topic's configuration: the Kafka topic configs that
// diskless topics use (Partitions, Retention, RetentionBytes, Compact,
// Delete, LogAppendTime, MaxMessageBytes, SegmentBytes, SegmentTime). The
// zero value holds Kafka's defaults. It is coordinator.TopicConfig, the
// one topic configuration of the module: see its fields.
type TopicConfig = coordinator.TopicConfig

// TopicDescription describes a topic.
type TopicDescription struct {
	Name   string
	ID     uuid.UUID
	Config TopicConfig
}

func fromCoordinator(t coordinator.TopicInfo) TopicDescription {
	return TopicDescription{Name: t.Name, ID: t.ID, Config: t.Config}
}

// CreateTopic creates a topic and returns its ID. A topic of that name
// already existing is TOPIC_ALREADY_EXISTS; a bad name
// INVALID_TOPIC_EXCEPTION; a partition count that ValidateNewTopic
// refuses, its code (errors are *kafkaerr.Error, see kafkaerr.CodeOf).
// Partitions 0 means 1.
func (b *Broker) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (uuid.UUID, error) {
	if b.closed.Load() {
		return uuid.UUID{}, ErrClosed
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	// One topic at a time passes the check and is created, so that two
	// CreateTopic calls cannot each fit under MaxPartitions and together
	// pass it.
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if err := b.ValidateNewTopic(ctx, cfg); err != nil {
		return uuid.UUID{}, err
	}
	id, err := b.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: name, Partitions: cfg.Partitions, Config: cfg})
	if err != nil {
		return uuid.UUID{}, b.closedErr(err)
	}
	b.refreshTopics(ctx)
	return id, nil
}

// ValidateNewTopic checks a new topic's partition count against the
// broker's limits, as CreateTopic does before it writes anything: a count
// that is not positive or is above Config.MaxPartitionsPerTopic is
// INVALID_PARTITIONS, one that would take the broker's topics past
// Config.MaxPartitions together is POLICY_VIOLATION. (Partitions 0 is
// 1, as in CreateTopic.) A Kafka broker calls it for a CreateTopics
// request with validateOnly.
func (b *Broker) ValidateNewTopic(ctx context.Context, cfg TopicConfig) error {
	if b.closed.Load() {
		return ErrClosed
	}
	n := cfg.Partitions
	if n == 0 {
		n = 1
	}
	if n < 0 {
		return kafkaerr.New(kafkaerr.InvalidPartitions, "the number of partitions must be positive, not %d", n)
	}
	return b.checkPartitionLimits(ctx, n, n)
}

// checkPartitionLimits checks a topic of count partitions, more of them
// new, against Config.MaxPartitionsPerTopic (INVALID_PARTITIONS) and, with
// the broker's topics, Config.MaxPartitions (POLICY_VIOLATION).
func (b *Broker) checkPartitionLimits(ctx context.Context, count, more int32) error {
	if limit := b.cfg.MaxPartitionsPerTopic; limit > 0 && count > limit {
		return kafkaerr.New(kafkaerr.InvalidPartitions, "%d partitions is more than a topic may have, %d (Config.MaxPartitionsPerTopic)", count, limit)
	}
	limit := b.cfg.MaxPartitions
	if limit <= 0 {
		return nil
	}
	ts, err := b.coord.Topics(ctx)
	if err != nil {
		return b.closedErr(err)
	}
	var total int64
	for _, t := range ts {
		total += int64(t.Partitions)
	}
	if total+int64(more) > limit {
		return kafkaerr.New(kafkaerr.PolicyViolation, "%d more partitions would make %d on the broker, more than %d (Config.MaxPartitions)", more, total+int64(more), limit)
	}
	return nil
}

// AddPartitions raises a topic's partition count to partitions, as
// Kafka's CreatePartitions: the partitions there keep their data and
// offsets, the new ones start empty (a producer's partitioner then sends
// some keys elsewhere, as in Kafka). An unknown name is
// UNKNOWN_TOPIC_OR_PARTITION; a count not above the topic's, or above
// Config.MaxPartitionsPerTopic, INVALID_PARTITIONS; one that takes the
// broker's topics past Config.MaxPartitions, POLICY_VIOLATION. In a
// cluster the new partitions are spread over the coordinator shards, and
// every broker sees them (a broker asked for a partition its cache does
// not have reads the topics again, at most once a second).
func (b *Broker) AddPartitions(ctx context.Context, name string, partitions int32) error {
	b.createMu.Lock()
	defer b.createMu.Unlock()
	t, err := b.validateAdd(ctx, name, partitions)
	if err != nil {
		return err
	}
	if err := b.coord.AddPartitions(ctx, t.ID, partitions); err != nil {
		return b.closedErr(err)
	}
	b.refreshTopics(ctx)
	return nil
}

// AlterTopicConfig replaces a topic's config with cfg, as Kafka's
// AlterConfigs does (cfg.Partitions is ignored: AddPartitions changes
// that; zeros are the defaults, as in CreateTopic). Retention and
// compaction act on it at their next pass, Produce at once here and on
// the other brokers of a cluster once they read the topics again (every
// 10 s); the tiered offloader (Config.Offload) takes a new
// SegmentBytes or SegmentTime when the broker restarts. LogAppendTime
// cannot change (Fetch stamps such a topic's batches as it serves them).
// An unknown name is UNKNOWN_TOPIC_OR_PARTITION; a value out of range or
// a change of LogAppendTime, INVALID_CONFIG.
func (b *Broker) AlterTopicConfig(ctx context.Context, name string, cfg TopicConfig) error {
	if b.closed.Load() {
		return ErrClosed
	}
	t, err := b.topic(ctx, name)
	if err != nil {
		return err
	}
	if err := b.coord.AlterTopicConfig(ctx, t.ID, cfg); err != nil {
		return b.closedErr(err)
	}
	b.refreshTopics(ctx)
	return nil
}

// ValidateAddPartitions checks what AddPartitions would, and changes
// nothing: a Kafka broker calls it for a CreatePartitions request with
// validateOnly.
func (b *Broker) ValidateAddPartitions(ctx context.Context, name string, partitions int32) error {
	_, err := b.validateAdd(ctx, name, partitions)
	return err
}

func (b *Broker) validateAdd(ctx context.Context, name string, partitions int32) (coordinator.TopicInfo, error) {
	if b.closed.Load() {
		return coordinator.TopicInfo{}, ErrClosed
	}
	b.coord.Shards().RefreshTopics(ctx) // another broker may have added some
	b.refreshTopics(ctx)
	t, err := b.topic(ctx, name)
	if err != nil {
		return t, err
	}
	if partitions <= t.Partitions {
		return t, kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s has %d partitions, not fewer than %d", name, t.Partitions, partitions)
	}
	return t, b.checkPartitionLimits(ctx, partitions, partitions-t.Partitions)
}

// DeleteTopic deletes a topic and its data. An unknown name is
// UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if b.closed.Load() {
		return ErrClosed
	}
	t, err := b.topic(ctx, name)
	if err != nil {
		return err
	}
	if err := b.coord.DeleteTopic(ctx, t.ID); err != nil {
		return b.closedErr(err)
	}
	b.refreshTopics(ctx)
	return nil
}

// DescribeTopics returns every topic, by name.
func (b *Broker) DescribeTopics(ctx context.Context) ([]TopicDescription, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	ts, err := b.coord.Topics(ctx)
	if err != nil {
		return nil, b.closedErr(err)
	}
	out := make([]TopicDescription, len(ts))
	for i, t := range ts {
		out[i] = fromCoordinator(t)
	}
	return out, nil
}

func (b *Broker) refreshTopics(ctx context.Context) {
	ts, err := b.coord.Topics(ctx)
	if err != nil {
		return
	}
	m := make(map[string]coordinator.TopicInfo, len(ts))
	for _, t := range ts {
		m[t.Name] = t
	}
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	b.topics = m
	if b.off == nil {
		return
	}
	// Offload every partition of every topic, and stop with deleted ones.
	live := map[wal.TopicPartition]bool{}
	for _, t := range ts {
		for p := range t.Partitions {
			tp := wal.TopicPartition{TopicID: t.ID, Partition: p}
			live[tp] = true
			if b.assigned[tp] {
				continue
			}
			if err := b.off.Assign(ctx, tp, t.Config); err != nil {
				b.cfg.Logger.Warn("diskless: assigning a partition to the offloader", zap.Stringer("partition", tp), zap.Error(err))
				continue
			}
			b.assigned[tp] = true
		}
	}
	for tp := range b.assigned {
		if !live[tp] {
			if err := errors.Join(b.off.Unassign(tp), b.mat.Drop(tp)); err != nil {
				b.cfg.Logger.Warn("diskless: dropping a deleted partition's local log", zap.Stringer("partition", tp), zap.Error(err))
			}
			delete(b.assigned, tp)
		}
	}
}

// topic returns a topic by name.
func (b *Broker) topic(ctx context.Context, name string) (coordinator.TopicInfo, error) {
	b.topicsMu.RLock()
	t, ok := b.topics[name]
	b.topicsMu.RUnlock()
	if !ok {
		b.coord.Shards().RefreshTopics(ctx) // in a cluster, another broker may have created it
		b.refreshTopics(ctx)
		b.topicsMu.RLock()
		t, ok = b.topics[name]
		b.topicsMu.RUnlock()
	}
	if !ok {
		return t, &kafkaerr.Error{Code: kafkaerr.UnknownTopicOrPartition, Message: "no topic " + name}
	}
	return t, nil
}

// mayRefresh reports whether a partition beyond the cached count may
// refresh the topics now: at most once a second, so that clients asking
// for partitions that do not exist cost nothing much.
func (b *Broker) mayRefresh() bool {
	now := b.clk.Now().UnixNano()
	last := b.partRefresh.Load()
	return now-last >= int64(time.Second) && b.partRefresh.CompareAndSwap(last, now)
}

// partition resolves a topic partition.
func (b *Broker) partition(ctx context.Context, topic string, partition int32) (coordinator.TopicInfo, wal.TopicPartition, error) {
	t, err := b.topic(ctx, topic)
	if err != nil {
		return t, wal.TopicPartition{}, err
	}
	if partition >= t.Partitions && b.mayRefresh() {
		// Another broker may have added partitions since the cache was
		// filled.
		b.coord.Shards().RefreshTopics(ctx)
		b.refreshTopics(ctx)
		if t, err = b.topic(ctx, topic); err != nil {
			return t, wal.TopicPartition{}, err
		}
	}
	if partition < 0 || partition >= t.Partitions {
		return t, wal.TopicPartition{}, &kafkaerr.Error{Code: kafkaerr.UnknownTopicOrPartition, Message: "no partition " + topic + "-" + strconv.Itoa(int(partition))}
	}
	return t, wal.TopicPartition{TopicID: t.ID, Partition: partition}, nil
}
