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
// diskless topics use. The zero value holds Kafka's defaults.
type TopicConfig struct {
	// Partitions is the number of partitions; 0 means 1.
	Partitions int32
	// Retention is retention.ms: 0 means 7 days, negative keeps
	// everything.
	Retention time.Duration
	// RetentionBytes is retention.bytes per partition; 0 or negative
	// means unbounded.
	RetentionBytes int64
	// Compact makes cleanup.policy compact (every record needs a key);
	// Delete adds delete to it. With neither, the policy is delete.
	Compact, Delete bool
	// LogAppendTime makes message.timestamp.type LogAppendTime: records
	// are stamped with their commit time.
	LogAppendTime bool
	// MaxMessageBytes is max.message.bytes; 0 means 1048588.
	MaxMessageBytes int32
	// SegmentBytes is segment.bytes and SegmentTime segment.ms: the size
	// and age at which a tiered offloader (package replica) rolls the
	// segment it copies to remote storage. 0 means 1 GiB and 7 days.
	SegmentBytes int64
	SegmentTime  time.Duration
}

// TopicDescription describes a topic.
type TopicDescription struct {
	Name   string
	ID     uuid.UUID
	Config TopicConfig
}

func toCoordinatorConfig(c TopicConfig) coordinator.TopicConfig {
	out := coordinator.TopicConfig{
		RetentionMs:     c.Retention.Milliseconds(),
		RetentionBytes:  c.RetentionBytes,
		Compact:         c.Compact,
		Delete:          c.Delete || !c.Compact,
		LogAppendTime:   c.LogAppendTime,
		MaxMessageBytes: c.MaxMessageBytes,
		SegmentBytes:    c.SegmentBytes,
		SegmentMs:       c.SegmentTime.Milliseconds(),
	}
	if c.SegmentTime > 0 && out.SegmentMs == 0 {
		out.SegmentMs = 1 // under a millisecond: the least segment.ms
	}
	if c.Retention < 0 {
		out.RetentionMs = -1
	}
	if c.RetentionBytes <= 0 {
		out.RetentionBytes = -1
	}
	return out
}

func fromCoordinator(t coordinator.TopicInfo) TopicDescription {
	c := t.Config
	d := TopicDescription{Name: t.Name, ID: t.ID, Config: TopicConfig{
		Partitions: t.Partitions, Retention: time.Duration(c.RetentionMs) * time.Millisecond, RetentionBytes: c.RetentionBytes,
		Compact: c.Compact, Delete: c.Delete, LogAppendTime: c.LogAppendTime, MaxMessageBytes: c.MaxMessageBytes,
		SegmentBytes: c.SegmentBytes, SegmentTime: time.Duration(c.SegmentMs) * time.Millisecond,
	}}
	if c.RetentionMs < 0 {
		d.Config.Retention = -1
	}
	if c.RetentionBytes < 0 {
		d.Config.RetentionBytes = 0
	}
	return d
}

// CreateTopic creates a topic and returns its ID. A topic of that name
// already existing is TOPIC_ALREADY_EXISTS; a bad name
// INVALID_TOPIC_EXCEPTION (errors are *kafkaerr.Error, see kafkaerr.CodeOf).
func (b *Broker) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (uuid.UUID, error) {
	if b.closed.Load() {
		return uuid.UUID{}, ErrClosed
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	id, err := b.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: name, Partitions: cfg.Partitions, Config: toCoordinatorConfig(cfg)})
	if err != nil {
		return uuid.UUID{}, err
	}
	b.refreshTopics(ctx)
	return id, nil
}

// DeleteTopic deletes a topic and its data. An unknown name is
// UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	t, err := b.topic(ctx, name)
	if err != nil {
		return err
	}
	if err := b.coord.DeleteTopic(ctx, t.ID); err != nil {
		return err
	}
	b.refreshTopics(ctx)
	return nil
}

// DescribeTopics returns every topic, by name.
func (b *Broker) DescribeTopics(ctx context.Context) ([]TopicDescription, error) {
	ts, err := b.coord.Topics(ctx)
	if err != nil {
		return nil, err
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

// partition resolves a topic partition.
func (b *Broker) partition(ctx context.Context, topic string, partition int32) (coordinator.TopicInfo, wal.TopicPartition, error) {
	t, err := b.topic(ctx, topic)
	if err != nil {
		return t, wal.TopicPartition{}, err
	}
	if partition < 0 || partition >= t.Partitions {
		return t, wal.TopicPartition{}, &kafkaerr.Error{Code: kafkaerr.UnknownTopicOrPartition, Message: "no partition " + topic + "-" + strconv.Itoa(int(partition))}
	}
	return t, wal.TopicPartition{TopicID: t.ID, Partition: partition}, nil
}
