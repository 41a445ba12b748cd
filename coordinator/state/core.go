package state

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// Group is the requests that go into one log entry, and what deciding
// them reads: the speculative view, the time, the options that shape
// decisions (the shard, the key prefix, the commit deadline), and the
// facts. It holds no I/O handle.
type Group struct {
	// shard is the leader's shard; prefix starts object keys
	// (Options.Prefix); commitDeadline is Options.CommitDeadline.
	Shard          int
	Prefix         string
	CommitDeadline time.Duration
	Spec           *View
	Now            int64 // Unix milliseconds
	Facts          *Facts
	Records        []Record
}

// add appends a record to the group and applies it to the speculative
// view, so that the next check sees it.
func (g *Group) add(r Record) {
	g.Records = append(g.Records, r)
	g.Spec.Apply(r)
}

// Needs is what the ops of a group want the driver to read from the
// store before they are decided.
type Needs struct {
	// prefix is Options.Prefix, which object keys start with (the driver
	// sets it).
	Prefix string
	// keys are object keys whose committed rows the ops read.
	Keys []string
	// commitKeys are the keys of objects to commit: for those the store
	// knows (a retried commit), the rows their first commit made.
	CommitKeys []string
	// retention asks for retention's cut of every partition.
	Retention bool
	// ranges are the ranges compactions replace: their rows'
	// fingerprints.
	Ranges []CompactRequest
}

// Facts is what the driver read from the committed store for a group:
// the decisions take it as input, with the speculative view for what is
// not committed yet.
type Facts struct {
	// objects are the committed object rows of needs.keys that exist.
	Objects map[string]ObjectState
	// cuts are, for each partition whose topic deletes, the log start
	// offset that retention.ms and retention.bytes raise it to over the
	// committed batches and remote segments (only those that move).
	Cuts map[int64]int64
	// commits are the rows of the objects of needs.commitKeys the store
	// holds, as their commit made them (those still there).
	Commits map[string]*RecentCommit
	// prints are the fingerprints of needs.ranges' committed rows, by
	// PID, from and to (those with no run straddling from).
	Prints map[[3]int64]uint64
	// err is why the facts could not be read: the ops that need them
	// fail with it.
	Err error
}

// object returns the committed row of key, if any, and the error that
// kept the facts from being read.
func (f *Facts) object(key string) (ObjectState, bool, error) {
	if f == nil {
		return ObjectState{}, false, nil
	}
	o, ok := f.Objects[key]
	return o, ok, f.Err
}

// Effects is what applying a durable entry to the committed view leaves
// to the driver, beside writing the entry's rows.
type Effects struct {
	// skip[i] says records[i] changed nothing (a trim below the log
	// start, a record of a partition that is gone): the store writes no
	// row for it.
	Skip []bool
	// touched are the partitions whose state changed (to publish and to
	// write), in increasing order.
	Touched []int64
	// gone are the topics deleted, as they were.
	Gone []*TopicState
	// grown are the topics partitions were added to, or whose config
	// changed: published again.
	Grown []uuid.UUID
	// newObjects are the objects committed (their rows hold batches), and
	// deadObjects the IDs of the objects forgotten.
	NewObjects  []ObjectRow
	DeadObjects []int64
	// received counts the ownerships received.
	Received int
	// txnParts are the partitions whose open transactions changed (their
	// txn_open rows are written again), in increasing order.
	TxnParts []int64
	// lifecycle says objects may have died or changed hands: the
	// lifecycle worker has work.
	Lifecycle bool
	// security says SCRAM credentials or ACLs changed, and quotas that
	// client quotas did: published again.
	Security bool
	Quotas   bool
	// Queued are the pending commits queued (pending.go), in record
	// order: the store keeps them; Voided are the commits voided: the
	// store drops their rows, and writes their producers' states at once.
	Queued []PendingCommit
	Voided []PendingCommit
}

// ApplyEntry applies a durable entry's records to the committed view root
// and returns the effects. It is pure: the same view and records give the
// same view and effects.
func ApplyEntry(root *View, records []Record) Effects {
	e := Effects{Skip: make([]bool, len(records))}
	touched, txnParts := map[int64]bool{}, map[int64]bool{}
	for i, r := range records {
		switch r.(type) {
		case CreateTopicRecord, AddPartitionsRecord, AlterTopicRecord, DeleteTopicRecord,
			ScramUpsertRecord, ScramDeleteRecord, ACLCreateRecord, ACLDeleteRecord, QuotaSetRecord, QuotaRemoveRecord:
			e.Skip[i] = e.applyCatalog(root, r, i, touched)
		case CommitFileRecord, TrimRecord, RemoteSegmentRecord, OwnershipRecord, ObjectsDeletedRecord, CompactRecord:
			e.Skip[i] = e.applyData(root, r, i, touched, txnParts)
		case TxnBeginRecord, TxnMarkerRecord:
			e.Skip[i] = e.applyTxn(root, r, i, touched, txnParts)
		case ConfirmRecord, VoidRecord:
			e.applyPending(root, r, touched)
		default:
			root.Apply(r)
		}
	}
	for pid := range touched {
		e.Touched = append(e.Touched, pid)
	}
	slices.Sort(e.Touched)
	for pid := range txnParts {
		if root.Part(pid) != nil {
			e.TxnParts = append(e.TxnParts, pid)
		}
	}
	slices.Sort(e.TxnParts)
	return e
}

// applyCatalog applies a record of the catalog (topics, SCRAM credentials,
// ACLs, client quotas) to root. It reports whether the record changed nothing.
func (e *Effects) applyCatalog(root *View, r Record, i int, touched map[int64]bool) (skip bool) {
	switch r := r.(type) {
	case CreateTopicRecord:
		root.Apply(r)
		for i := range int64(r.Partitions) {
			if root.Part(r.FirstPID+i) != nil { // an assigned partition
				touched[r.FirstPID+i] = true
			}
		}
	case AddPartitionsRecord:
		if root.Topic(r.TopicID) == nil {
			return true
		}
		root.Apply(r)
		t := root.Topic(r.TopicID)
		for p := range t.Partitions {
			if pid := t.PID(p); root.Part(pid) != nil {
				touched[pid] = true
			}
		}
		e.Grown = append(e.Grown, r.TopicID)
	case AlterTopicRecord:
		if root.Topic(r.TopicID) == nil {
			return true
		}
		root.Apply(r)
		e.Grown = append(e.Grown, r.TopicID)
	case ScramUpsertRecord, ScramDeleteRecord, ACLCreateRecord, ACLDeleteRecord:
		root.Apply(r)
		e.Security = true
	case QuotaSetRecord, QuotaRemoveRecord:
		root.Apply(r)
		e.Quotas = true
	case DeleteTopicRecord:
		t := root.Topic(r.TopicID)
		if t == nil {
			return true
		}
		root.Apply(r)
		e.Gone = append(e.Gone, t)
		for i := range t.Partitions {
			delete(touched, t.PID(i))
		}
		e.Lifecycle = true
	}
	return e.Skip[i]
}

// applyData applies a record of the data (objects, batches, offsets) to
// root. It reports whether the record changed nothing.
func (e *Effects) applyData(root *View, r Record, i int, touched, txnParts map[int64]bool) (skip bool) {
	switch r := r.(type) {
	case CommitFileRecord:
		root.Apply(r)
		if r.Pending {
			q := root.PendingQueue()
			e.Queued = append(e.Queued, q[len(q)-1])
		}
		root.txnFirstSet(r, func(pid int64) { txnParts[pid] = true })
		e.NewObjects = append(e.NewObjects, ObjectRow{ID: r.ObjectID, Key: r.Key, CommittedAt: r.CommitTime})
		for _, w := range r.Rows {
			if root.Part(w.PID) != nil {
				touched[w.PID] = true
			}
		}
		if len(r.Rows) == 0 {
			e.Lifecycle = true // dead at commit
		}
	case TrimRecord:
		if p := root.Part(r.PID); p == nil || r.LogStart <= p.LogStart {
			return true
		}
		root.Apply(r)
		touched[r.PID] = true
		e.Lifecycle = true
	case RemoteSegmentRecord:
		// A segment of a partition that is gone changes only the
		// counters (the check refuses it, so none is logged).
		e.Skip[i] = root.Part(r.PID) == nil
		root.Apply(r)
		if !e.Skip[i] {
			touched[r.PID] = true
			e.NewObjects = append(e.NewObjects, ObjectRow{ID: r.ObjectID, Key: r.Key, CommittedAt: r.Time})
			e.Lifecycle = true
		}
	case OwnershipRecord:
		root.Apply(r)
		e.Received++
		e.Lifecycle = true
	case ObjectsDeletedRecord:
		root.Apply(r)
		e.DeadObjects = append(e.DeadObjects, r.ObjectIDs...)
	case CompactRecord:
		if e.Skip[i] = root.Part(r.PID) == nil; !e.Skip[i] {
			root.Apply(r)
			touched[r.PID] = true
			e.NewObjects = append(e.NewObjects, ObjectRow{ID: r.ObjectID, Key: r.Key, CommittedAt: r.CommitTime, Compacted: true})
			e.Lifecycle = true
		}
	}
	return e.Skip[i]
}

// applyPending applies a confirm or a void to root: the partitions whose
// visible high watermark moved are touched (published again).
func (e *Effects) applyPending(root *View, r Record, touched map[int64]bool) {
	var moved []PendingCommit
	switch r := r.(type) {
	case ConfirmRecord:
		moved = root.applyConfirm(r.Through)
	case VoidRecord:
		moved = root.applyConfirm(r.From - 1)
		voided := root.applyVoid(r.From)
		e.Voided = append(e.Voided, voided...)
		moved = append(moved, voided...)
		if len(voided) > 0 {
			e.Lifecycle = true // their objects hold no batch now
		}
	}
	for _, pc := range moved {
		for _, h := range pc.Held {
			if root.Part(h.PID) != nil {
				touched[h.PID] = true
			}
		}
	}
}

// applyTxn applies a record of a transaction in a partition to root. It
// reports whether the record changed nothing.
func (e *Effects) applyTxn(root *View, r Record, i int, touched, txnParts map[int64]bool) (skip bool) {
	switch r := r.(type) {
	case TxnBeginRecord:
		if e.Skip[i] = root.Part(r.PID) == nil; !e.Skip[i] {
			root.Apply(r)
			txnParts[r.PID] = true
		}
	case TxnMarkerRecord:
		if e.Skip[i] = root.Part(r.PID) == nil; !e.Skip[i] {
			root.Apply(r)
			txnParts[r.PID], touched[r.PID] = true, true
		}
	}
	return e.Skip[i]
}

// GoneTopic returns the deleted topic of that ID among e.gone, or nil.
func (e *Effects) GoneTopic(id uuid.UUID) *TopicState {
	for _, t := range e.Gone {
		if t.ID == id {
			return t
		}
	}
	return nil
}
