package coordinator

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog"
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
	CommitFileAsync(ctx context.Context, req CommitFileRequest, pending bool) (func() ([]wal.Result, error), error)
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
	AbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64, fetch bool) ([]AbortedTxn, error)
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
	// The client quota calls (quotas.go), served by the leader of shard 0.
	fwAdminQuotas  = "admin-client-quotas"
	fwClientQuotas = "client-quotas"
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
	errKindVersion // the method or version not spoken there: choose again and resend
)

// retry says whether the call goes again, to the leader then: the broker
// asked does not lead the shard, or does not speak the version sent.
func (w *wireErr) retry() bool { return w.Kind == errKindNotServed || w.Kind == errKindVersion }

func toWire(err error) *wireErr {
	if err == nil {
		return nil
	}
	w := &wireErr{Code: kafkaerr.CodeOf(err), Msg: err.Error()}
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrShardDown), errors.Is(err, errNotServed), errors.Is(err, ErrNotLeader):
		w.Kind = errKindNotServed
	case errors.Is(err, errNoVersion):
		w.Kind = errKindVersion
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
	case w.Kind == errKindVersion:
		return &kafkaerr.Error{Code: kafkaerr.UnsupportedVersion, Message: w.Msg, Err: errNoVersion}
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

// Lead makes this broker shard i's leader over log (its election won):
// the shard's coordinator opens, catching up from its database, snapshot
// and log, and serves from then on. It needs Options.Forwarder.
func (h Shards) Lead(ctx context.Context, i int, log metalog.Log) error {
	c := h.c
	if c.remotes == nil {
		return fmt.Errorf("%w: Lead needs a Forwarder (use ReopenShard)", ErrInvalidOptions)
	}
	if i < 0 || i >= len(c.remotes) {
		return fmt.Errorf("coordinator: no shard %d of %d", i, len(c.remotes))
	}
	c.mu.RLock()
	closed, led := c.mu.closed, c.mu.coords[i] != nil
	c.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case led:
		return fmt.Errorf("coordinator: shard %d is led here already", i)
	}
	sh, err := openLeader(ctx, log, c.shardOptions(i))
	if err != nil {
		return fmt.Errorf("coordinator: leading shard %d: %w", i, err)
	}
	c.mu.Lock()
	if c.mu.closed || c.mu.coords[i] != nil {
		c.mu.Unlock()
		return errors.Join(sh.Close(), fmt.Errorf("coordinator: shard %d: closed, or led here already", i))
	}
	c.mu.coords[i] = sh
	c.mu.Unlock()
	c.logger.Info("coordinator: leading a shard", zap.Int("shard", i))
	c.refreshCatalog(ctx)
	return nil
}

// Unlead stops leading shard i (its leadership was lost, or is given up):
// its coordinator closes (requests in flight fail with ErrClosed, which
// other brokers' forwarders send again to the next leader), and calls for
// it go to whoever leads it next. The caller closes the log. It is a no-op
// for a shard not led here.
func (h Shards) Unlead(i int) error {
	c := h.c
	c.mu.Lock()
	if i < 0 || i >= len(c.mu.coords) {
		c.mu.Unlock()
		return fmt.Errorf("coordinator: no shard %d of %d", i, len(c.mu.coords))
	}
	sh := c.mu.coords[i]
	c.mu.coords[i] = nil
	c.mu.Unlock()
	if sh == nil {
		return nil
	}
	c.logger.Info("coordinator: no longer leading a shard", zap.Int("shard", i))
	return sh.Close()
}

// Leads reports whether shard i is led here.
func (h Shards) Leads(i int) bool {
	c := h.c
	_, err := c.localShard(i)
	return err == nil
}

// RefreshTopics reads the topics from every shard's leader now (in a
// cluster: those other brokers created or deleted since the last read),
// as Topics does when its catalog is older than catalogFresh.
func (h Shards) RefreshTopics(ctx context.Context) {
	c := h.c
	if c.remotes != nil {
		c.refreshCatalog(ctx)
	}
}

// refreshCatalog reads the topics of every shard again and rebuilds the
// partition map from them; a shard that does not answer keeps what was
// known of it. Calls within a few milliseconds of a refresh share it.
func (c *Coordinator) refreshCatalog(ctx context.Context) {
	start := c.clock.Now()
	c.catalogSem <- struct{}{}
	defer func() { <-c.catalogSem }()
	c.mu.RLock()
	fresh := c.mu.catalogAt.After(start)
	n := len(c.mu.coords)
	c.mu.RUnlock()
	if fresh {
		return // a refresh that began after this call did was done meanwhile
	}
	began := c.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lists, errs := fanOut(n, nil, func(i int) ([]TopicInfo, error) {
		sh, err := c.shard(i)
		if err != nil {
			return nil, err
		}
		return sh.Topics(ctx)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	old := struct {
		parts  map[wal.TopicPartition]int
		topics map[uuid.UUID]*shardTopic
	}{c.mu.parts, c.mu.topics}
	c.mu.parts = map[wal.TopicPartition]int{}
	c.mu.topics = map[uuid.UUID]*shardTopic{}
	c.mu.names = map[string]uuid.UUID{}
	c.mu.counts = make([]int, n)
	for i := range n {
		if errs[i] == nil {
			for _, t := range lists[i] {
				c.addLocked(i, t)
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
			c.addLocked(i, info)
		}
	}
	c.mu.catalogAt = began // what it read is at least as new as this
	c.mu.catalogWhole = !slices.ContainsFunc(errs, func(err error) bool { return err != nil })
	if c.mu.catalogWhole {
		c.notePartialLocked(began)
	}
}

// catalogWhole reports whether the catalog holds every shard's topics:
// one process's always does; in a cluster, when every shard answered the
// last refresh.
func (c *Coordinator) catalogWhole() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.remotes == nil || c.mu.catalogWhole
}
