package coordinator

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/backoff"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Many brokers, one set of shards.
//
// With Options.Forwarder set, a Coordinator is one broker's view of shards
// that several brokers share: each shard is led by one broker at a time
// (the one its election chose: see package cluster), and the others reach
// it through the Forwarder. Open takes a nil log for a shard this broker
// does not lead; Lead gives it one when it is elected, Unlead takes it
// back when it loses the shard. Every method of Coordinator works on every
// broker: a call for a shard led here goes to its leader in this process,
// one for a shard led elsewhere is encoded (the method's name and a gob
// body), sent by the Forwarder to the leader's broker, whose transport
// hands it to Serve there, and the answer comes back the same way. Topic
// creation and deletion go to the leader of shard 0, which assigns the
// partitions and serialises them for the whole cluster; reads of a shard
// led elsewhere are answered by its leader, so they see every commit
// acknowledged before them, wherever it was made.
//
// A call caught in a change of leader (no leader yet, the connection
// lost, the leader's log fenced) is sent again, to whichever broker leads
// then, until its context ends. A commit is sent again as it was: a
// leader that finds the object committed already (by the one before it,
// whose answer was lost) answers with the offsets that commit took, and
// logs nothing (see commitOp.check), so an object is committed once
// whoever answers.

// Forwarder carries calls for shards this broker does not lead to the
// broker that does. Package cluster's Node is one (cluster/etcdcluster's
// over etcd, its calls over TCP); an embedding program may write its own
// over its own RPC.
type Forwarder interface {
	// Forward sends one call, opaque bytes for shard's leader's
	// Coordinator.Serve, and returns once it is sent: calls sent one after
	// another from one goroutine reach the leader, and are served, in that
	// order (commits of one producer's batches depend on it). wait
	// returns the bytes Serve answered, or an error if none came back (no
	// leader, connection lost, ctx ended): the call may or may not have
	// been applied.
	Forward(ctx context.Context, shard int, method string, body []byte) (wait func() ([]byte, error))
}

// shardAPI is what Coordinator asks of a shard: its leader in this
// process (*leader) or the one of another broker (*remoteShard).
type shardAPI interface {
	Peer
	Err() error
	CreatePartitions(ctx context.Context, req CreatePartitionsRequest) (uuid.UUID, error)
	AddPartitions(ctx context.Context, req AddPartitionsRequest) error
	AlterTopicConfig(ctx context.Context, topicID uuid.UUID, cfg TopicConfig) error
	DeleteTopic(ctx context.Context, topicID uuid.UUID) error
	CommitFileAsync(ctx context.Context, req CommitFileRequest) (func() ([]wal.Result, error), error)
	DeleteRecords(ctx context.Context, tp wal.TopicPartition, offset int64) (int64, error)
	InitProducerID(ctx context.Context) (int64, int16, error)
	FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, error)
	ListOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error)
	Topics(ctx context.Context) ([]TopicInfo, error)
	KnownKeys(ctx context.Context, keys []string) (map[string]bool, error)
	RegisterRemoteSegment(ctx context.Context, seg RemoteSegment) error
	RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error)
	CommitOffsets(ctx context.Context, group string, claim int64, offsets []GroupOffset) error
	FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]GroupOffset, error)
	DeleteOffsets(ctx context.Context, group string, claim int64, parts []GroupPartition) error
	ClaimGroup(ctx context.Context, group string) (int64, error)
	PutGroupMetadata(ctx context.Context, group string, claim, generation int64, value []byte) error
	GroupMetadata(ctx context.Context, group string) (GroupMetadata, error)
	OffsetGroups(ctx context.Context) ([]string, error)
	Txn(ctx context.Context, req TxnRequest) (Transaction, error)
	PartitionTxns(ctx context.Context, ops []PartitionTxn) ([]error, error)
	Transactions(ctx context.Context, ids []string) ([]Transaction, error)
	AbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64) ([]AbortedTxn, error)
}

var (
	_ shardAPI = (*leader)(nil)
	_ shardAPI = (*remoteShard)(nil)
)

// The methods a Forwarder carries. Part of the peer protocol.
const (
	fwCommit        = "commit"
	fwCreate        = "create"
	fwDeleteTopic   = "delete-topic"
	fwDeleteRecords = "delete-records"
	fwProducerID    = "producer-id"
	fwFind          = "find"
	fwListOffsets   = "list-offsets"
	fwTopics        = "topics"
	fwKnownKeys     = "known-keys"
	fwRegister      = "register-segment"
	fwSegments      = "segments"
	fwReceive       = "receive-ownership"
	fwDeleted       = "objects-deleted"
	fwCommitOffsets = "commit-offsets"
	fwFetchOffsets  = "fetch-offsets"
	fwDeleteOffsets = "delete-offsets"
	fwOffsetGroups  = "offset-groups"
	fwClaimGroup    = "claim-group"
	fwPutGroup      = "put-group-metadata"
	fwGroup         = "group-metadata"
	// The cluster's admin calls, served by the leader of shard 0.
	fwAdminCreate = "admin-create"
	fwAdminAdd    = "admin-add-partitions"
	fwAdd         = "add-partitions"
	fwAdminDelete = "admin-delete"
	fwAdminAlter  = "admin-alter-topic"
	fwAlter       = "alter-topic"
	// The security calls (security.go), served by the leader of shard 0.
	fwAdminScram      = "admin-scram"
	fwAdminCreateACLs = "admin-create-acls"
	fwAdminDeleteACLs = "admin-delete-acls"
	fwSecurity        = "security"
	fwScramCredential = "scram-credential"
)

// wireErr is an error on the wire: its Kafka code, text, and which of our
// sentinels it was.
type wireErr struct {
	Code kafkaerr.Code
	Msg  string
	Kind uint8
}

const (
	errKindOther     uint8 = iota
	errKindNotServed       // not led there (any more): send it to the leader
	errKindDeadline
	errKindCanceled
)

func toWire(err error) *wireErr {
	if err == nil {
		return nil
	}
	w := &wireErr{Code: kafkaerr.CodeOf(err), Msg: err.Error()}
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrShardDown), errors.Is(err, errNotServed), errors.Is(err, ErrNotLeader):
		w.Kind = errKindNotServed
	case errors.Is(err, context.DeadlineExceeded):
		w.Kind = errKindDeadline
	case errors.Is(err, context.Canceled):
		w.Kind = errKindCanceled
	}
	if w.Code == kafkaerr.UnknownServerError && w.Kind == errKindOther {
		w.Code = 0
	}
	return w
}

func (w *wireErr) err() error {
	switch {
	case w == nil:
		return nil
	case w.Kind == errKindNotServed:
		return &kafkaerr.Error{Code: kafkaerr.NotLeaderOrFollower, Message: w.Msg, Err: errNotServed}
	case w.Kind == errKindDeadline:
		return fmt.Errorf("%s: %w", w.Msg, context.DeadlineExceeded)
	case w.Kind == errKindCanceled:
		return fmt.Errorf("%s: %w", w.Msg, context.Canceled)
	case w.Code != 0:
		return &kafkaerr.Error{Code: w.Code, Message: w.Msg}
	}
	return errors.New(w.Msg)
}

// errNotServed: the broker asked does not lead the shard (any more).
var errNotServed = errors.New("coordinator: this broker does not lead the shard")

// wireResult is a wal.Result on the wire.
type wireResult struct {
	BaseOffset, LogAppendTime, LogStartOffset int64
	Err                                       *wireErr
}

func resultsToWire(rs []wal.Result) []wireResult {
	out := make([]wireResult, len(rs))
	for i, r := range rs {
		out[i] = wireResult{r.BaseOffset, r.LogAppendTime, r.LogStartOffset, toWire(r.Err)}
	}
	return out
}

func resultsFromWire(ws []wireResult) []wal.Result {
	out := make([]wal.Result, len(ws))
	for i, w := range ws {
		out[i] = wal.Result{BaseOffset: w.BaseOffset, LogAppendTime: w.LogAppendTime, LogStartOffset: w.LogStartOffset, Err: w.Err.err()}
	}
	return out
}

// answer is what Serve sends back: an error or the value.
type answer[T any] struct {
	Err *wireErr
	Val T
}

// The request bodies with more than one field.
type (
	tpOffset struct {
		TP               wal.TopicPartition
		Offset, MaxBytes int64
	}
	producerID struct {
		ID    int64
		Epoch int16
	}
)

func encodeGob(v any) []byte {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		panic(fmt.Sprintf("coordinator: encoding a forwarded call: %v", err)) // our own types: a bug
	}
	return b.Bytes()
}

func decodeGob(b []byte, v any) error {
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		return kafkaerr.New(kafkaerr.InvalidRequest, "a forwarded call's body does not decode: %v", err)
	}
	return nil
}

// remoteShard is a shard led by another broker, reached through fwd.
type remoteShard struct {
	s     *Coordinator
	shard int
}

// forwardTimeout bounds a forwarded call whose context has no deadline.
const forwardTimeout = 30 * time.Second

// forward sends a call until a leader answers it, or ctx ends: a call no
// broker took (no leader, connection lost, not the leader there) goes
// again, after a short wait, to whichever leads then. It returns the
// answer's bytes once they come.
func (r *remoteShard) forward(ctx context.Context, method string, body []byte) (wait func() ([]byte, *wireErr, error)) {
	// Each attempt has a deadline of its own: a leader that froze (or was
	// cut off) holds its connection open without answering, and the call
	// must go on to the next leader once there is one.
	attempt := func() (func() ([]byte, error), context.CancelFunc) {
		actx, cancel := context.WithTimeout(ctx, r.s.opts.ForwardAttemptTimeout)
		return r.s.opts.Forwarder.Forward(actx, r.shard, method, body), cancel
	}
	first, firstCancel := attempt()
	return func() ([]byte, *wireErr, error) {
		// real time, in both lines: forwardNanos is a latency metric of real I/O
		start := time.Now()
		defer func() { r.s.stats.forwardNanos.Add(time.Since(start).Nanoseconds()) }()
		r.s.stats.forwarded.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, forwardTimeout)
			defer cancel()
		}
		wait, cancelAttempt := first, firstCancel
		bo := backoff.Backoff{Policy: backoff.Policy{Initial: 5 * time.Millisecond, Max: 200 * time.Millisecond}}
		lost := false // an attempt's answer was lost: it may have been applied
		for {
			out, err := wait()
			cancelAttempt()
			if err == nil {
				var head answerHead
				if derr := decodeGob(out, &head); derr != nil {
					return nil, nil, derr
				}
				if head.Err != nil && head.Err.Kind != errKindNotServed && lost {
					// A refusal now does not undo what the lost attempt
					// may have done (a commit made before the group was
					// claimed again, say).
					return nil, nil, &outcomeUnknown{head.Err.err()}
				}
				if head.Err == nil || head.Err.Kind != errKindNotServed {
					return out, head.Err, nil
				}
				err = head.Err.err()
			} else {
				lost = true
			}
			r.s.stats.forwardRetries.Add(1)
			if werr := bo.Wait(ctx); werr != nil {
				return nil, nil, &kafkaerr.Error{Code: kafkaerr.NotLeaderOrFollower,
					Message: fmt.Sprintf("no leader of shard %d answered: %v", r.shard, err), Err: werr}
			}
			wait, cancelAttempt = attempt()
		}
	}
}

// remoteCall forwards req and decodes the answer's value.
func remoteCall[Resp any](ctx context.Context, r *remoteShard, method string, req any) (Resp, error) {
	return remoteWait[Resp](r.forward(ctx, method, encodeGob(req)))()
}

func remoteWait[Resp any](wait func() ([]byte, *wireErr, error)) func() (Resp, error) {
	return func() (Resp, error) {
		var a answer[Resp]
		out, werr, err := wait()
		if err != nil {
			return a.Val, err
		}
		if werr != nil {
			return a.Val, werr.err()
		}
		if err := decodeGob(out, &a); err != nil {
			return a.Val, err
		}
		return a.Val, nil
	}
}

// The methods of shardAPI, each forwarded as its fw* method. Err is nil:
// whether the leader serves is known only by asking it.
func (r *remoteShard) Err() error { return nil }

func (r *remoteShard) CreatePartitions(ctx context.Context, req CreatePartitionsRequest) (uuid.UUID, error) {
	return remoteCall[uuid.UUID](ctx, r, fwCreate, req)
}

func (r *remoteShard) DeleteTopic(ctx context.Context, id uuid.UUID) error {
	_, err := remoteCall[bool](ctx, r, fwDeleteTopic, id)
	return err
}

func (r *remoteShard) CommitFileAsync(ctx context.Context, req CommitFileRequest) (func() ([]wal.Result, error), error) {
	wait := remoteWait[commitAnswer](r.forward(ctx, fwCommit, encodeGob(req)))
	return func() ([]wal.Result, error) {
		a, err := wait()
		if err != nil {
			return nil, err
		}
		if fs, _ := r.s.follower(r.shard); fs != nil {
			for { // acked = max(acked, a.Applied)
				old := fs.acked.Load()
				if a.Applied <= old || fs.acked.CompareAndSwap(old, a.Applied) {
					break
				}
			}
		}
		return resultsFromWire(a.Results), nil
	}, nil
}

// commitAnswer is a forwarded commit's answer: the results, and the
// leader's applied log position once it had them (at or after the
// commit's entry), which a broker's follower applies before it answers a
// read of that broker.
type commitAnswer struct {
	Results []wireResult
	Applied int64
}

func (r *remoteShard) DeleteRecords(ctx context.Context, tp wal.TopicPartition, offset int64) (int64, error) {
	return remoteCall[int64](ctx, r, fwDeleteRecords, tpOffset{TP: tp, Offset: offset})
}

func (r *remoteShard) InitProducerID(ctx context.Context) (int64, int16, error) {
	p, err := remoteCall[producerID](ctx, r, fwProducerID, true)
	if err != nil {
		return -1, -1, err
	}
	return p.ID, p.Epoch, nil
}

func (r *remoteShard) FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, error) {
	if res, ok := r.s.followerFind(ctx, r.shard, tp, offset, maxBytes); ok {
		return res, nil
	}
	return remoteCall[FindResult](ctx, r, fwFind, tpOffset{TP: tp, Offset: offset, MaxBytes: maxBytes})
}

func (r *remoteShard) ListOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error) {
	res, err := remoteCall[ListOffsetsResult](ctx, r, fwListOffsets, tpOffset{TP: tp, Offset: timestamp})
	if err != nil {
		return ListOffsetsResult{Offset: -1, Timestamp: -1}, err
	}
	return res, nil
}

func (r *remoteShard) Topics(ctx context.Context) ([]TopicInfo, error) {
	return remoteCall[[]TopicInfo](ctx, r, fwTopics, true)
}

func (r *remoteShard) KnownKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	return remoteCall[map[string]bool](ctx, r, fwKnownKeys, keys)
}

func (r *remoteShard) RegisterRemoteSegment(ctx context.Context, seg RemoteSegment) error {
	_, err := remoteCall[bool](ctx, r, fwRegister, seg)
	return err
}

func (r *remoteShard) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	return remoteCall[[]RemoteSegment](ctx, r, fwSegments, tp)
}

// groupOffsets is the request of a forwarded offset call: a group, the
// claim it is made under, and its offsets to commit or the partitions to
// read or delete (Parts nil: all; All says so, since gob sends an empty
// list as nil).
type groupOffsets struct {
	Group   string
	Claim   int64
	Offsets []GroupOffset
	Parts   []GroupPartition
	All     bool
}

func (r *remoteShard) CommitOffsets(ctx context.Context, group string, claim int64, offsets []GroupOffset) error {
	_, err := remoteCall[bool](ctx, r, fwCommitOffsets, groupOffsets{Group: group, Claim: claim, Offsets: offsets})
	return err
}

// addCall is the request of a forwarded AddPartitions of a shard: All
// says Assigned is nil (gob sends an empty list as nil).
type addCall struct {
	Req AddPartitionsRequest
	All bool
}

func (r *remoteShard) AlterTopicConfig(ctx context.Context, id uuid.UUID, cfg TopicConfig) error {
	_, err := remoteCall[bool](ctx, r, fwAlter, alterTopicCall{TopicID: id, Config: cfg})
	return err
}

func (r *remoteShard) AddPartitions(ctx context.Context, req AddPartitionsRequest) error {
	_, err := remoteCall[bool](ctx, r, fwAdd, addCall{Req: req, All: req.Assigned == nil})
	return err
}

func (r *remoteShard) ClaimGroup(ctx context.Context, group string) (int64, error) {
	return remoteCall[int64](ctx, r, fwClaimGroup, group)
}

// groupMetadataPut is the request of a forwarded PutGroupMetadata.
type groupMetadataPut struct {
	Group             string
	Claim, Generation int64
	Value             []byte
}

func (r *remoteShard) PutGroupMetadata(ctx context.Context, group string, claim, generation int64, value []byte) error {
	_, err := remoteCall[bool](ctx, r, fwPutGroup, groupMetadataPut{Group: group, Claim: claim, Generation: generation, Value: value})
	return err
}

func (r *remoteShard) GroupMetadata(ctx context.Context, group string) (GroupMetadata, error) {
	return remoteCall[GroupMetadata](ctx, r, fwGroup, group)
}

func (r *remoteShard) FetchOffsets(ctx context.Context, group string, parts []GroupPartition) ([]GroupOffset, error) {
	out, err := remoteCall[[]GroupOffset](ctx, r, fwFetchOffsets, groupOffsets{Group: group, Parts: parts, All: parts == nil})
	if err == nil && out == nil {
		out = []GroupOffset{}
	}
	return out, err
}

func (r *remoteShard) DeleteOffsets(ctx context.Context, group string, claim int64, parts []GroupPartition) error {
	_, err := remoteCall[bool](ctx, r, fwDeleteOffsets, groupOffsets{Group: group, Claim: claim, Parts: parts, All: parts == nil})
	return err
}

func (r *remoteShard) OffsetGroups(ctx context.Context) ([]string, error) {
	return remoteCall[[]string](ctx, r, fwOffsetGroups, true)
}

// parts returns the partitions of a forwarded read or delete: nil for all.
func (g groupOffsets) parts() []GroupPartition {
	if g.All {
		return nil
	}
	if g.Parts == nil {
		return []GroupPartition{}
	}
	return g.Parts
}

func (r *remoteShard) ReceiveOwnership(ctx context.Context, req OwnershipRequest) (OwnershipResult, error) {
	return remoteCall[OwnershipResult](ctx, r, fwReceive, req)
}

func (r *remoteShard) ObjectsDeleted(ctx context.Context, keys []string) error {
	_, err := remoteCall[bool](ctx, r, fwDeleted, keys)
	return err
}

// serveFunc serves one forwarded call on the shard's local leader: it
// returns once the call is queued there, and answer waits for it.
type serveFunc func(ctx context.Context, s *Coordinator, c *leader, body []byte) (answer func() any)

// served adapts a method of one request to a serveFunc.
func served[Req, Resp any](f func(ctx context.Context, s *Coordinator, c *leader, req Req) (Resp, error)) serveFunc {
	return func(ctx context.Context, s *Coordinator, c *leader, body []byte) func() any {
		var req Req
		if err := decodeGob(body, &req); err != nil {
			return func() any { return answer[Resp]{Err: toWire(err)} }
		}
		return func() any {
			v, err := f(ctx, s, c, req)
			return answer[Resp]{Err: toWire(err), Val: v}
		}
	}
}

var serveFuncs = map[string]serveFunc{
	fwCommit: func(ctx context.Context, s *Coordinator, c *leader, body []byte) func() any {
		var req CommitFileRequest
		if err := decodeGob(body, &req); err != nil {
			return func() any { return answer[commitAnswer]{Err: toWire(err)} }
		}
		wait, err := c.CommitFileAsync(ctx, req) // queued in arrival order
		return func() any {
			var rs []wal.Result
			if err == nil {
				rs, err = wait()
			}
			return answer[commitAnswer]{Err: toWire(err), Val: commitAnswer{Results: resultsToWire(rs), Applied: c.applied.Load()}}
		}
	},
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
	fwTxn: served(func(ctx context.Context, _ *Coordinator, c *leader, req TxnRequest) (Transaction, error) {
		return c.Txn(ctx, req)
	}),
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
	fwTransactions: served(func(ctx context.Context, _ *Coordinator, c *leader, req txnListCall) ([]Transaction, error) {
		return c.Transactions(ctx, req.IDs)
	}),
	fwAborted: served(func(ctx context.Context, _ *Coordinator, c *leader, req abortedCall) ([]AbortedTxn, error) {
		return c.AbortedTxns(ctx, req.TP, req.From, req.To)
	}),
}

// Serve serves a call another broker's Forwarder brought for shard: it
// returns once the call is queued behind those served before it (a
// transport serves the calls of one connection in the order they came,
// and may then wait for their answers concurrently), and answer returns
// the bytes to send back, which hold an error if shard is not led here.
func (s *Coordinator) Serve(ctx context.Context, shard int, method string, body []byte) (answer func() []byte) {
	fail := func(err error) func() []byte {
		b := encodeGob(answerHead{Err: toWire(err)})
		return func() []byte { return b }
	}
	f, ok := serveFuncs[method]
	if !ok {
		return fail(kafkaerr.New(kafkaerr.InvalidRequest, "no forwarded method %q", method))
	}
	c, err := s.localShard(shard)
	if err != nil {
		return fail(err)
	}
	if err := c.Err(); err != nil {
		return fail(err)
	}
	a := f(ctx, s, c, body)
	return func() []byte { return encodeGob(a()) }
}

// answerHead is the head of every answer: an answer with only an error
// decodes as an answer of any type, and any answer as a head.
type answerHead struct{ Err *wireErr }

// localShard returns shard i's leader if it is led here.
func (s *Coordinator) localShard(i int) (*leader, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.mu.closed:
		return nil, ErrClosed
	case i < 0 || i >= len(s.mu.coords):
		return nil, kafkaerr.New(kafkaerr.InvalidRequest, "no shard %d of %d", i, len(s.mu.coords))
	case s.mu.coords[i] == nil:
		return nil, fmt.Errorf("shard %d: %w", i, errNotServed)
	}
	return s.mu.coords[i], nil
}

// Lead makes this broker shard i's leader over log (its election won):
// the shard's coordinator opens, catching up from its database, snapshot
// and log, and serves from then on. It needs Options.Forwarder.
func (s *Coordinator) Lead(ctx context.Context, i int, log metalog.Log) error {
	if s.remotes == nil {
		return fmt.Errorf("%w: Lead needs a Forwarder (use ReopenShard)", ErrInvalidOptions)
	}
	if i < 0 || i >= len(s.remotes) {
		return fmt.Errorf("coordinator: no shard %d of %d", i, len(s.remotes))
	}
	s.mu.RLock()
	closed, led := s.mu.closed, s.mu.coords[i] != nil
	s.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case led:
		return fmt.Errorf("coordinator: shard %d is led here already", i)
	}
	c, err := openLeader(ctx, log, s.shardOptions(i))
	if err != nil {
		return fmt.Errorf("coordinator: leading shard %d: %w", i, err)
	}
	s.mu.Lock()
	if s.mu.closed || s.mu.coords[i] != nil {
		s.mu.Unlock()
		return errors.Join(c.Close(), fmt.Errorf("coordinator: shard %d: closed, or led here already", i))
	}
	s.mu.coords[i] = c
	s.mu.Unlock()
	s.logger.Info("coordinator: leading a shard", zap.Int("shard", i))
	s.refreshCatalog(ctx)
	return nil
}

// Unlead stops leading shard i (its leadership was lost, or is given up):
// its coordinator closes (requests in flight fail with ErrClosed, which
// other brokers' forwarders send again to the next leader), and calls for
// it go to whoever leads it next. The caller closes the log. It is a no-op
// for a shard not led here.
func (s *Coordinator) Unlead(i int) error {
	s.mu.Lock()
	if i < 0 || i >= len(s.mu.coords) {
		s.mu.Unlock()
		return fmt.Errorf("coordinator: no shard %d of %d", i, len(s.mu.coords))
	}
	c := s.mu.coords[i]
	s.mu.coords[i] = nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	s.logger.Info("coordinator: no longer leading a shard", zap.Int("shard", i))
	return c.Close()
}

// Leads reports whether shard i is led here.
func (s *Coordinator) Leads(i int) bool {
	_, err := s.localShard(i)
	return err == nil
}

// RefreshTopics reads the topics from every shard's leader now (in a
// cluster: those other brokers created or deleted since the last read),
// as Topics does when its catalog is older than catalogFresh.
func (s *Coordinator) RefreshTopics(ctx context.Context) {
	if s.remotes != nil {
		s.refreshCatalog(ctx)
	}
}

// refreshCatalog reads the topics of every shard again and rebuilds the
// partition map from them; a shard that does not answer keeps what was
// known of it. Calls within a few milliseconds of a refresh share it.
func (s *Coordinator) refreshCatalog(ctx context.Context) {
	start := s.clock.Now()
	s.catalogMu.Lock()
	defer s.catalogMu.Unlock()
	s.mu.RLock()
	fresh := s.mu.catalogAt.After(start)
	n := len(s.mu.coords)
	s.mu.RUnlock()
	if fresh {
		return // a refresh that began after this call did was done meanwhile
	}
	began := s.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lists := make([][]TopicInfo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := s.shard(i)
			if err == nil {
				lists[i], err = c.Topics(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	old := struct {
		parts  map[wal.TopicPartition]int
		topics map[uuid.UUID]*shardTopic
	}{s.mu.parts, s.mu.topics}
	s.mu.parts = map[wal.TopicPartition]int{}
	s.mu.topics = map[uuid.UUID]*shardTopic{}
	s.mu.names = map[string]uuid.UUID{}
	s.mu.counts = make([]int, n)
	for i := range n {
		if errs[i] == nil {
			for _, t := range lists[i] {
				s.addLocked(i, t)
			}
			continue
		}
		// Keep what was known of shard i.
		for id, st := range old.topics {
			if !slices.Contains(st.shards, i) {
				continue
			}
			info := st.info
			for tp, sh := range old.parts {
				if sh == i && tp.TopicID == id {
					info.Assigned = append(info.Assigned, tp.Partition)
				}
			}
			if info.Assigned == nil {
				info.Assigned = []int32{}
			}
			s.addLocked(i, info)
		}
	}
	s.mu.catalogAt = began // what it read is at least as new as this
}
