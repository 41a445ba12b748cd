package diskless

import (
	"context"
	"errors"
	"maps"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/replica"
	"github.com/diskless-go/diskless/wal"
)

// compactTopics compacts, once, every partition of a compacted topic
// (cleanup.policy compact, or compact,delete) whose shard this broker
// leads: exactly one compactor per partition, the shard's leader's. See
// replica.CompactPartition. (A LogAppendTime topic's batches are stamped
// as they are read, with their object's commit time; a compacted object
// holds them stamped already, and keeps their times.)
func (b *Broker) compactTopics(ctx context.Context) {
	topics, err := b.coord.Topics(ctx)
	if err != nil {
		return
	}
	led := make(map[wal.TopicPartition]bool)
	defer func() {
		// Stats.DirtyRatios keeps the partitions still compacted here.
		b.stats.dirtyMu.Lock()
		maps.DeleteFunc(b.stats.dirty, func(tp wal.TopicPartition, _ float64) bool { return !led[tp] })
		b.stats.dirtyMu.Unlock()
	}()
	for _, t := range topics {
		if !t.Config.Compact {
			continue
		}
		for p := range t.Partitions {
			tp := wal.TopicPartition{TopicID: t.ID, Partition: p}
			if ctx.Err() != nil {
				return
			}
			if !b.coord.Shards().LeadsPartition(tp) {
				continue
			}
			led[tp] = true
			if _, err := b.compactPartition(ctx, tp, t.Config); err != nil && ctx.Err() == nil && !errors.Is(err, coordinator.ErrRangeChanged) {
				b.cfg.Logger.Warn("diskless: compacting", zap.String("topic", t.Name), zap.Int32("partition", p), zap.Error(err))
			}
		}
	}
}

// CompactPartition compacts one partition of a compacted topic now (the
// broker does it every Config.CompactInterval for the partitions whose
// shard it leads): its diskless batches are cleaned as Kafka's log
// cleaner would and replaced, at their offsets, by a new object, in one
// coordinator record. It returns what it did; coordinator.ErrRangeChanged
// if the partition changed meanwhile (try again).
func (b *Broker) CompactPartition(ctx context.Context, tp wal.TopicPartition) (replica.CompactStats, error) {
	if b.closed.Load() {
		return replica.CompactStats{}, ErrClosed
	}
	topics, err := b.coord.Topics(ctx)
	if err != nil {
		return replica.CompactStats{}, b.closedErr(err)
	}
	for _, t := range topics {
		if t.ID == tp.TopicID {
			return b.compactPartition(ctx, tp, t.Config)
		}
	}
	return replica.CompactStats{}, kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic %s", tp.TopicID)
}

// compactPartition is CompactPartition with the topic's config.
func (b *Broker) compactPartition(ctx context.Context, tp wal.TopicPartition, cfg TopicConfig) (replica.CompactStats, error) {
	st, err := replica.CompactPartition(ctx, b.coord, b.cache, b.bucket, tp, &replica.CompactOptions{
		Prefix: b.cfg.Prefix, Uploader: b.cfg.BrokerID, TempDir: b.cfg.DataDir, Clock: b.clk.Now, Logger: b.cfg.Logger,
		DeleteRetention: cfg.DeleteRetention, MinCompactionLag: cfg.MinCompactionLag, MaxCompactionLag: cfg.MaxCompactionLag,
		MinCleanableDirtyRatio: cfg.MinCleanableDirtyRatio,
	})
	if err == nil && st.Cleaned {
		b.stats.compactions.Add(1)
		b.stats.compactRead.Add(st.BytesRead)
		b.stats.compactWritten.Add(st.BytesWritten)
	}
	if err == nil {
		ratio := st.DirtyRatio
		if st.Cleaned {
			ratio = 0 // what it found was cleaned
		}
		b.stats.dirtyMu.Lock()
		if b.stats.dirty == nil {
			b.stats.dirty = make(map[wal.TopicPartition]float64)
		}
		b.stats.dirty[tp] = ratio
		b.stats.dirtyMu.Unlock()
	}
	return st, b.closedErr(err)
}
