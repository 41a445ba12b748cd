package coordinator

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// The coordinator's pure core, as etcd's raft is one: deciding and
// applying are functions of the state, with no I/O and no clock.
//
//   - decide: a group of requests (ops) is checked against the
//     speculative view (the committed view plus every record sent to the
//     log and not yet durable); each op adds the records it needs, or
//     answers with an error. What a decision needs from outside the view
//     comes in with it: the time (group.now) and facts the driver read
//     from the store first (group.facts: object rows by key, retention's
//     cuts, the fingerprints of ranges to compact).
//   - apply: a durable entry's records are applied to the committed view
//     (applyEntry), which returns the effects the driver must carry out
//     beside writing the records' rows: what to publish, whether the
//     object lifecycle has work.
//
// The driver (loop.go) does the I/O: it gathers the facts, appends each
// group's records to the log, writes the rows of durable entries to
// SQLite (store_write.go), publishes, and answers. The model test
// (core_model_test.go) runs the core alone, with no SQLite and no log.

// group is the requests that go into one log entry, and what deciding
// them reads: the speculative view, the time, the options that shape
// decisions (the shard, the key prefix, the commit deadline), and the
// facts. It holds no I/O handle.
type group struct {
	// shard is the leader's shard; prefix starts object keys
	// (Options.Prefix); commitDeadline is Options.CommitDeadline.
	shard          int
	prefix         string
	commitDeadline time.Duration
	spec           *view
	now            int64 // Unix milliseconds
	facts          *facts
	records        []record
}

// add appends a record to the group and applies it to the speculative
// view, so that the next check sees it.
func (g *group) add(r record) {
	g.records = append(g.records, r)
	g.spec.apply(r)
}

// needs is what the ops of a group want the driver to read from the
// store before they are decided.
type needs struct {
	// prefix is Options.Prefix, which object keys start with (the driver
	// sets it).
	prefix string
	// keys are object keys whose committed rows the ops read.
	keys []string
	// commitKeys are the keys of objects to commit: for those the store
	// knows (a retried commit), the rows their first commit made.
	commitKeys []string
	// retention asks for retention's cut of every partition.
	retention bool
	// ranges are the ranges compactions replace: their rows'
	// fingerprints.
	ranges []CompactRequest
}

// facts is what the driver read from the committed store for a group:
// the decisions take it as input, with the speculative view for what is
// not committed yet.
type facts struct {
	// objects are the committed object rows of needs.keys that exist.
	objects map[string]objectState
	// cuts are, for each partition whose topic deletes, the log start
	// offset that retention.ms and retention.bytes raise it to over the
	// committed batches and remote segments (only those that move).
	cuts map[int64]int64
	// commits are the rows of the objects of needs.commitKeys the store
	// holds, as their commit made them (those still there).
	commits map[string]*recentCommit
	// prints are the fingerprints of needs.ranges' committed rows, by
	// PID, from and to (those with no run straddling from).
	prints map[[3]int64]uint64
	// err is why the facts could not be read: the ops that need them
	// fail with it.
	err error
}

// object returns the committed row of key, if any, and the error that
// kept the facts from being read.
func (f *facts) object(key string) (objectState, bool, error) {
	if f == nil {
		return objectState{}, false, nil
	}
	o, ok := f.objects[key]
	return o, ok, f.err
}

// effects is what applying a durable entry to the committed view leaves
// to the driver, beside writing the entry's rows.
type effects struct {
	// skip[i] says records[i] changed nothing (a trim below the log
	// start, a record of a partition that is gone): the store writes no
	// row for it.
	skip []bool
	// touched are the partitions whose state changed (to publish and to
	// write), in increasing order.
	touched []int64
	// gone are the topics deleted, as they were.
	gone []*topicState
	// grown are the topics partitions were added to, or whose config
	// changed: published again.
	grown []uuid.UUID
	// newObjects are the objects committed (their rows hold batches), and
	// deadObjects the IDs of the objects forgotten.
	newObjects  []objectRow
	deadObjects []int64
	// received counts the ownerships received.
	received int
	// txnParts are the partitions whose open transactions changed (their
	// txn_open rows are written again), in increasing order.
	txnParts []int64
	// lifecycle says objects may have died or changed hands: the
	// lifecycle worker has work.
	lifecycle bool
	// security says SCRAM credentials or ACLs changed: published again.
	security bool
}

// applyEntry applies a durable entry's records to the committed view root
// and returns the effects. It is pure: the same view and records give the
// same view and effects.
func applyEntry(root *view, records []record) effects {
	e := effects{skip: make([]bool, len(records))}
	touched, txnParts := map[int64]bool{}, map[int64]bool{}
	for i, r := range records {
		switch r := r.(type) {
		case createTopicRecord:
			root.apply(r)
			for i := range int64(r.Partitions) {
				if root.part(r.FirstPID+i) != nil { // an assigned partition
					touched[r.FirstPID+i] = true
				}
			}
		case addPartitionsRecord:
			if root.topic(r.TopicID) == nil {
				e.skip[i] = true
				continue
			}
			root.apply(r)
			t := root.topic(r.TopicID)
			for p := range t.Partitions {
				if pid := t.pid(p); root.part(pid) != nil {
					touched[pid] = true
				}
			}
			e.grown = append(e.grown, r.TopicID)
		case alterTopicRecord:
			if root.topic(r.TopicID) == nil {
				e.skip[i] = true
				continue
			}
			root.apply(r)
			e.grown = append(e.grown, r.TopicID)
		case scramUpsertRecord, scramDeleteRecord, aclCreateRecord, aclDeleteRecord:
			root.apply(r)
			e.security = true
		case deleteTopicRecord:
			t := root.topic(r.TopicID)
			if t == nil {
				e.skip[i] = true
				continue
			}
			root.apply(r)
			e.gone = append(e.gone, t)
			for i := range t.Partitions {
				delete(touched, t.pid(i))
			}
			e.lifecycle = true
		case commitFileRecord:
			root.apply(r)
			root.txnFirstSet(r, func(pid int64) { txnParts[pid] = true })
			e.newObjects = append(e.newObjects, objectRow{id: r.ObjectID, key: r.Key, committedAt: r.CommitTime})
			for _, w := range r.Rows {
				if root.part(w.PID) != nil {
					touched[w.PID] = true
				}
			}
			if len(r.Rows) == 0 {
				e.lifecycle = true // dead at commit
			}
		case trimRecord:
			if p := root.part(r.PID); p == nil || r.LogStart <= p.LogStart {
				e.skip[i] = true
				continue
			}
			root.apply(r)
			touched[r.PID] = true
			e.lifecycle = true
		case remoteSegmentRecord:
			// A segment of a partition that is gone changes only the
			// counters (the check refuses it, so none is logged).
			e.skip[i] = root.part(r.PID) == nil
			root.apply(r)
			if !e.skip[i] {
				touched[r.PID] = true
				e.newObjects = append(e.newObjects, objectRow{id: r.ObjectID, key: r.Key, committedAt: r.Time})
				e.lifecycle = true
			}
		case ownershipRecord:
			root.apply(r)
			e.received++
			e.lifecycle = true
		case objectsDeletedRecord:
			root.apply(r)
			e.deadObjects = append(e.deadObjects, r.ObjectIDs...)
		case compactRecord:
			if e.skip[i] = root.part(r.PID) == nil; !e.skip[i] {
				root.apply(r)
				touched[r.PID] = true
				e.newObjects = append(e.newObjects, objectRow{id: r.ObjectID, key: r.Key, committedAt: r.CommitTime, compacted: true})
				e.lifecycle = true
			}
		case txnBeginRecord:
			if e.skip[i] = root.part(r.PID) == nil; !e.skip[i] {
				root.apply(r)
				txnParts[r.PID] = true
			}
		case txnMarkerRecord:
			if e.skip[i] = root.part(r.PID) == nil; !e.skip[i] {
				root.apply(r)
				txnParts[r.PID], touched[r.PID] = true, true
			}
		default:
			root.apply(r)
		}
	}
	for pid := range touched {
		e.touched = append(e.touched, pid)
	}
	slices.Sort(e.touched)
	for pid := range txnParts {
		if root.part(pid) != nil {
			e.txnParts = append(e.txnParts, pid)
		}
	}
	slices.Sort(e.txnParts)
	return e
}

// goneTopic returns the deleted topic of that ID among e.gone, or nil.
func (e *effects) goneTopic(id uuid.UUID) *topicState {
	for _, t := range e.gone {
		if t.ID == id {
			return t
		}
	}
	return nil
}
