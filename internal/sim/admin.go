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
// partitions' offsets and compacts.
func (a *actor) admin() {
	made := map[topicKind]int{}
	for a.sleep(10*time.Second, 90*time.Second) {
		switch r := a.rng.IntN(10); {
		case r < 2:
			kind := topicKind(a.rng.IntN(3))
			if made[kind] >= 2 {
				continue
			}
			made[kind]++
			a.createTopic(kind, fmt.Sprintf("%c%d", "pcr"[kind], made[kind]), 1+a.rng.Int32N(3))
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
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindRetention)
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
		default:
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention)
			if ok {
				a.listOffsets(t, p)
			}
		}
	}
}

// topicConfig is the config of a topic of kind.
func topicConfig(kind topicKind, partitions int32) diskless.TopicConfig {
	cfg := diskless.TopicConfig{Partitions: partitions}
	switch kind {
	case kindCompact:
		cfg.Compact = true
		cfg.MinCleanableDirtyRatio = 0.1
	case kindRetention:
		cfg.Retention = 20 * time.Minute
	}
	return cfg
}

// createTopic creates a topic, sending the request again while its
// outcome is unknown.
func (a *actor) createTopic(kind topicKind, name string, partitions int32) bool {
	for try := 0; try < 20; try++ {
		b, id := a.broker()
		if b == nil {
			return false
		}
		ev := a.w.h.Begin(a.name, OpCreateTopic)
		ev.Broker, ev.Topic, ev.Partition = id, name, partitions
		tid, err := call(func(ctx context.Context) ([16]byte, error) {
			id, err := b.CreateTopic(ctx, name, topicConfig(kind, partitions))
			return id, err
		})
		a.w.h.End(ev, err)
		switch {
		case err == nil:
			a.w.topics.set(topic{name: name, id: tid, kind: kind, partitions: partitions})
			return true
		case kafkaerr.CodeOf(err) == kafkaerr.TopicAlreadyExists:
			return a.refreshTopics(kind)
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return false
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
	ev.Broker, ev.Topic, ev.Partition = id, t.name, n
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
	ev.Broker, ev.Topic, ev.Partition = id, t.name, p
	hi, err := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
		return b.ListOffsets(ctx, t.name, p, diskless.LatestTimestamp)
	})
	if err == nil {
		lo, lerr := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
			return b.ListOffsets(ctx, t.name, p, diskless.EarliestTimestamp)
		})
		ev.HW, ev.LSO, ev.LogStart, err = hi.Offset, hi.LastStable, lo.Offset, lerr
	}
	return a.w.h.End(ev, err)
}

func (a *actor) deleteRecords(t topic, p int32, offset int64) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpDeleteRecords)
	ev.Broker, ev.Topic, ev.Partition, ev.Offset = id, t.name, p, offset
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
	ev.Broker, ev.Topic, ev.Partition = id, t.name, p
	st, err := call(func(ctx context.Context) (bool, error) {
		st, err := b.CompactPartition(ctx, wal.TopicPartition{TopicID: t.id, Partition: p})
		return st.Cleaned, err
	})
	if st {
		ev.Note = "cleaned"
	}
	a.w.h.End(ev, err)
}
