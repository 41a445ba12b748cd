package state

import (
	"slices"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/scram"
	"github.com/diskless-go/diskless/wal/walmeta"
	"github.com/google/uuid"
)

// TopicState is a topic as the coordinator knows it.
type TopicState struct {
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
	Extents []PIDExtent
}

// Serves reports whether the shard serves partition i of t.
func (t *TopicState) Serves(i int32) bool {
	if i < 0 || i >= t.Partitions {
		return false
	}
	if t.Assigned == nil {
		return true
	}
	_, ok := slices.BinarySearch(t.Assigned, i)
	return ok
}

// PartState is the state of one partition that checks read.
type PartState struct {
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
	Open []OpenTxn
	// CleanedTo is the offset after the last range compacted: where the
	// cleaner's dirty part starts (Kafka's cleaner offset checkpoint).
	CleanedTo int64
	// Compactions counts the ranges replaced (compact.go) since the
	// process began: a compaction is refused while one of the partition's
	// is on its way to the log. Not kept.
	Compactions int64
	// Held counts the pending commits (pending.go) that hold offsets
	// here, and HeldFrom is the visible high watermark while it is not 0:
	// no offset from it on is read. Derived from the pending queue.
	Held     int32
	HeldFrom int64
}

// ProducerKey names an idempotent producer's state in one partition.
type ProducerKey struct{ PID, ProducerID int64 }

// ProducerState is Kafka's ProducerStateEntry: the epoch and the last
// batches (at most numBatchesToRetain, oldest first).
type ProducerState struct {
	Epoch   int16
	Batches []BatchMeta
}

// BatchMeta is one retained batch of a producer (Kafka's BatchMetadata).
type BatchMeta struct {
	FirstSeq, LastSeq int32
	LastOffset        int64
	Count             int32
	Timestamp         int64
}

// RecentCommit is an object committed lately: when, and its rows.
type RecentCommit struct {
	Time int64
	Rows []CommitRow
	// results are the answers the commit got, when it was decided by
	// this leader (not replayed from the log): a retry of the same
	// request gets them as they were, duplicates and refusals included,
	// whatever the producer state says since.
	results []walmeta.Result
	// Void says the commit was pending and is void (pending.go): a retry
	// is refused.
	Void bool
}

// recentCommitWindow is how long, by the log's times, a committed object's
// rows are kept for retried commits: longer than any commit deadline in
// use (a retry after its deadline is refused anyway).
const recentCommitWindow = int64(30 * 60 * 1000)

// recentCommitOf returns the object's recent commit, or nil.
func (v *View) recentCommitOf(key string) *RecentCommit {
	for ; v != nil; v = v.Parent {
		if r, ok := v.Recent[key]; ok {
			return r
		}
	}
	return nil
}

// addRecent records a commit, and in the committed view forgets those
// older than the window.
func (v *View) addRecent(key string, t int64, rows []CommitRow) {
	if key == "" {
		return
	}
	v.Recent[key] = &RecentCommit{Time: t, Rows: rows}
	if v.Parent != nil {
		return
	}
	v.recentOrder = append(v.recentOrder, key)
	n := 0
	for n < len(v.recentOrder) {
		r := v.Recent[v.recentOrder[n]]
		if r != nil && r.Time >= t-recentCommitWindow {
			break
		}
		delete(v.Recent, v.recentOrder[n])
		n++
	}
	if n > 0 {
		v.recentOrder = slices.Delete(v.recentOrder, 0, n)
	}
}

// numBatchesToRetain is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN.
const numBatchesToRetain = 5

// View is the state of the coordinator's pure core (core.go): the topics,
// partitions, producer states and counters that decisions read. Byte
// counts and batch rows are not in it: the store keeps them, and the
// decisions that need them (retention) get them as facts. The committed view (no parent) mirrors the SQLite
// tables of the same names and is changed only when durable records are
// applied. A speculative view has the committed view as parent and holds
// copies of what the records sent to the log but not yet durable changed:
// KIP-1164's speculative, selective application. Batches are not in views:
// no check reads them.
type View struct {
	Parent    *View
	Topics    map[uuid.UUID]*TopicState // nil value: deleted (in a child)
	Names     map[string]*TopicState    // nil value: deleted (in a child)
	Parts     map[int64]*PartState      // nil value: deleted (in a child)
	Producers map[ProducerKey]*ProducerState
	// pendingKeys are the keys of objects committed (or received, see
	// ownershipRecord) by records not yet applied, and pendingReceived
	// those received (speculative views only).
	PendingKeys     map[string]struct{}
	PendingReceived map[string]struct{}
	// recent are the objects committed in the last recentCommitWindow (by
	// the records' times), with their rows, so that a commit retried
	// after its answer was lost (at a new leader, say) is answered as
	// the first time (exactly once per object); recentOrder is the
	// committed view's keys oldest first, for pruning.
	Recent      map[string]*RecentCommit
	recentOrder []string
	// claims are the consumer groups' claim epochs (ClaimGroup), as the
	// table group_claims.
	Claims map[string]int64
	// txns are the transactional IDs' states (txn.go), as the table txns.
	Txns map[string]*Transaction
	// creds are the SCRAM credentials (scram.go), as the table
	// scram_credentials, and acls the ACL bindings (acls.go), as the
	// table acls: shard 0's. In a child, a nil credential or a false
	// binding is deleted.
	Creds map[ScramKey]*scram.Credential
	ACLs  map[acl.Binding]bool
	// securityVersion counts the security records (SCRAM and ACL)
	// applied, on every replica alike: Coordinator.Security's Version.
	SecurityVersion int64
	// quotas are the client quotas' values (quotas.go), as the table
	// client_quotas: shard 0's. In a child, 0 is a value removed (a
	// value is always positive). QuotaVersion counts the quota records
	// applied, on every replica alike: Coordinator.ClientQuotas's
	// Version.
	Quotas       map[QuotaKey]float64
	QuotaVersion int64
	// Queue is the pending queue (pending.go), oldest first: the committed
	// view's, or in a child its own once queueOwn (set when it changes
	// it). Its elements are not changed once queued.
	Queue    []PendingCommit
	queueOwn bool

	Epoch          int32
	NextPID        int64
	NextObjectID   int64
	NextProducerID int64
}

func (v *View) Topic(id uuid.UUID) *TopicState {
	for ; v != nil; v = v.Parent {
		if t, ok := v.Topics[id]; ok {
			return t
		}
	}
	return nil
}

func (v *View) topicNamed(name string) *TopicState {
	for ; v != nil; v = v.Parent {
		if t, ok := v.Names[name]; ok {
			return t
		}
	}
	return nil
}

// claim returns a group's claim epoch, 0 if it was never claimed.
func (v *View) claim(group string) int64 {
	for ; v != nil; v = v.Parent {
		if e, ok := v.Claims[group]; ok {
			return e
		}
	}
	return 0
}

func (v *View) Part(pid int64) *PartState {
	for ; v != nil; v = v.Parent {
		if p, ok := v.Parts[pid]; ok {
			return p
		}
	}
	return nil
}

// Partition returns the partition tp names, or nil if its topic or the
// partition does not exist.
func (v *View) Partition(tp walmeta.TopicPartition) *PartState {
	t := v.Topic(tp.TopicID)
	if t == nil || tp.Partition < 0 || tp.Partition >= t.Partitions {
		return nil
	}
	return v.Part(t.PID(tp.Partition))
}

// mutPart returns the partition for changing: in a child, a copy it owns.
func (v *View) mutPart(pid int64) *PartState {
	if p, ok := v.Parts[pid]; ok || v.Parent == nil {
		return p
	}
	p := v.Parent.Part(pid)
	if p == nil {
		return nil
	}
	c := *p
	v.Parts[pid] = &c
	return &c
}

func (v *View) Producer(k ProducerKey) *ProducerState {
	for ; v != nil; v = v.Parent {
		if p, ok := v.Producers[k]; ok {
			return p
		}
	}
	return nil
}

// mutProducer returns the producer state for changing, creating it.
func (v *View) mutProducer(k ProducerKey) *ProducerState {
	if p, ok := v.Producers[k]; ok {
		return p
	}
	c := &ProducerState{Epoch: -1}
	if v.Parent != nil {
		if p := v.Parent.Producer(k); p != nil {
			c = &ProducerState{Epoch: p.Epoch, Batches: slices.Clone(p.Batches)}
		}
	}
	v.Producers[k] = c
	return c
}

// ApplyProducerBatches adds accepted batches to their producers' states.
func (v *View) ApplyProducerBatches(pbs []ProducerBatch) {
	for _, pb := range pbs {
		s := v.mutProducer(ProducerKey{pb.PID, pb.ProducerID})
		if s.Epoch != pb.Epoch {
			s.Epoch, s.Batches = pb.Epoch, s.Batches[:0]
		}
		if len(s.Batches) == numBatchesToRetain {
			s.Batches = append(s.Batches[:0], s.Batches[1:]...)
		}
		s.Batches = append(s.Batches, BatchMeta{FirstSeq: pb.FirstSeq, LastSeq: pb.LastSeq, LastOffset: pb.LastOffset, Count: pb.Count, Timestamp: pb.Timestamp})
	}
}

// applyCommit is Apply of a commit, without boxing it in a Record: the
// check applies each batch it accepts this way (CommitOp.Check).
func (v *View) applyCommit(r *CommitFileRecord) {
	var undo []ProducerUndo
	if r.Pending {
		seen := map[ProducerKey]bool{}
		for _, pb := range r.Producers {
			undo = v.producerBefore(undo, seen, pb)
		}
	}
	for _, w := range r.Rows {
		if p := v.mutPart(w.PID); p != nil {
			p.HW = max(p.HW, w.LastOffset+1)
		}
	}
	v.ApplyProducerBatches(r.Producers)
	v.applyTxnFirst(*r)
	v.NextObjectID = max(v.NextObjectID, r.ObjectID+1)
	v.addRecent(r.Key, r.CommitTime, r.Rows)
	if v.Parent != nil && r.Key != "" {
		v.PendingKeys[r.Key] = struct{}{}
	}
	if r.Pending {
		v.queuePending(*r, undo)
	}
}

// Apply applies a record's changes to the view's state.
func (v *View) Apply(r Record) {
	switch r := r.(type) {
	case EpochRecord:
		v.Epoch = r.Epoch
	case CreateTopicRecord:
		t := &TopicState{ID: r.TopicID, Name: r.Name, Partitions: r.Partitions, FirstPID: r.FirstPID, Config: r.Config, Assigned: r.Assigned}
		t.Config.Partitions = r.Partitions
		v.Topics[t.ID] = t
		v.Names[t.Name] = t
		for i := int32(0); i < r.Partitions; i++ {
			if !t.Serves(i) {
				continue
			}
			pid := r.FirstPID + int64(i)
			v.Parts[pid] = &PartState{PID: pid, TopicID: t.ID, Partition: i, RemoteEnd: -1}
		}
		v.NextPID = max(v.NextPID, r.FirstPID+int64(r.Partitions))
	case DeleteTopicRecord:
		t := v.Topic(r.TopicID)
		if t == nil {
			return
		}
		v.setTopic(t.ID, t.Name, nil)
		for i := int32(0); i < t.Partitions; i++ {
			v.setPart(t.PID(i), nil)
		}
		if v.Parent == nil {
			// No partition will have those PIDs again; a speculative view
			// need not bother.
			for k := range v.Producers {
				if t.HasPID(k.PID) {
					delete(v.Producers, k)
				}
			}
		}
	case AddPartitionsRecord:
		v.applyAdd(r)
	case AlterTopicRecord:
		v.applyAlter(r)
	case ScramUpsertRecord, ScramDeleteRecord:
		v.applyScram(r)
	case ACLCreateRecord, ACLDeleteRecord:
		v.applyACL(r)
	case QuotaSetRecord, QuotaRemoveRecord:
		v.applyQuota(r)
	case CommitFileRecord:
		v.applyCommit(&r)
	case ConfirmRecord:
		v.applyConfirm(r.Through)
	case VoidRecord:
		v.applyVoid(r.From)
	case TrimRecord:
		if p := v.mutPart(r.PID); p != nil {
			p.LogStart = max(p.LogStart, r.LogStart)
			p.DisklessStart = max(p.DisklessStart, r.LogStart)
			if p.RemoteEnd < r.LogStart {
				p.RemoteEnd = -1 // every live remote segment is dropped
			}
		}
	case InitProducerIDRecord:
		v.NextProducerID = max(v.NextProducerID, r.ProducerID+1)
	case RemoteSegmentRecord:
		if p := v.mutPart(r.PID); p != nil {
			p.DisklessStart = max(p.DisklessStart, r.EndOffset+1)
			p.RemoteEnd = r.EndOffset
		}
		v.NextObjectID = max(v.NextObjectID, r.ObjectID+1)
		if v.Parent != nil {
			v.PendingKeys[r.Key] = struct{}{}
		}
	case ObjectsDeletedRecord:
	case TxnStateRecord, TxnBeginRecord, TxnMarkerRecord:
		v.applyTxn(r)
	case CompactRecord:
		v.applyCompact(r)
	case GroupClaimRecord:
		v.Claims[r.Group] = max(v.claim(r.Group), r.Epoch)
	case OwnershipRecord:
		v.NextObjectID = max(v.NextObjectID, r.ObjectID+1)
		if v.Parent != nil {
			v.PendingKeys[r.Key] = struct{}{}
			v.PendingReceived[r.Key] = struct{}{}
		}
	}
}

// pending reports whether a record not yet applied commits (or receives)
// the object key, and whether one receives it.
func (v *View) pending(key string) (known, received bool) {
	for ; v != nil && v.Parent != nil; v = v.Parent {
		if _, ok := v.PendingReceived[key]; ok {
			return true, true
		}
		if _, ok := v.PendingKeys[key]; ok {
			known = true
		}
	}
	return known, false
}

func (v *View) setTopic(id uuid.UUID, name string, t *TopicState) {
	if v.Parent == nil && t == nil {
		delete(v.Topics, id)
		delete(v.Names, name)
		return
	}
	v.Topics[id] = t
	v.Names[name] = t
}

func (v *View) setPart(pid int64, p *PartState) {
	if v.Parent == nil && p == nil {
		delete(v.Parts, pid)
		return
	}
	v.Parts[pid] = p
}

// NewView returns an empty view over parent: a speculative view reads
// through to its parent what it has not changed, and starts from its
// counters. A nil parent makes a root (committed) view.
func NewView(parent *View) *View {
	v := &View{
		Parent:      parent,
		Topics:      make(map[uuid.UUID]*TopicState),
		Names:       make(map[string]*TopicState),
		Parts:       make(map[int64]*PartState),
		Producers:   make(map[ProducerKey]*ProducerState),
		PendingKeys: make(map[string]struct{}),
		Recent:      make(map[string]*RecentCommit),
		Claims:      make(map[string]int64),
		Txns:        make(map[string]*Transaction),
		Creds:       make(map[ScramKey]*scram.Credential),
		ACLs:        make(map[acl.Binding]bool),
		Quotas:      make(map[QuotaKey]float64),
	}
	if parent != nil {
		v.PendingReceived = make(map[string]struct{})
		v.Epoch, v.NextPID, v.NextObjectID, v.NextProducerID = parent.Epoch, parent.NextPID, parent.NextObjectID, parent.NextProducerID
		v.SecurityVersion, v.QuotaVersion = parent.SecurityVersion, parent.QuotaVersion
	}
	return v
}
