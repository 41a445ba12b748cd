package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// offsetsTopic is the compacted diskless topic that holds committed
// offsets, as in Kafka.
const offsetsTopic = "__consumer_offsets"

// maxOffsetMetadata bounds a committed offset's metadata, as Kafka's
// offset.metadata.max.bytes (4096) does.
const maxOffsetMetadata = 4096

// Versions of the records in the offsets topic: Kafka's OffsetCommitKey v1
// and OffsetCommitValue v3. Keys of version 2 (group metadata) are Kafka's
// too; the broker writes none and skips those it reads.
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
)

// topicPartition names a partition by topic name.
type topicPartition struct {
	topic     string
	partition int32
}

// committed is a committed offset.
type committed struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	// at is where its record is in the offsets topic: a later record of
	// the same key wins, whichever commit returned first.
	at int64
}

// offsetStore holds every group's committed offsets in memory, backed by
// the offsets topic: a commit is one record batch produced to it with
// acks -1 (one record per partition, key OffsetCommitKey, value
// OffsetCommitValue, a null value deleting the key), and opening replays
// the topic. It is safe for concurrent use.
type offsetStore struct {
	b   *diskless.Broker
	log *zap.Logger

	mu struct {
		sync.RWMutex
		groups map[string]map[topicPartition]committed
	}
}

// openOffsetStore creates the offsets topic if it is missing and loads
// every committed offset from it.
func openOffsetStore(ctx context.Context, b *diskless.Broker, log *zap.Logger) (*offsetStore, error) {
	o := &offsetStore{b: b, log: log}
	o.mu.groups = map[string]map[topicPartition]committed{}
	_, err := b.CreateTopic(ctx, offsetsTopic, diskless.TopicConfig{Partitions: 1, Compact: true, Retention: -1})
	if err != nil && kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
		return nil, fmt.Errorf("creating %s: %w", offsetsTopic, err)
	}
	start := time.Now()
	records, err := o.replay(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading committed offsets from %s: %w", offsetsTopic, err)
	}
	log.Info("committed offsets loaded", zap.Int("records", records), zap.Int("groups", len(o.mu.groups)), zap.Duration("took", time.Since(start)))
	return o, nil
}

// replay reads the offsets topic from its log start offset to its high
// watermark into memory, and returns the records read.
func (o *offsetStore) replay(ctx context.Context) (int, error) {
	lo, err := o.b.ListOffsets(ctx, offsetsTopic, 0, diskless.EarliestTimestamp)
	if err != nil {
		return 0, err
	}
	hi, err := o.b.ListOffsets(ctx, offsetsTopic, 0, diskless.LatestTimestamp)
	if err != nil {
		return 0, err
	}
	n := 0
	var rr kbatch.RecordReader
	for next, stalls := lo.Offset, 0; next < hi.Offset; {
		f, err := o.b.Fetch(ctx, diskless.FetchRequest{
			Partitions: []diskless.FetchPartition{{Topic: offsetsTopic, Offset: next, MaxBytes: 8 << 20}},
			MaxWait:    100 * time.Millisecond, MinBytes: 1,
		})
		if err != nil {
			return n, err
		}
		p := f.Partitions[0]
		if p.Err != nil {
			return n, p.Err
		}
		before := next
		it := kbatch.NewBatchIter(p.Records)
		for it.Next() {
			b := it.Batch()
			if b.LastOffset() < next || b.Control() {
				next = max(next, b.NextOffset())
				continue
			}
			if err := rr.Reset(b); err != nil {
				return n, err
			}
			for rr.Next() {
				r := rr.Record()
				if r.Offset >= next {
					o.apply(r.Key, r.Value, r.Offset)
					n++
				}
			}
			if err := rr.Err(); err != nil {
				return n, err
			}
			next = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			return n, err
		}
		if next == before {
			if stalls++; stalls > 50 {
				return n, fmt.Errorf("no progress at offset %d of %d", next, hi.Offset)
			}
		}
	}
	return n, nil
}

// apply applies one record of the offsets topic; records it does not
// know are skipped.
func (o *offsetStore) apply(key, value []byte, at int64) {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil || k.Version > offsetKeyVersion {
		return // group metadata (version 2), or not Kafka's
	}
	tp := topicPartition{k.Topic, k.Partition}
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.mu.groups[k.Group]
	if cur, ok := g[tp]; ok && cur.at > at {
		return
	}
	if value == nil {
		delete(g, tp)
		if len(g) == 0 {
			delete(o.mu.groups, k.Group)
		}
		return
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		o.log.Warn("skipping an offsets record", zap.Int64("offset", at), zap.Error(err))
		return
	}
	if v.Version < 3 {
		v.LeaderEpoch = -1
	}
	if g == nil {
		g = map[topicPartition]committed{}
		o.mu.groups[k.Group] = g
	}
	g[tp] = committed{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, at: at}
}

// offsetCommit is one partition's offset to commit.
type offsetCommit struct {
	tp topicPartition
	committed
}

// forgetTopic deletes every group's committed offsets of a topic, as
// Kafka does when the topic is deleted: a tombstone for each key, then
// the keys leave memory.
func (o *offsetStore) forgetTopic(ctx context.Context, topic string) error {
	o.mu.RLock()
	var keys [][]byte
	for group, g := range o.mu.groups {
		for tp := range g {
			if tp.topic == topic {
				k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: tp.partition}
				keys = append(keys, k.AppendTo(nil))
			}
		}
	}
	o.mu.RUnlock()
	if len(keys) == 0 {
		return nil
	}
	values := make([][]byte, len(keys)) // null: tombstones
	base, err := o.write(ctx, keys, values)
	if err != nil {
		return err
	}
	for i, k := range keys {
		o.apply(k, nil, base+int64(i))
	}
	return nil
}

// write produces one batch of records to the offsets topic, with acks -1,
// and returns the offset of the first.
func (o *offsetStore) write(ctx context.Context, keys, values [][]byte) (int64, error) {
	now := time.Now().UnixMilli()
	bld := kbatch.NewBuilder(kbatch.CodecNone)
	for i := range keys {
		bld.Append(now, keys[i], values[i])
	}
	batch, err := bld.Build(nil)
	if err != nil {
		return -1, err
	}
	resp, err := o.b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: offsetsTopic, Records: batch}}})
	if err == nil {
		err = resp.Partitions[0].Err
	}
	if err != nil {
		return -1, err
	}
	return resp.Partitions[0].BaseOffset, nil
}

// commit writes a group's offsets to the offsets topic and, once they are
// committed there, to memory. The error carries the Kafka code that Kafka
// gives for the same failure of its offsets topic.
func (o *offsetStore) commit(ctx context.Context, group string, offsets []offsetCommit) error {
	now := time.Now().UnixMilli()
	keys, values := make([][]byte, len(offsets)), make([][]byte, len(offsets))
	for i, c := range offsets {
		k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: c.tp.topic, Partition: c.tp.partition}
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = offsetValueVersion, c.offset, c.leaderEpoch, c.metadata, now
		keys[i], values[i] = k.AppendTo(nil), v.AppendTo(nil)
	}
	base, err := o.write(ctx, keys, values)
	if err != nil {
		return commitError(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.mu.groups[group]
	if g == nil {
		g = map[topicPartition]committed{}
		o.mu.groups[group] = g
	}
	for i, c := range offsets {
		c.at = base + int64(i)
		if cur, ok := g[c.tp]; !ok || cur.at < c.at {
			g[c.tp] = c.committed
		}
	}
	return nil
}

// commitError maps a failure to write the offsets topic to the code Kafka
// gives (GroupMetadataManager): retriable failures say the coordinator is
// not available, so the client retries.
func commitError(err error) error {
	var code kafkaerr.Code
	switch c := kafkaerr.CodeOf(err); {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, diskless.ErrClosed), c.Retriable():
		code = kafkaerr.CoordinatorNotAvailable
	case c == kafkaerr.MessageTooLarge || c == kafkaerr.RecordListTooLarge:
		code = kafkaerr.Code(kerr.InvalidCommitOffsetSize.Code)
	default:
		code = kafkaerr.UnknownServerError
	}
	return &kafkaerr.Error{Code: code, Message: "writing " + offsetsTopic, Err: err}
}

// fetch returns a group's committed offsets: the partitions asked for, or
// all when tps is nil.
func (o *offsetStore) fetch(group string, tps []topicPartition) map[topicPartition]committed {
	o.mu.RLock()
	defer o.mu.RUnlock()
	g := o.mu.groups[group]
	if tps == nil {
		return maps.Clone(g)
	}
	out := make(map[topicPartition]committed, len(tps))
	for _, tp := range tps {
		if c, ok := g[tp]; ok {
			out[tp] = c
		}
	}
	return out
}

// offsetCommit answers OffsetCommit: the group coordinator checks the
// member and generation, each partition must exist, and the offsets are
// committed together.
func (s *server) offsetCommit(req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := s.groups.checkCommit(req.Group, req.Generation, req.MemberID)
	var x topicIndex
	if code == 0 {
		var err error
		if x, err = s.topicIndex(s.ctx); err != nil {
			return nil, err
		}
	}
	var commits []offsetCommit
	var slots []*kmsg.OffsetCommitResponseTopicPartition
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, t)
	}
	for i, rt := range req.Topics {
		desc, known := x.byName[rt.Topic]
		for j, rp := range rt.Partitions {
			p := &resp.Topics[i].Partitions[j]
			*p = kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition = rp.Partition
			metadata := ""
			if rp.Metadata != nil {
				metadata = *rp.Metadata
			}
			switch {
			case code != 0:
				p.ErrorCode = code
			case !known || rp.Partition < 0 || rp.Partition >= desc.Config.Partitions:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case len(metadata) > maxOffsetMetadata:
				p.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				commits = append(commits, offsetCommit{topicPartition{rt.Topic, rp.Partition}, committed{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, metadata: metadata}})
				slots = append(slots, p)
			}
		}
	}
	if len(commits) > 0 {
		ctx, cancel := context.WithTimeout(s.work, 30*time.Second)
		defer cancel()
		if err := s.offsets.commit(ctx, req.Group, commits); err != nil {
			s.log.Warn("committing offsets", zap.String("group", req.Group), zap.Error(err))
			for _, p := range slots {
				p.ErrorCode = codeOf(err)
			}
		}
	}
	return resp, nil
}

// offsetFetch answers OffsetFetch: each partition's committed offset, or
// -1 when it has none; every committed partition when the topic list is
// null.
func (s *server) offsetFetch(req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	var tps []topicPartition
	if req.Topics != nil {
		tps = []topicPartition{}
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				tps = append(tps, topicPartition{rt.Topic, p})
			}
		}
	}
	got := s.offsets.fetch(req.Group, tps)
	if tps == nil {
		tps = slices.SortedFunc(maps.Keys(got), func(a, b topicPartition) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
	}
	for _, tp := range tps {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.topic {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = tp.topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.partition, -1, -1
		empty := ""
		p.Metadata = &empty
		if c, ok := got[tp]; ok {
			md := c.metadata
			p.Offset, p.LeaderEpoch, p.Metadata = c.offset, c.leaderEpoch, &md
		}
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}
