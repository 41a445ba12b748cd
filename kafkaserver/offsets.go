package kafkaserver

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

// offsetStorage is where committed offsets live: the small interface the
// group coordinator and the offset APIs use, so that another store (one
// backed by the library's coordinator, whose commit is one metadata-log
// append) can take the place of the offsets topic. Implementations are
// safe for concurrent use; errors carry the Kafka code to answer.
type offsetStorage interface {
	// commit stores a group's offsets, all or none.
	commit(ctx context.Context, group string, offsets []offsetCommit) error
	// fetch returns a group's committed offsets: those of tps, or all
	// when tps is nil.
	fetch(ctx context.Context, group string, tps []topicPartition) (map[topicPartition]committed, error)
	// delete deletes a group's committed offsets: those of tps, or all
	// when tps is nil.
	delete(ctx context.Context, group string, tps []topicPartition) error
	// groups returns the groups with committed offsets, sorted.
	groups(ctx context.Context) ([]string, error)
	// catchUp reads what other nodes of a cluster committed since the
	// last time, up to now.
	catchUp(ctx context.Context) error
}

var _ offsetStorage = (*offsetStore)(nil)

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
	// tail is the offset of the offsets topic read up to; its lock is
	// held while it is read further.
	tail struct {
		sync.Mutex
		next int64
	}
}

// openOffsetStore creates the offsets topic if it is missing and loads
// every committed offset from it.
func openOffsetStore(ctx context.Context, b *diskless.Broker, log *zap.Logger) (*offsetStore, error) {
	o := &offsetStore{b: b, log: log}
	o.mu.groups = map[string]map[topicPartition]committed{}
	if err := ensureInternalTopic(ctx, b, offsetsTopic); err != nil {
		return nil, err
	}
	start := time.Now()
	records, err := o.replay(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading committed offsets from %s: %w", offsetsTopic, err)
	}
	log.Info("committed offsets loaded", zap.Int("records", records), zap.Int("groups", len(o.mu.groups)), zap.Duration("took", time.Since(start)))
	return o, nil
}

// replay reads the offsets topic from where it was read up to (at first
// its log start offset) to its high watermark into memory, and returns
// the records read.
func (o *offsetStore) replay(ctx context.Context) (int, error) {
	o.tail.Lock()
	defer o.tail.Unlock()
	next, n, err := replayTopicFrom(ctx, o.b, offsetsTopic, o.tail.next, o.apply)
	o.tail.next = next
	return n, err
}

// catchUp reads the offsets topic on up to its high watermark: the
// commits other nodes made since.
func (o *offsetStore) catchUp(ctx context.Context) error {
	start := time.Now()
	n, err := o.replay(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", offsetsTopic, err)
	}
	o.log.Debug("committed offsets read on", zap.Int("records", n), zap.Duration("took", time.Since(start)))
	return nil
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
// Kafka does when the topic is deleted.
func forgetTopic(ctx context.Context, o offsetStorage, topic string) error {
	groups, err := o.groups(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, group := range groups {
		got, err := o.fetch(ctx, group, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var tps []topicPartition
		for tp := range got {
			if tp.topic == topic {
				tps = append(tps, tp)
			}
		}
		if len(tps) > 0 {
			errs = append(errs, o.delete(ctx, group, tps))
		}
	}
	return errors.Join(errs...)
}

// tombstones writes a tombstone for each key, then the keys leave memory.
func (o *offsetStore) tombstones(ctx context.Context, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	values := make([][]byte, len(keys)) // null: tombstones
	base, err := o.write(ctx, keys, values)
	if err != nil {
		return commitError(err)
	}
	for i, k := range keys {
		o.apply(k, nil, base+int64(i))
	}
	return nil
}

// write produces one batch of records to the offsets topic, with acks -1,
// and returns the offset of the first.
func (o *offsetStore) write(ctx context.Context, keys, values [][]byte) (int64, error) {
	return writeRecords(ctx, o.b, offsetsTopic, keys, values)
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
func (o *offsetStore) fetch(_ context.Context, group string, tps []topicPartition) (map[topicPartition]committed, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	g := o.mu.groups[group]
	if tps == nil {
		return maps.Clone(g), nil
	}
	out := make(map[topicPartition]committed, len(tps))
	for _, tp := range tps {
		if c, ok := g[tp]; ok {
			out[tp] = c
		}
	}
	return out, nil
}

// delete writes a tombstone for each of a group's committed offsets of
// tps (all when tps is nil) and, once they are committed, forgets them.
func (o *offsetStore) delete(ctx context.Context, group string, tps []topicPartition) error {
	o.mu.RLock()
	var keys [][]byte
	for tp := range o.mu.groups[group] {
		if tps == nil || slices.Contains(tps, tp) {
			k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.topic, Partition: tp.partition}
			keys = append(keys, k.AppendTo(nil))
		}
	}
	o.mu.RUnlock()
	return o.tombstones(ctx, keys)
}

// groups returns the groups with committed offsets, sorted.
func (o *offsetStore) groups(context.Context) ([]string, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return slices.Sorted(maps.Keys(o.mu.groups)), nil
}

// offsetCommit answers OffsetCommit: the group coordinator checks the
// member and generation (a member epoch for groups of the consumer
// protocol, version 9), each partition must exist, and the offsets are
// committed together.
func (s *Server) offsetCommit(req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	var tps []topicPartition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tps = append(tps, topicPartition{rt.Topic, rp.Partition})
		}
	}
	code := int16(0)
	if req.Group != "" {
		code = s.coordinates(s.ctx, req.Group)
	}
	if code == 0 {
		code = s.groups.checkCommit(req.Group, req.Generation, req.MemberID, req.Version, tps)
	}
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
		desc, known := x.topic(s.ctx, rt.Topic)
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
// null. Version 8 on, several groups at once, each answered on its own;
// version 9 names the member (its epoch is checked in groups of the
// consumer protocol).
func (s *Server) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []kmsg.OffsetFetchRequestGroupTopic
		if req.Topics != nil {
			topics = []kmsg.OffsetFetchRequestGroupTopic{}
			for _, rt := range req.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: rt.Topic, Partitions: rt.Partitions})
			}
		}
		code, fetched := s.fetchGroupOffsets(ctx, req.Group, "", -1, topics)
		resp.ErrorCode = code
		for _, ft := range fetched {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = ft.Topic
			for _, fp := range ft.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = fp.Partition, fp.Offset, fp.LeaderEpoch, fp.Metadata, fp.ErrorCode
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	for _, rg := range req.Groups {
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = rg.Group
		g.ErrorCode, g.Topics = s.fetchGroupOffsets(ctx, rg.Group, deref(rg.MemberID), rg.MemberEpoch, rg.Topics)
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// fetchGroupOffsets answers one group of an OffsetFetch: its error code,
// or its topics (all with committed offsets when topics is nil).
func (s *Server) fetchGroupOffsets(ctx context.Context, group, memberID string, memberEpoch int32, topics []kmsg.OffsetFetchRequestGroupTopic) (int16, []kmsg.OffsetFetchResponseGroupTopic) {
	if group == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	if code := s.coordinates(ctx, group); code != 0 {
		return code, nil
	}
	if err := s.catchUpOffsets(ctx); err != nil {
		s.log.Warn("reading committed offsets on", zap.String("group", group), zap.Error(err))
		return kerr.CoordinatorLoadInProgress.Code, nil
	}
	if code := s.groups.checkFetch(group, memberID, memberEpoch); code != 0 {
		return code, nil
	}
	var tps []topicPartition
	if topics != nil {
		tps = []topicPartition{}
		for _, rt := range topics {
			for _, p := range rt.Partitions {
				tps = append(tps, topicPartition{rt.Topic, p})
			}
		}
	}
	got, err := s.offsets.fetch(ctx, group, tps)
	if err != nil {
		return codeOf(err), nil
	}
	if tps == nil {
		tps = slices.SortedFunc(maps.Keys(got), func(a, b topicPartition) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
	}
	out := []kmsg.OffsetFetchResponseGroupTopic{}
	for _, tp := range tps {
		if n := len(out); n == 0 || out[n-1].Topic != tp.topic {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = tp.topic
			out = append(out, t)
		}
		t := &out[len(out)-1]
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.partition, -1, -1
		empty := ""
		p.Metadata = &empty
		if c, ok := got[tp]; ok {
			md := c.metadata
			p.Offset, p.LeaderEpoch, p.Metadata = c.offset, c.leaderEpoch, &md
		}
		t.Partitions = append(t.Partitions, p)
	}
	return 0, out
}

// deref returns *p, "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
