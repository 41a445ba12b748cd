package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// admin creates topics, adds partitions, deletes records, reads the
// partitions' offsets (by position and by time), compacts, alters topic
// configs, and deletes topics, creating some again under the same name.
func (a *actor) admin() {
	made := map[topicKind]int{}
	for a.sleep(10*time.Second, 90*time.Second) {
		switch r := a.rng.IntN(13); {
		case r < 2:
			kind := topicKind(a.rng.IntN(4))
			if made[kind] >= 2 {
				continue
			}
			made[kind]++
			a.createTopic(kind, fmt.Sprintf("%c%d", kindLetters[kind], made[kind]), 1+a.rng.Int32N(3))
		case r < 3:
			ts := a.w.topics.all()
			if len(ts) == 0 {
				continue
			}
			t := ts[a.rng.IntN(len(ts))]
			if t.partitions >= 5 {
				continue
			}
			a.addPartitions(t, t.partitions+1)
		case r < 5:
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindRetention, kindAppendTime)
			if !ok {
				continue
			}
			if ev := a.listOffsets(t, p); ev != nil && ev.OK() && ev.HW > ev.LogStart && a.rng.IntN(2) == 0 {
				a.deleteRecords(t, p, ev.LogStart+a.rng.Int64N(ev.HW-ev.LogStart+1))
			}
		case r < 7:
			t, p, ok := a.w.topics.pick(a.rng, kindCompact)
			if ok {
				a.compact(t, p)
			}
		case r < 8:
			ts := a.w.topics.all()
			if len(ts) > 0 {
				a.alterConfig(ts[a.rng.IntN(len(ts))])
			}
		case r < 9:
			// The first topics stay; the admin's own may go, and come
			// back later under the same name, as a new incarnation.
			var ts []topic
			for _, t := range a.w.topics.all() {
				if t.name[1:] != "0" {
					ts = append(ts, t)
				}
			}
			if len(ts) == 0 {
				continue
			}
			t := ts[a.rng.IntN(len(ts))]
			if !a.deleteTopic(t) {
				continue
			}
			// A read of the deleted incarnation, a moment after: it fails
			// UNKNOWN_TOPIC_OR_PARTITION or shows none of its records.
			if a.sleep(0, time.Minute) {
				a.fetch(t, a.rng.Int32N(t.partitions), 0, false)
			}
			// Long enough for every call made on the deleted incarnation
			// (one call at most per actor, bounded by callTimeout) to have
			// answered before the name is created again.
			if a.sleep(callTimeout+time.Minute, callTimeout+3*time.Minute) && a.rng.IntN(2) == 0 {
				a.createTopic(t.kind, t.name, 1+a.rng.Int32N(3))
			}
		case r < 10:
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention, kindAppendTime)
			if ok {
				a.listByTime(t, p)
			}
		default:
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention, kindAppendTime)
			if ok {
				a.listOffsets(t, p)
			}
		}
	}
}

// topicConfig is the config of a topic of kind. Every topic rolls
// segments of 4 KiB or 2 minutes, so that a tiering broker
// (Config.Offload, which a quarter of the runs of one broker have) offloads
// some during a run.
func topicConfig(kind topicKind, partitions int32) diskless.TopicConfig {
	cfg := diskless.TopicConfig{Partitions: partitions, SegmentBytes: 4 << 10, SegmentTime: 2 * time.Minute}
	switch kind {
	case kindCompact:
		cfg.Compact = true
		cfg.MinCleanableDirtyRatio = 0.1
	case kindRetention:
		cfg.Retention = 20 * time.Minute
	case kindAppendTime:
		cfg.LogAppendTime = true
	}
	return cfg
}

// createTopic creates a topic, sending the request again while its
// outcome is unknown. A name whose topic was deleted gets its next
// incarnation, whose partitions are read (they must be empty) before the
// actors may use it.
func (a *actor) createTopic(kind topicKind, name string, partitions int32) bool {
	gen := a.w.topics.nextGen(name)
	for try := 0; try < 20; try++ {
		b, id := a.broker()
		if b == nil {
			return false
		}
		ev := a.w.h.Begin(a.name, OpCreateTopic)
		ev.Broker, ev.Topic, ev.Partition = id, topic{name: name, gen: gen}.tag(), partitions
		tid, err := call(func(ctx context.Context) ([16]byte, error) {
			id, err := b.CreateTopic(ctx, name, topicConfig(kind, partitions))
			return id, err
		})
		a.w.h.End(ev, err)
		switch {
		case err == nil:
			a.publish(topic{name: name, id: tid, kind: kind, partitions: partitions, gen: gen})
			return true
		case kafkaerr.CodeOf(err) == kafkaerr.TopicAlreadyExists:
			// An earlier try created it, and its answer was lost.
			d, ok := a.describe(name)
			if !ok {
				return false
			}
			a.publish(topic{name: name, id: d.ID, kind: kind, partitions: d.Config.Partitions, gen: gen})
			return true
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return false
}

// publish makes a created topic known to the actors; a topic created
// again after a delete is first read whole, to find it empty.
func (a *actor) publish(t topic) {
	if t.gen > 0 {
		for p := range t.partitions {
			a.listOffsets(t, p)
		}
	}
	a.w.topics.created(t)
}

// describe returns the topic of a name as the brokers list it, false if
// the listing failed or has none.
func (a *actor) describe(name string) (diskless.TopicDescription, bool) {
	for try := 0; try < 10; try++ {
		b, _ := a.broker()
		if b == nil {
			return diskless.TopicDescription{}, false
		}
		ds, err := call(func(ctx context.Context) ([]diskless.TopicDescription, error) { return b.DescribeTopics(ctx) })
		if err == nil {
			for _, d := range ds {
				if d.Name == name {
					return d, true
				}
			}
			return diskless.TopicDescription{}, false
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return diskless.TopicDescription{}, false
}

// gone reports whether the brokers' listing shows that t is deleted
// (no topic of its name, or one of another ID).
func (a *actor) gone(t topic) bool {
	for try := 0; try < 10; try++ {
		b, _ := a.broker()
		if b == nil {
			return false
		}
		ds, err := call(func(ctx context.Context) ([]diskless.TopicDescription, error) { return b.DescribeTopics(ctx) })
		if err == nil {
			for _, d := range ds {
				if d.Name == t.name && d.ID == t.id {
					return false
				}
			}
			return true
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return false
}

// deleteTopic deletes a topic: the actors stop choosing it first, then
// the request is sent until it is answered OK or
// UNKNOWN_TOPIC_OR_PARTITION (an earlier try whose answer was lost
// deleted it) and the listing confirms it. It reports whether the
// topic is known to be gone; if not, the topic stays out of the
// workload and of the final read, and the final phase deletes it
// (finalRead), so that its objects go.
func (a *actor) deleteTopic(t topic) bool {
	a.w.topics.markDeleted(t.name)
	for try := 0; try < 30; try++ {
		b, id := a.broker()
		if b == nil {
			return false
		}
		ev := a.w.h.Begin(a.name, OpDeleteTopic)
		ev.Broker, ev.Topic = id, t.tag()
		_, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, b.DeleteTopic(ctx, t.name) })
		a.w.h.End(ev, err)
		if (err == nil || kafkaerr.CodeOf(err) == kafkaerr.UnknownTopicOrPartition) && a.gone(t) {
			a.w.topics.markGone(t.name)
			return true
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return false
}

// alterConfig changes a topic's config while the workload uses it, in
// ways that keep the topic's kind: a retention topic's retention.ms and
// retention.bytes, a compacted topic's min.cleanable.dirty.ratio and
// min.compaction.lag.ms, the other topics' max.message.bytes (always
// above the workload's batches).
func (a *actor) alterConfig(t topic) {
	b, id := a.broker()
	if b == nil {
		return
	}
	cfg := topicConfig(t.kind, t.partitions)
	switch t.kind {
	case kindRetention:
		cfg.Retention = time.Duration(5+a.rng.IntN(40)) * time.Minute
		if a.rng.IntN(3) == 0 {
			cfg.RetentionBytes = int64(2<<10 + a.rng.IntN(64<<10))
		}
	case kindCompact:
		cfg.MinCleanableDirtyRatio = float64(1+a.rng.IntN(9)) / 10
		cfg.MinCompactionLag = time.Duration(a.rng.IntN(3)) * time.Minute
	default:
		cfg.MaxMessageBytes = int32(1<<20 + a.rng.IntN(1<<20))
	}
	ev := a.w.h.Begin(a.name, OpAlterConfig)
	ev.Broker, ev.Topic = id, t.tag()
	ev.Note = fmt.Sprintf("retention=%v bytes=%d ratio=%v lag=%v max=%d", cfg.Retention, cfg.RetentionBytes, cfg.MinCleanableDirtyRatio, cfg.MinCompactionLag, cfg.MaxMessageBytes)
	_, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, b.AlterTopicConfig(ctx, t.name, cfg) })
	a.w.h.End(ev, err)
}

// listByTime asks for the first offset of a partition whose timestamp is
// at or after a time up to 40 minutes back.
func (a *actor) listByTime(t topic, p int32) {
	b, id := a.broker()
	if b == nil {
		return
	}
	target := time.Now().Add(-time.Duration(a.rng.Int64N(int64(40 * time.Minute)))).UnixMilli()
	ev := a.w.h.Begin(a.name, OpListByTime)
	ev.Broker, ev.Topic, ev.Partition, ev.Timestamp = id, t.tag(), p, target
	res, err := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
		return b.ListOffsets(ctx, t.name, p, target)
	})
	if err == nil {
		ev.Offset, ev.Found = res.Offset, res.Timestamp
	}
	a.w.h.End(ev, err)
}

// refreshTopics reads the topics back after a call whose outcome was
// unknown.
func (a *actor) refreshTopics(kind topicKind) bool {
	b, _ := a.broker()
	if b == nil {
		return false
	}
	ds, err := b.DescribeTopics(context.Background())
	if err != nil {
		return false
	}
	for _, d := range ds {
		k := kindPlain
		switch {
		case d.Config.Compact:
			k = kindCompact
		case d.Config.LogAppendTime:
			k = kindAppendTime
		case d.Config.Retention > 0:
			k = kindRetention
		}
		a.w.topics.set(topic{name: d.Name, id: d.ID, kind: k, partitions: d.Config.Partitions})
	}
	return true
}

func (a *actor) addPartitions(t topic, n int32) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpAddPartitions)
	ev.Broker, ev.Topic, ev.Partition = id, t.tag(), n
	_, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, b.AddPartitions(ctx, t.name, n) })
	a.w.h.End(ev, err)
	if err == nil {
		t.partitions = n
		a.w.topics.set(t)
	} else {
		a.refreshTopics(t.kind)
	}
}

func (a *actor) listOffsets(t topic, p int32) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	ev := a.w.h.Begin(a.name, OpListOffsets)
	ev.Broker, ev.Topic, ev.Partition = id, t.tag(), p
	hi, err := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
		return b.ListOffsets(ctx, t.name, p, diskless.LatestTimestamp)
	})
	if err == nil {
		lo, lerr := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
			return b.ListOffsets(ctx, t.name, p, diskless.EarliestTimestamp)
		})
		ev.HW, ev.LSO, ev.LogStart, err = hi.Offset, hi.LastStable, lo.Offset, lerr
	}
	if n := b.Stats().Offloaded; n > 0 {
		// A tiering broker's progress, for the trace's reader.
		ev.Note = fmt.Sprintf("offloaded=%d", n)
	}
	return a.w.h.End(ev, err)
}

func (a *actor) deleteRecords(t topic, p int32, offset int64) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpDeleteRecords)
	ev.Broker, ev.Topic, ev.Partition, ev.Offset = id, t.tag(), p, offset
	lo, err := call(func(ctx context.Context) (int64, error) { return b.DeleteRecords(ctx, t.name, p, offset) })
	if err == nil {
		ev.LogStart = lo
	}
	a.w.h.End(ev, err)
}

func (a *actor) compact(t topic, p int32) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpCompact)
	ev.Broker, ev.Topic, ev.Partition = id, t.tag(), p
	st, err := call(func(ctx context.Context) (bool, error) {
		st, err := b.CompactPartition(ctx, wal.TopicPartition{TopicID: t.id, Partition: p})
		return st.Cleaned, err
	})
	if st {
		ev.Note = "cleaned"
	}
	a.w.h.End(ev, err)
}
