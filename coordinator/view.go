package coordinator

import (
	"slices"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/scram"
	"github.com/diskless-go/diskless/wal"
)

// topicState is a topic as the coordinator knows it.
type topicState struct {
	ID         uuid.UUID
	Name       string
	Partitions int32
	FirstPID   int64 // partition i has PID FirstPID+i
	Config     TopicConfig
	// Assigned are the partitions this shard serves, nil for all: only
	// those have a partState (and a PID in use).
	Assigned []int32
	// Extents are the PID ranges of partitions added since creation
	// (addpartitions.go), by partition: see pid.
	Extents []pidExtent
}

// serves reports whether the shard serves partition i of t.
func (t *topicState) serves(i int32) bool {
	if i < 0 || i >= t.Partitions {
		return false
	}
	if t.Assigned == nil {
		return true
	}
	_, ok := slices.BinarySearch(t.Assigned, i)
	return ok
}

// partState is the state of one partition that checks read.
type partState struct {
	PID       int64
	TopicID   uuid.UUID
	Partition int32
	LogStart  int64
	HW        int64 // high watermark: the next offset to assign
	// DisklessStart is the first offset still held as batches: below it,
	// from LogStart, the data is in remote segments. LogStart <=
	// DisklessStart <= HW.
	DisklessStart int64
	// RemoteEnd is the EndOffset of the last live remote segment, -1 if
	// none (then every live one is below it: segments are registered in
	// offset order and dropped from the first).
	RemoteEnd int64
	// Open are the producers' transactions open in the partition (see
	// txn.go); shared between views: clone before changing.
	Open []openTxn
	// CleanedTo is the offset after the last range compacted: where the
	// cleaner's dirty part starts (Kafka's cleaner offset checkpoint).
	CleanedTo int64
	// Compactions counts the ranges replaced (compact.go) since the
	// process began: a compaction is refused while one of the partition's
	// is on its way to the log. Not kept.
	Compactions int64
}

// producerKey names an idempotent producer's state in one partition.
type producerKey struct{ PID, ProducerID int64 }

// producerState is Kafka's ProducerStateEntry: the epoch and the last
// batches (at most numBatchesToRetain, oldest first).
type producerState struct {
	Epoch   int16
	Batches []batchMeta
}

// batchMeta is one retained batch of a producer (Kafka's BatchMetadata).
type batchMeta struct {
	FirstSeq, LastSeq int32
	LastOffset        int64
	Count             int32
	Timestamp         int64
}

// recentCommit is an object committed lately: when, and its rows.
type recentCommit struct {
	time int64
	rows []commitRow
	// results are the answers the commit got, when it was decided by
	// this leader (not replayed from the log): a retry of the same
	// request gets them as they were, duplicates and refusals included,
	// whatever the producer state says since.
	results []wal.Result
}

// recentCommitWindow is how long, by the log's times, a committed object's
// rows are kept for retried commits: longer than any commit deadline in
// use (a retry after its deadline is refused anyway).
const recentCommitWindow = int64(30 * 60 * 1000)

// recentCommitOf returns the object's recent commit, or nil.
func (v *view) recentCommitOf(key string) *recentCommit {
	for ; v != nil; v = v.parent {
		if r, ok := v.recent[key]; ok {
			return r
		}
	}
	return nil
}

// addRecent records a commit, and in the committed view forgets those
// older than the window.
func (v *view) addRecent(key string, t int64, rows []commitRow) {
	if key == "" {
		return
	}
	v.recent[key] = &recentCommit{time: t, rows: rows}
	if v.parent != nil {
		return
	}
	v.recentOrder = append(v.recentOrder, key)
	n := 0
	for n < len(v.recentOrder) {
		r := v.recent[v.recentOrder[n]]
		if r != nil && r.time >= t-recentCommitWindow {
			break
		}
		delete(v.recent, v.recentOrder[n])
		n++
	}
	if n > 0 {
		v.recentOrder = slices.Delete(v.recentOrder, 0, n)
	}
}

// numBatchesToRetain is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN.
const numBatchesToRetain = 5

// view is the state of the coordinator's pure core (core.go): the topics,
// partitions, producer states and counters that decisions read. Byte
// counts and batch rows are not in it: the store keeps them, and the
// decisions that need them (retention) get them as facts. The committed view (no parent) mirrors the SQLite
// tables of the same names and is changed only when durable records are
// applied. A speculative view has the committed view as parent and holds
// copies of what the records sent to the log but not yet durable changed:
// KIP-1164's speculative, selective application. Batches are not in views:
// no check reads them.
type view struct {
	parent    *view
	topics    map[uuid.UUID]*topicState // nil value: deleted (in a child)
	names     map[string]*topicState    // nil value: deleted (in a child)
	parts     map[int64]*partState      // nil value: deleted (in a child)
	producers map[producerKey]*producerState
	// pendingKeys are the keys of objects committed (or received, see
	// ownershipRecord) by records not yet applied, and pendingReceived
	// those received (speculative views only).
	pendingKeys     map[string]struct{}
	pendingReceived map[string]struct{}
	// recent are the objects committed in the last recentCommitWindow (by
	// the records' times), with their rows, so that a commit retried
	// after its answer was lost (at a new leader, say) is answered as
	// the first time (exactly once per object); recentOrder is the
	// committed view's keys oldest first, for pruning.
	recent      map[string]*recentCommit
	recentOrder []string
	// claims are the consumer groups' claim epochs (ClaimGroup), as the
	// table group_claims.
	claims map[string]int64
	// txns are the transactional IDs' states (txn.go), as the table txns.
	txns map[string]*Transaction
	// creds are the SCRAM credentials (scram.go), as the table
	// scram_credentials, and acls the ACL bindings (acls.go), as the
	// table acls: shard 0's. In a child, a nil credential or a false
	// binding is deleted.
	creds map[scramKey]*scram.Credential
	acls  map[acl.Binding]bool
	// securityVersion counts the security records (SCRAM and ACL)
	// applied, on every replica alike: Coordinator.Security's Version.
	securityVersion int64

	epoch          int32
	nextPID        int64
	nextObjectID   int64
	nextProducerID int64
}

func newView(parent *view) *view {
	v := &view{
		parent:      parent,
		topics:      make(map[uuid.UUID]*topicState),
		names:       make(map[string]*topicState),
		parts:       make(map[int64]*partState),
		producers:   make(map[producerKey]*producerState),
		pendingKeys: make(map[string]struct{}),
		recent:      make(map[string]*recentCommit),
		claims:      make(map[string]int64),
		txns:        make(map[string]*Transaction),
		creds:       make(map[scramKey]*scram.Credential),
		acls:        make(map[acl.Binding]bool),
	}
	if parent != nil {
		v.pendingReceived = make(map[string]struct{})
		v.epoch, v.nextPID, v.nextObjectID, v.nextProducerID = parent.epoch, parent.nextPID, parent.nextObjectID, parent.nextProducerID
		v.securityVersion = parent.securityVersion
	}
	return v
}

func (v *view) topic(id uuid.UUID) *topicState {
	for ; v != nil; v = v.parent {
		if t, ok := v.topics[id]; ok {
			return t
		}
	}
	return nil
}

func (v *view) topicNamed(name string) *topicState {
	for ; v != nil; v = v.parent {
		if t, ok := v.names[name]; ok {
			return t
		}
	}
	return nil
}

// claim returns a group's claim epoch, 0 if it was never claimed.
func (v *view) claim(group string) int64 {
	for ; v != nil; v = v.parent {
		if e, ok := v.claims[group]; ok {
			return e
		}
	}
	return 0
}

func (v *view) part(pid int64) *partState {
	for ; v != nil; v = v.parent {
		if p, ok := v.parts[pid]; ok {
			return p
		}
	}
	return nil
}

// partition returns the partition tp names, or nil if its topic or the
// partition does not exist.
func (v *view) partition(tp wal.TopicPartition) *partState {
	t := v.topic(tp.TopicID)
	if t == nil || tp.Partition < 0 || tp.Partition >= t.Partitions {
		return nil
	}
	return v.part(t.pid(tp.Partition))
}

// mutPart returns the partition for changing: in a child, a copy it owns.
func (v *view) mutPart(pid int64) *partState {
	if p, ok := v.parts[pid]; ok || v.parent == nil {
		return p
	}
	p := v.parent.part(pid)
	if p == nil {
		return nil
	}
	c := *p
	v.parts[pid] = &c
	return &c
}

func (v *view) producer(k producerKey) *producerState {
	for ; v != nil; v = v.parent {
		if p, ok := v.producers[k]; ok {
			return p
		}
	}
	return nil
}

// mutProducer returns the producer state for changing, creating it.
func (v *view) mutProducer(k producerKey) *producerState {
	if p, ok := v.producers[k]; ok {
		return p
	}
	c := &producerState{Epoch: -1}
	if v.parent != nil {
		if p := v.parent.producer(k); p != nil {
			c = &producerState{Epoch: p.Epoch, Batches: slices.Clone(p.Batches)}
		}
	}
	v.producers[k] = c
	return c
}

// applyProducerBatches adds accepted batches to their producers' states.
func (v *view) applyProducerBatches(pbs []producerBatch) {
	for _, pb := range pbs {
		s := v.mutProducer(producerKey{pb.PID, pb.ProducerID})
		if s.Epoch != pb.Epoch {
			s.Epoch, s.Batches = pb.Epoch, s.Batches[:0]
		}
		if len(s.Batches) == numBatchesToRetain {
			s.Batches = append(s.Batches[:0], s.Batches[1:]...)
		}
		s.Batches = append(s.Batches, batchMeta{FirstSeq: pb.FirstSeq, LastSeq: pb.LastSeq, LastOffset: pb.LastOffset, Count: pb.Count, Timestamp: pb.Timestamp})
	}
}

// apply applies a record's changes to the view's state.
func (v *view) apply(r record) {
	switch r := r.(type) {
	case epochRecord:
		v.epoch = r.Epoch
	case createTopicRecord:
		t := &topicState{ID: r.TopicID, Name: r.Name, Partitions: r.Partitions, FirstPID: r.FirstPID, Config: r.Config, Assigned: r.Assigned}
		t.Config.Partitions = r.Partitions
		v.topics[t.ID] = t
		v.names[t.Name] = t
		for i := int32(0); i < r.Partitions; i++ {
			if !t.serves(i) {
				continue
			}
			pid := r.FirstPID + int64(i)
			v.parts[pid] = &partState{PID: pid, TopicID: t.ID, Partition: i, RemoteEnd: -1}
		}
		v.nextPID = max(v.nextPID, r.FirstPID+int64(r.Partitions))
	case deleteTopicRecord:
		t := v.topic(r.TopicID)
		if t == nil {
			return
		}
		v.setTopic(t.ID, t.Name, nil)
		for i := int32(0); i < t.Partitions; i++ {
			v.setPart(t.pid(i), nil)
		}
		if v.parent == nil {
			// No partition will have those PIDs again; a speculative view
			// need not bother.
			for k := range v.producers {
				if t.hasPID(k.PID) {
					delete(v.producers, k)
				}
			}
		}
	case addPartitionsRecord:
		v.applyAdd(r)
	case alterTopicRecord:
		v.applyAlter(r)
	case scramUpsertRecord, scramDeleteRecord:
		v.applyScram(r)
	case aclCreateRecord, aclDeleteRecord:
		v.applyACL(r)
	case commitFileRecord:
		for _, w := range r.Rows {
			if p := v.mutPart(w.PID); p != nil {
				p.HW = max(p.HW, w.LastOffset+1)
			}
		}
		v.applyProducerBatches(r.Producers)
		v.applyTxnFirst(r)
		v.nextObjectID = max(v.nextObjectID, r.ObjectID+1)
		v.addRecent(r.Key, r.CommitTime, r.Rows)
		if v.parent != nil && r.Key != "" {
			v.pendingKeys[r.Key] = struct{}{}
		}
	case trimRecord:
		if p := v.mutPart(r.PID); p != nil {
			p.LogStart = max(p.LogStart, r.LogStart)
			p.DisklessStart = max(p.DisklessStart, r.LogStart)
			if p.RemoteEnd < r.LogStart {
				p.RemoteEnd = -1 // every live remote segment is dropped
			}
		}
	case initProducerIDRecord:
		v.nextProducerID = max(v.nextProducerID, r.ProducerID+1)
	case remoteSegmentRecord:
		if p := v.mutPart(r.PID); p != nil {
			p.DisklessStart = max(p.DisklessStart, r.EndOffset+1)
			p.RemoteEnd = r.EndOffset
		}
		v.nextObjectID = max(v.nextObjectID, r.ObjectID+1)
		if v.parent != nil {
			v.pendingKeys[r.Key] = struct{}{}
		}
	case objectsDeletedRecord:
	case txnStateRecord, txnBeginRecord, txnMarkerRecord:
		v.applyTxn(r)
	case compactRecord:
		v.applyCompact(r)
	case groupClaimRecord:
		v.claims[r.Group] = max(v.claim(r.Group), r.Epoch)
	case ownershipRecord:
		v.nextObjectID = max(v.nextObjectID, r.ObjectID+1)
		if v.parent != nil {
			v.pendingKeys[r.Key] = struct{}{}
			v.pendingReceived[r.Key] = struct{}{}
		}
	}
}

// pending reports whether a record not yet applied commits (or receives)
// the object key, and whether one receives it.
func (v *view) pending(key string) (known, received bool) {
	for ; v != nil && v.parent != nil; v = v.parent {
		if _, ok := v.pendingReceived[key]; ok {
			return true, true
		}
		if _, ok := v.pendingKeys[key]; ok {
			known = true
		}
	}
	return known, false
}

func (v *view) setTopic(id uuid.UUID, name string, t *topicState) {
	if v.parent == nil && t == nil {
		delete(v.topics, id)
		delete(v.names, name)
		return
	}
	v.topics[id] = t
	v.names[name] = t
}

func (v *view) setPart(pid int64, p *partState) {
	if v.parent == nil && p == nil {
		delete(v.parts, pid)
		return
	}
	v.parts[pid] = p
}
