package kafkaserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

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
}

// offsetStorage is where committed offsets live: the small interface the
// group coordinator and the offset APIs use. Implementations are safe for
// concurrent use; errors carry the Kafka code to answer.
type offsetStorage interface {
	// commit stores a group's offsets, all or none, under the claim
	// (0: none) this node holds on the group.
	commit(ctx context.Context, group string, claim int64, offsets []offsetCommit) error
	// fetch returns a group's committed offsets: those of tps, or all
	// when tps is nil.
	fetch(ctx context.Context, group string, tps []topicPartition) (map[topicPartition]committed, error)
	// delete deletes a group's committed offsets: those of tps, or all
	// when tps is nil; under a claim as commit.
	delete(ctx context.Context, group string, claim int64, tps []topicPartition) error
	// groups returns the groups with committed offsets, sorted. Every
	// node of a cluster sees the same.
	groups(ctx context.Context) ([]string, error)
}

var _ offsetStorage = (*coordOffsets)(nil)

// coordOffsets keeps committed offsets in the library's coordinator
// (Broker.CommitOffsets): a commit is one record of a metadata-log entry,
// not a produce, and every node of a cluster reads the same offsets from
// the group's shard.
type coordOffsets struct {
	b *diskless.Broker
}

// openOffsets returns the committed offsets over b, after importing those
// that an earlier version of this package kept in the offsets topic (see
// importOffsetsTopic). The offsets topic is created if missing: clients
// and tools expect to see it, though nothing is written to it.
func openOffsets(ctx context.Context, b *diskless.Broker, log *zap.Logger, mirror bool) (*coordOffsets, error) {
	if err := ensureInternalTopic(ctx, b, offsetsTopic); err != nil {
		return nil, err
	}
	if mirror {
		return &coordOffsets{b: b}, nil // what the topic holds is the mirror's (offsetmirror.go)
	}
	if err := importOffsetsTopic(ctx, b, log); err != nil {
		return nil, fmt.Errorf("importing committed offsets from %s: %w", offsetsTopic, err)
	}
	return &coordOffsets{b: b}, nil
}

// importOffsetsTopic reads the offsets topic (Kafka's record format: key
// OffsetCommitKey v1, value OffsetCommitValue v3, a null value deleting
// the key), where this package kept committed offsets before the
// coordinator held them; commits to the coordinator each offset it does
// not hold yet (of a topic that still exists); then deletes the topic's
// records, so that the next start imports nothing and an offset deleted
// since never comes back.
func importOffsetsTopic(ctx context.Context, b *diskless.Broker, log *zap.Logger) error {
	hw, err := b.ListOffsets(ctx, offsetsTopic, 0, diskless.LatestTimestamp)
	if err != nil {
		return err
	}
	start, err := b.ListOffsets(ctx, offsetsTopic, 0, diskless.EarliestTimestamp)
	if err != nil {
		return err
	}
	if start.Offset >= hw.Offset {
		return nil
	}
	t := newTopicOffsets(log)
	if _, _, err := replayTopicFrom(ctx, b, offsetsTopic, 0, t.apply); err != nil {
		return err
	}
	imported := 0
	for group, offsets := range t.groups {
		have, err := b.FetchOffsets(ctx, group, nil)
		if err != nil {
			return err
		}
		held := map[topicPartition]bool{}
		for _, o := range have {
			held[topicPartition{o.Topic, o.Partition}] = true
		}
		var add []diskless.GroupOffset
		for tp, c := range offsets {
			if held[tp] {
				continue
			}
			if _, err := b.ListOffsets(ctx, tp.topic, tp.partition, diskless.LatestTimestamp); err != nil {
				continue // its topic or partition is gone
			}
			add = append(add, diskless.GroupOffset{Topic: tp.topic, Partition: tp.partition, Offset: c.offset, LeaderEpoch: c.leaderEpoch, Metadata: c.metadata})
		}
		if len(add) > 0 {
			if err := b.CommitOffsets(ctx, group, 0, add); err != nil {
				return err
			}
			imported += len(add)
		}
	}
	if _, err := b.DeleteRecords(ctx, offsetsTopic, 0, hw.Offset); err != nil {
		return err
	}
	log.Info("committed offsets imported from the offsets topic into the coordinator", zap.String("topic", offsetsTopic),
		zap.Int("groups", len(t.groups)), zap.Int("offsets", imported))
	return nil
}

// topicOffsets is the committed offsets that records of the offsets topic
// say, read in offset order.
type topicOffsets struct {
	log    *zap.Logger
	groups map[string]map[topicPartition]committed
}

func newTopicOffsets(log *zap.Logger) *topicOffsets {
	return &topicOffsets{log: log, groups: map[string]map[topicPartition]committed{}}
}

// apply applies one record of the offsets topic; records it does not
// know are skipped.
func (o *topicOffsets) apply(key, value []byte, at int64) {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil || k.Version > offsetKeyVersion {
		return // group metadata (version 2), or not Kafka's
	}
	tp := topicPartition{k.Topic, k.Partition}
	g := o.groups[k.Group]
	if value == nil {
		delete(g, tp)
		if len(g) == 0 {
			delete(o.groups, k.Group)
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
		o.groups[k.Group] = g
	}
	g[tp] = committed{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata}
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
			errs = append(errs, o.delete(ctx, group, 0, tps))
		}
	}
	return errors.Join(errs...)
}

// commit commits a group's offsets in the coordinator.
func (o *coordOffsets) commit(ctx context.Context, group string, claim int64, offsets []offsetCommit) error {
	out := make([]diskless.GroupOffset, len(offsets))
	for i, c := range offsets {
		out[i] = diskless.GroupOffset{Topic: c.tp.topic, Partition: c.tp.partition, Offset: c.offset, LeaderEpoch: c.leaderEpoch, Metadata: c.metadata}
	}
	if err := o.b.CommitOffsets(ctx, group, claim, out); err != nil {
		return commitError(err)
	}
	return nil
}

// commitError maps a failure to commit offsets to the code Kafka gives
// for a failure of its offsets topic (GroupMetadataManager): retriable
// failures say the coordinator is not available, so the client retries;
// the codes of a refused commit stay, NOT_COORDINATOR among them (another
// node claimed the group since this one did).
func commitError(err error) error {
	var code kafkaerr.Code
	switch c := kafkaerr.CodeOf(err); {
	case c == kafkaerr.NotCoordinator:
		code = c
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, diskless.ErrClosed), c.Retriable():
		code = kafkaerr.CoordinatorNotAvailable
	case c == kafkaerr.MessageTooLarge || c == kafkaerr.RecordListTooLarge:
		code = kafkaerr.InvalidCommitOffsetSize
	case c == kafkaerr.OffsetMetadataTooLarge, c == kafkaerr.UnknownTopicOrPartition, c == kafkaerr.InvalidGroupID:
		code = c
	default:
		code = kafkaerr.UnknownServerError
	}
	return &kafkaerr.Error{Code: code, Message: "committing offsets", Err: err}
}

// fetch returns a group's committed offsets: the partitions asked for, or
// all when tps is nil.
func (o *coordOffsets) fetch(ctx context.Context, group string, tps []topicPartition) (map[topicPartition]committed, error) {
	got, err := o.b.FetchOffsets(ctx, group, groupPartitions(tps))
	if err != nil {
		return nil, readError(err)
	}
	out := make(map[topicPartition]committed, len(got))
	for _, g := range got {
		out[topicPartition{g.Topic, g.Partition}] = committed{offset: g.Offset, leaderEpoch: g.LeaderEpoch, metadata: g.Metadata}
	}
	return out, nil
}

// groupPartitions converts partitions to the facade's: nil stays nil
// (every partition).
func groupPartitions(tps []topicPartition) []diskless.GroupPartition {
	if tps == nil {
		return nil
	}
	parts := make([]diskless.GroupPartition, len(tps))
	for i, tp := range tps {
		parts[i] = diskless.GroupPartition{Topic: tp.topic, Partition: tp.partition}
	}
	return parts
}

// readError maps a failure to read or delete committed offsets: retriable
// failures say the coordinator is loading, so the client retries;
// NOT_COORDINATOR (a delete under a claim superseded) stays.
func readError(err error) error {
	code := kafkaerr.CodeOf(err)
	switch {
	case code == kafkaerr.NotCoordinator:
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, diskless.ErrClosed), code.Retriable():
		code = kafkaerr.CoordinatorLoadInProgress
	case code == kafkaerr.NoError:
		code = kafkaerr.UnknownServerError
	}
	return &kafkaerr.Error{Code: code, Message: "reading committed offsets", Err: err}
}

// delete deletes a group's committed offsets of tps (all when tps is
// nil).
func (o *coordOffsets) delete(ctx context.Context, group string, claim int64, tps []topicPartition) error {
	if err := o.b.DeleteOffsets(ctx, group, claim, groupPartitions(tps)); err != nil {
		return readError(err)
	}
	return nil
}

// groups returns the groups with committed offsets, sorted.
func (o *coordOffsets) groups(ctx context.Context) ([]string, error) {
	gs, err := o.b.OffsetGroups(ctx)
	if err != nil {
		return nil, readError(err)
	}
	return gs, nil
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
	code, claim := s.coordinatesUnder(s.ctx, req.Group)
	if code == 0 {
		code = s.groups.checkCommit(req.Group, req.Generation, req.MemberID, req.InstanceID, req.Version, tps)
		code = s.commitCode(s.ctx, req, code)
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
				p.ErrorCode = int16(kafkaerr.UnknownTopicOrPartition)
			case len(metadata) > maxOffsetMetadata:
				p.ErrorCode = int16(kafkaerr.OffsetMetadataTooLarge)
			default:
				commits = append(commits, offsetCommit{topicPartition{rt.Topic, rp.Partition}, committed{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, metadata: metadata}})
				slots = append(slots, p)
			}
		}
	}
	if len(commits) > 0 {
		ctx, cancel := context.WithTimeout(s.work, 30*time.Second)
		defer cancel()
		debug := s.log.Core().Enabled(zap.DebugLevel)
		var seq int64
		if debug {
			// One line each, before the commit (a node killed once it is
			// committed has logged it): every commit tried, numbered, for
			// tests and audits; one that fails is logged as failed.
			seq = s.commits.Add(1)
			for _, c := range commits {
				s.log.Debug("committing offset", zap.String("group", req.Group), zap.String("topic", c.tp.topic),
					zap.Int32("partition", c.tp.partition), zap.Int64("offset", c.offset), zap.Int64("commit", seq), zap.Int64("claim", claim),
					zap.String("member", req.MemberID), zap.Int32("generation", req.Generation))
			}
		}
		if err := s.offsets.commit(ctx, req.Group, claim, commits); err != nil {
			s.log.Warn("committing offsets", zap.String("group", req.Group), zap.Error(err))
			if debug {
				// refused: the coordinator decided against it (it never
				// lands); else it may have landed, its answer lost (also
				// when a retry of a forwarded commit was refused).
				refused := kafkaerr.CodeOf(err) == kafkaerr.NotCoordinator && !errors.Is(err, diskless.ErrOutcomeUnknown)
				s.log.Debug("offset commit failed", zap.String("group", req.Group), zap.Int64("commit", seq),
					zap.Bool("refused", refused), zap.Error(err))
			}
			s.fenced(req.Group, claim, err)
			for _, p := range slots {
				p.ErrorCode = codeOf(err)
			}
		} else if debug {
			s.log.Debug("offsets committed", zap.String("group", req.Group), zap.Int64("commit", seq))
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
		code, fetched := s.fetchGroupOffsets(ctx, req.Group, nil, -1, topics, req.RequireStable)
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
		g.ErrorCode, g.Topics = s.fetchGroupOffsets(ctx, rg.Group, rg.MemberID, rg.MemberEpoch, rg.Topics, req.RequireStable)
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// fetchGroupOffsets answers one group of an OffsetFetch: its error code,
// or its topics (all with committed offsets when topics is nil). With
// stable (require_stable, KIP-447), a partition with offsets committed in
// a transaction not yet ended is UNSTABLE_OFFSET_COMMIT, which the client
// retries: a consumer taking over from a transactional one does not
// start from an offset its transaction is about to move.
func (s *Server) fetchGroupOffsets(ctx context.Context, group string, memberID *string, memberEpoch int32, topics []kmsg.OffsetFetchRequestGroupTopic, stable bool) (int16, []kmsg.OffsetFetchResponseGroupTopic) {
	if group == "" {
		return int16(kafkaerr.InvalidGroupID), nil
	}
	if code := s.coordinates(ctx, group); code != 0 {
		return code, nil
	}
	if code := s.groups.checkOffsetFetch(group, memberID, memberEpoch); code != 0 {
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
	var unstable map[topicPartition]bool
	if stable {
		pending, err := s.b.PendingTxnOffsets(ctx, group)
		if err != nil {
			return int16(kafkaerr.CoordinatorLoadInProgress), nil
		}
		unstable = map[topicPartition]bool{}
		for _, p := range pending {
			unstable[topicPartition{p.Topic, p.Partition}] = true
		}
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
		if unstable[tp] {
			p.Offset, p.LeaderEpoch, p.ErrorCode = -1, -1, int16(kafkaerr.UnstableOffsetCommit)
		}
		t.Partitions = append(t.Partitions, p)
	}
	return 0, out
}

// checkOffsetFetch returns the error code of an OffsetFetch by memberID
// at epoch (version 9), as Kafka 4's group coordinator checks it
// (ConsumerGroup.validateOffsetFetch): a classic group checks nothing,
// nor does a fetch naming no member (null) with a negative epoch (an
// admin client's, or a consumer's that is in no group); in a consumer
// group a member it does not have (a null or empty member ID among them)
// is UNKNOWN_MEMBER_ID, another epoch than the member's
// STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a member of the classic
// protocol, consumerclassic.go, whose generation is its epoch).
func (gs *groups) checkOffsetFetch(group string, memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.consumer[group]
	if g == nil {
		return 0
	}
	var m *cmember
	if memberID != nil {
		m = g.members[*memberID]
	}
	switch {
	case m == nil:
		return int16(kafkaerr.UnknownMemberID)
	case m.epoch != epoch && m.classic != nil:
		return int16(kafkaerr.IllegalGeneration)
	case m.epoch != epoch:
		return int16(kafkaerr.StaleMemberEpoch)
	}
	return 0
}

// commitCode refines the error code that checkCommit gave an
// OffsetCommit, where Kafka 4's group coordinator answers otherwise
// (OffsetMetadataManager.validateOffsetCommit, ClassicGroup and
// ConsumerGroup.validateOffsetCommit):
//
//   - a commit with a generation (not -1) to a classic group with no
//     members: if the group exists (the coordinator holds it, it went
//     empty lately, or it has committed offsets, which in Kafka keep an
//     empty group) the member is not in it, UNKNOWN_MEMBER_ID; if it does
//     not, GROUP_ID_NOT_FOUND from version 9 on, ILLEGAL_GENERATION
//     before;
//   - a commit by a member of a consumer group (KIP-848) that speaks its
//     protocol (not the classic one, consumerclassic.go) below version 9
//     is UNSUPPORTED_VERSION: members of that protocol must commit with 9.
func (s *Server) commitCode(ctx context.Context, req *kmsg.OffsetCommitRequest, code int16) int16 {
	known, empty, member := s.groups.commitPresence(req.Group, req.MemberID)
	switch {
	case member && req.Version < 9 &&
		(code == 0 || code == int16(kafkaerr.StaleMemberEpoch) || code == int16(kafkaerr.FencedMemberEpoch)):
		return int16(kafkaerr.UnsupportedVersion)
	case code != int16(kafkaerr.IllegalGeneration) || req.Generation < 0 || !empty:
		return code
	case known || s.hasOffsets(ctx, req.Group):
		return int16(kafkaerr.UnknownMemberID)
	case req.Version >= 9:
		return int16(kafkaerr.GroupIDNotFound)
	}
	return code
}

// commitPresence reports, for an OffsetCommit to group by memberID,
// whether the coordinator knows the group (in memory, or gone empty
// lately), whether it is a classic group with no members, and whether
// memberID is a member of the group as a consumer group (KIP-848) of
// that protocol.
func (gs *groups) commitPresence(group, memberID string) (known, emptyClassic, consumerMember bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if cg := gs.mu.consumer[group]; cg != nil {
		m := cg.members[memberID]
		return true, false, m != nil && m.classic == nil
	}
	g := gs.mu.groups[group]
	if g == nil {
		_, kept := gs.mu.emptyGens[group]
		return kept, true, false
	}
	return true, g.state == groupEmpty, false
}

// deref returns *p, "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
