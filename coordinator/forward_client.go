package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/internal/backoff"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

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
//
// Each attempt sends the call in the highest version of method both this
// broker and the shard's leader then speak (see peer_versions.go), as
// encode gives its body in that version; the answer is a gob stream or of
// its version's own encoding (peer_topics.go), and its head is read here.
func (r *remoteShard) forward(ctx context.Context, method string, encode func(version int) []byte) (wait func() ([]byte, *wireErr, error)) {
	// Each attempt has a deadline of its own: a leader that froze (or was
	// cut off) holds its connection open without answering, and the call
	// must go on to the next leader once there is one.
	attempt := func() (func() ([]byte, error), context.CancelFunc) {
		v, err := r.peerVersion(method)
		if err != nil {
			return func() ([]byte, error) { return nil, &noVersion{err} }, func() {}
		}
		actx, cancel := context.WithTimeout(ctx, r.s.opts.ForwardAttemptTimeout)
		return r.s.opts.Forwarder.Forward(actx, r.shard, wireMethod(method, v), encode(v)), cancel
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
			if nv, ok := err.(*noVersion); ok {
				return nil, nil, nv.err
			}
			if err == nil {
				_, _, herr, derr := decodeHead(out)
				if derr != nil {
					return nil, nil, derr
				}
				if herr != nil && !herr.retry() && lost {
					// A refusal now does not undo what the lost attempt
					// may have done (a commit made before the group was
					// claimed again, say).
					return nil, nil, &outcomeUnknown{herr.err()}
				}
				if herr == nil || !herr.retry() {
					return out, herr, nil
				}
				err = herr.err()
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

// noVersion is an attempt not made: the leader speaks no version of the
// method.
type noVersion struct{ err error }

func (e *noVersion) Error() string { return e.err.Error() }

// remoteCall forwards req, in version 1 of method (its gob encoding), and
// decodes the answer's value.
func remoteCall[Resp any](ctx context.Context, r *remoteShard, method string, req any) (Resp, error) {
	return remoteWait[Resp](r.forward(ctx, method, gobBody(req)))()
}

// gobBody is a call's body as req's gob encoding, encoded once, for the
// first attempt that sends it.
func gobBody(req any) func(int) []byte {
	return onceBody(func() []byte { return encodeGob(req) })
}

// onceBody is the body encode gives, encoded once, for the first attempt
// that sends it.
func onceBody(encode func() []byte) func(int) []byte {
	var b []byte
	return func(int) []byte {
		if b == nil {
			b = encode()
		}
		return b
	}
}

// versioned is a call's body in version 1 (v1) or, to a leader that
// speaks version 2 or later, v2.
func versioned(v1, v2 func(int) []byte) func(int) []byte {
	return func(v int) []byte {
		if v >= 2 {
			return v2(v)
		}
		return v1(v)
	}
}

// remoteWait decodes the gob answer's value once forward's wait has it.
func remoteWait[Resp any](wait func() ([]byte, *wireErr, error)) func() (Resp, error) {
	return remoteWaitOwn[Resp](wait, nil)
}

// remoteWaitOwn is remoteWait for a call one of whose versions answers in
// an encoding of its own (peer_topics.go), which readOwn reads.
func remoteWaitOwn[Resp any](wait func() ([]byte, *wireErr, error), readOwn func([]byte) (Resp, error)) func() (Resp, error) {
	return func() (Resp, error) {
		var a answer[Resp]
		out, werr, err := wait()
		if err != nil {
			return a.Val, err
		}
		if werr != nil {
			return a.Val, werr.err()
		}
		// forward read the head: an answer of its own encoding that is
		// not an error is a value.
		if readOwn != nil && len(out) > 0 && out[0] == ownValue {
			return readOwn(out[1:])
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

func (r *remoteShard) CommitFileAsync(ctx context.Context, req CommitFileRequest, pending bool) (func() ([]wal.Result, error), error) {
	if pending {
		return nil, fmt.Errorf("%w: a pending commit is not forwarded to another broker (the parallel commit is for shards this broker leads)", ErrInvalidOptions)
	}
	// Versions 2 and 3 send the same request; 3 answers in its own
	// encoding (peer_commit.go).
	wait := remoteWaitOwn(r.forward(ctx, fwCommit, versioned(gobBody(req), onceBody(func() []byte { return appendCommitV2(nil, &req) }))), readCommitAnswerV3)
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

// Topics asks in version 2 (peer_topics.go) when the leader speaks it, in
// version 1 else.
func (r *remoteShard) Topics(ctx context.Context) ([]TopicInfo, error) {
	v2 := func(int) []byte { return []byte{} } // an empty request
	return remoteWaitOwn(r.forward(ctx, fwTopics, versioned(gobBody(true), v2)), readTopicsV2)()
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
