package coordinator

import (
	"context"
	"fmt"
	"reflect"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// serveFunc serves one forwarded call on the shard's local leader: it
// returns once the call is queued there, and answer waits for it.
type serveFunc func(ctx context.Context, s *Coordinator, c *leader, body []byte) (answer func() any)

// peerMethod is one version of a method a broker serves: how, and the
// gob types of its request and answer, pinned (see peer_versions.go); nil
// for one of an encoding of its own, described in the file own names.
type peerMethod struct {
	serve    serveFunc
	req, ans reflect.Type
	own      string
}

// served adapts a method of one request to version 1 of a call: its
// request and answer gob encoded.
func served[Req, Resp any](f func(ctx context.Context, s *Coordinator, c *leader, req Req) (Resp, error)) peerMethod {
	return peerMethod{req: reflect.TypeFor[Req](), ans: reflect.TypeFor[answer[Resp]](), serve: func(ctx context.Context, s *Coordinator, c *leader, body []byte) func() any {
		var req Req
		if err := decodeGob(body, &req); err != nil {
			return func() any { return answer[Resp]{Err: toWire(err)} }
		}
		return func() any {
			v, err := f(ctx, s, c, req)
			return answer[Resp]{Err: toWire(err), Val: v}
		}
	}}
}

// serveCommit serves a commit, whichever the version of its request; own
// says its answer is version 3's (peer_commit.go), not gob.
func serveCommit(ctx context.Context, c *leader, req CommitFileRequest, err error, own bool) func() any {
	reply := func(a commitAnswer, err error) any {
		switch {
		case !own:
			return answer[commitAnswer]{Err: toWire(err), Val: a}
		case err != nil:
			return ownAnswer(appendOwnError(nil, toWire(err)))
		}
		return ownAnswer(appendCommitAnswerV3([]byte{ownValue}, &a))
	}
	if err != nil {
		return func() any { return reply(commitAnswer{}, err) }
	}
	wait, err := c.CommitFileAsync(ctx, req, false) // queued in arrival order
	return func() any {
		var rs []wal.Result
		if err == nil {
			rs, err = wait()
		}
		return reply(commitAnswer{Results: resultsToWire(rs), Applied: c.applied.Load()}, err)
	}
}

// serveFuncs are the calls a broker serves, by their method on the wire
// (see wireMethod).
var serveFuncs = map[string]peerMethod{
	fwCommit: {req: reflect.TypeFor[CommitFileRequest](), ans: reflect.TypeFor[answer[commitAnswer]](),
		serve: func(ctx context.Context, _ *Coordinator, c *leader, body []byte) func() any {
			var req CommitFileRequest
			err := decodeGob(body, &req)
			return serveCommit(ctx, c, req, err, false)
		}},
	wireMethod(fwCommit, 2): {ans: reflect.TypeFor[answer[commitAnswer]](), own: "peer_commit.go",
		serve: func(ctx context.Context, _ *Coordinator, c *leader, body []byte) func() any {
			req, err := readCommitV2(body)
			return serveCommit(ctx, c, req, err, false)
		}},
	wireMethod(fwCommit, 3): {own: "peer_commit.go",
		serve: func(ctx context.Context, _ *Coordinator, c *leader, body []byte) func() any {
			req, err := readCommitV2(body)
			return serveCommit(ctx, c, req, err, true)
		}},
	fwCreate: served(func(ctx context.Context, _ *Coordinator, c *leader, req CreatePartitionsRequest) (uuid.UUID, error) {
		return c.CreatePartitions(ctx, req)
	}),
	fwDeleteTopic: served(func(ctx context.Context, _ *Coordinator, c *leader, id uuid.UUID) (bool, error) {
		return true, c.DeleteTopic(ctx, id)
	}),
	fwDeleteRecords: served(func(ctx context.Context, _ *Coordinator, c *leader, r tpOffset) (int64, error) {
		return c.DeleteRecords(ctx, r.TP, r.Offset)
	}),
	fwProducerID: served(func(ctx context.Context, _ *Coordinator, c *leader, _ bool) (producerID, error) {
		id, epoch, err := c.InitProducerID(ctx)
		return producerID{id, epoch}, err
	}),
	fwFind: served(func(ctx context.Context, _ *Coordinator, c *leader, r tpOffset) (FindResult, error) {
		return c.FindBatches(ctx, r.TP, r.Offset, r.MaxBytes)
	}),
	fwListOffsets: served(func(ctx context.Context, _ *Coordinator, c *leader, r tpOffset) (ListOffsetsResult, error) {
		return c.ListOffsets(ctx, r.TP, r.Offset)
	}),
	fwTopics: served(func(ctx context.Context, _ *Coordinator, c *leader, _ bool) ([]TopicInfo, error) {
		return c.Topics(ctx)
	}),
	wireMethod(fwTopics, 2): {serve: serveTopicsV2, own: "peer_topics.go"},
	fwKnownKeys: served(func(ctx context.Context, _ *Coordinator, c *leader, keys []string) (map[string]bool, error) {
		return c.KnownKeys(ctx, keys)
	}),
	fwRegister: served(func(ctx context.Context, _ *Coordinator, c *leader, seg RemoteSegment) (bool, error) {
		return true, c.RegisterRemoteSegment(ctx, seg)
	}),
	fwSegments: served(func(ctx context.Context, _ *Coordinator, c *leader, tp wal.TopicPartition) ([]RemoteSegment, error) {
		return c.RemoteSegments(ctx, tp)
	}),
	fwReceive: served(func(ctx context.Context, _ *Coordinator, c *leader, req OwnershipRequest) (OwnershipResult, error) {
		return c.ReceiveOwnership(ctx, req)
	}),
	fwDeleted: served(func(ctx context.Context, _ *Coordinator, c *leader, keys []string) (bool, error) {
		return true, c.ObjectsDeleted(ctx, keys)
	}),
	fwCommitOffsets: served(func(ctx context.Context, _ *Coordinator, c *leader, g groupOffsets) (bool, error) {
		return true, c.CommitOffsets(ctx, g.Group, g.Claim, g.Offsets)
	}),
	fwFetchOffsets: served(func(ctx context.Context, _ *Coordinator, c *leader, g groupOffsets) ([]GroupOffset, error) {
		return c.FetchOffsets(ctx, g.Group, g.parts())
	}),
	fwDeleteOffsets: served(func(ctx context.Context, _ *Coordinator, c *leader, g groupOffsets) (bool, error) {
		return true, c.DeleteOffsets(ctx, g.Group, g.Claim, g.parts())
	}),
	fwOffsetGroups: served(func(ctx context.Context, _ *Coordinator, c *leader, _ bool) ([]string, error) {
		return c.OffsetGroups(ctx)
	}),
	fwClaimGroup: served(func(ctx context.Context, _ *Coordinator, c *leader, group string) (int64, error) {
		return c.ClaimGroup(ctx, group)
	}),
	fwPutGroup: served(func(ctx context.Context, _ *Coordinator, c *leader, p groupMetadataPut) (bool, error) {
		return true, c.PutGroupMetadata(ctx, p.Group, p.Claim, p.Generation, p.Value)
	}),
	fwGroup: served(func(ctx context.Context, _ *Coordinator, c *leader, group string) (GroupMetadata, error) {
		return c.GroupMetadata(ctx, group)
	}),
	fwAdminAdd: served(func(ctx context.Context, s *Coordinator, _ *leader, req addPartitionsCall) (bool, error) {
		return true, s.addPartitions(ctx, req.TopicID, req.Partitions)
	}),
	fwAdd: served(func(ctx context.Context, _ *Coordinator, c *leader, a addCall) (bool, error) {
		switch {
		case a.All:
			a.Req.Assigned = nil
		case a.Req.Assigned == nil:
			a.Req.Assigned = []int32{}
		}
		return true, c.AddPartitions(ctx, a.Req)
	}),
	fwAdminAlter: served(func(ctx context.Context, s *Coordinator, _ *leader, req alterTopicCall) (bool, error) {
		return true, s.alterTopic(ctx, req.TopicID, req.Config)
	}),
	fwAlter: served(func(ctx context.Context, _ *Coordinator, c *leader, req alterTopicCall) (bool, error) {
		return true, c.AlterTopicConfig(ctx, req.TopicID, req.Config)
	}),
	fwAdminCreate: served(func(ctx context.Context, s *Coordinator, _ *leader, req CreatePartitionsRequest) (uuid.UUID, error) {
		return s.createPartitions(ctx, req)
	}),
	fwAdminDelete: served(func(ctx context.Context, s *Coordinator, _ *leader, id uuid.UUID) (bool, error) {
		return true, s.deleteTopic(ctx, id)
	}),
	fwAdminScram:      serveScram,
	fwAdminCreateACLs: serveCreateACLs,
	fwAdminDeleteACLs: serveDeleteACLs,
	fwSecurity:        serveSecurity,
	fwScramCredential: serveScramCredential,
	fwAdminQuotas:     serveAlterQuotas,
	fwClientQuotas:    serveClientQuotas,
	fwTxn:             serveTxnV1, // peer_txn.go
	fwTxnV2:           serveTxnV2,
	fwPartitionTxns: served(func(ctx context.Context, _ *Coordinator, c *leader, ops []PartitionTxn) (partTxnsAnswer, error) {
		errs, err := c.PartitionTxns(ctx, ops)
		if err != nil {
			return partTxnsAnswer{}, err
		}
		a := partTxnsAnswer{Failed: make([]bool, len(errs)), Errs: make([]wireErr, len(errs))}
		for i, e := range errs {
			if e != nil {
				a.Failed[i], a.Errs[i] = true, *toWire(e)
			}
		}
		return a, nil
	}),
	fwTransactions:   serveTransactionsV1,
	fwTransactionsV2: serveTransactionsV2,
	fwAborted: served(func(ctx context.Context, _ *Coordinator, c *leader, req abortedCall) ([]AbortedTxn, error) {
		return c.AbortedTxns(ctx, req.TP, req.From, req.To, false)
	}),
	wireMethod(fwAborted, 2): served(func(ctx context.Context, _ *Coordinator, c *leader, req abortedCallV2) ([]AbortedTxn, error) {
		return c.AbortedTxns(ctx, req.TP, req.From, req.To, req.Fetch)
	}),
}

// Serve serves a call another broker's Forwarder brought for shard: it
// returns once the call is queued behind those served before it (a
// transport serves the calls of one connection in the order they came,
// and may then wait for their answers concurrently), and answer returns
// the bytes to send back, which hold an error if shard is not led here.
func (h Shards) Serve(ctx context.Context, shard int, method string, body []byte) (answer func() []byte) {
	c := h.c
	fail := func(err error) func() []byte {
		b := encodeGob(answerHead{Err: toWire(err)})
		return func() []byte { return b }
	}
	f, ok := serveFuncs[method]
	if name, v, _ := parseWireMethod(method); !ok || v > c.speaks[name] {
		return fail(noVersionErr(method))
	}
	sh, err := c.localShard(shard)
	if err != nil {
		return fail(err)
	}
	if err := sh.Err(); err != nil {
		return fail(err)
	}
	a := f.serve(ctx, c, sh, body)
	return func() []byte {
		v := a()
		if own, ok := v.(ownAnswer); ok {
			return own
		}
		return encodeGob(v)
	}
}

// answerHead is the head of every answer: an answer with only an error
// decodes as an answer of any type, and any answer as a head.
type answerHead struct{ Err *wireErr }

// localShard returns shard i's leader if it is led here.
func (c *Coordinator) localShard(i int) (*leader, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.mu.closed:
		return nil, ErrClosed
	case i < 0 || i >= len(c.mu.coords):
		return nil, kafkaerr.New(kafkaerr.InvalidRequest, "no shard %d of %d", i, len(c.mu.coords))
	case c.mu.coords[i] == nil:
		return nil, fmt.Errorf("shard %d: %w", i, errNotServed)
	}
	return c.mu.coords[i], nil
}
