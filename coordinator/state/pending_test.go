package state

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// pendingCommit returns a pending commit record of object id: n records
// at the partition's next offset for each pid in pids, by producer 7 at
// sequence seq (the same in each).
func pendingCommit(v *View, id int64, seq int32, n int32, pids ...int64) CommitFileRecord {
	r := CommitFileRecord{ObjectID: id, Key: "wal/" + uuid.NewString(), CommitTime: 1000, Pending: true}
	for _, pid := range pids {
		hw := v.Part(pid).HW
		r.Rows = append(r.Rows, CommitRow{PID: pid, BaseOffset: hw, LastOffset: hw + int64(n) - 1, ByteSize: 100, MaxTimestamp: 1000})
		r.Producers = append(r.Producers, ProducerBatch{PID: pid, ProducerID: 7, FirstSeq: seq, LastSeq: seq + n - 1, LastOffset: hw + int64(n) - 1, Count: n, Timestamp: 1000})
	}
	return r
}

// TestPendingConfirmAndVoid: a pending commit holds its offsets from the
// visible high watermark until a confirm; a void drops the rest of the
// queue, gives its offsets back, and takes the producer's state back to
// before its first voided batch.
func TestPendingConfirmAndVoid(t *testing.T) {
	v := NewView(nil)
	ApplyEntry(v, []Record{CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 2, FirstPID: 0}})
	p0, p1 := v.Part(0), v.Part(1)

	c1 := pendingCommit(v, 1, 0, 10, 0)
	e := ApplyEntry(v, []Record{c1})
	require.Len(t, e.Queued, 1)
	require.Equal(t, int64(10), v.Part(0).HW, "offsets assigned")
	require.Equal(t, int64(0), v.Part(0).Visible(), "not readable yet")
	c2 := pendingCommit(v, 2, 10, 10, 0, 1)
	ApplyEntry(v, []Record{c2})
	require.Equal(t, int64(20), v.Part(0).HW)
	require.Equal(t, int64(10), v.Part(1).HW)
	require.Len(t, v.PendingQueue(), 2)

	e = ApplyEntry(v, []Record{ConfirmRecord{Through: 1}})
	require.Equal(t, []int64{0}, e.Touched)
	require.Equal(t, int64(2), v.PendingQueue()[0].ObjectID, "the commits up to object 1 left the queue")
	require.Equal(t, int64(10), v.Part(0).Visible(), "commit 1's offsets readable, commit 2's not")
	require.Equal(t, int64(0), v.Part(1).Visible())
	ApplyEntry(v, []Record{ConfirmRecord{Through: 1}}) // a leader's early confirm, then the record
	require.Len(t, v.PendingQueue(), 1, "a confirm applies once")

	before := *v.Producer(ProducerKey{0, 7})
	require.Equal(t, int32(19), before.Batches[len(before.Batches)-1].LastSeq)
	e = ApplyEntry(v, []Record{VoidRecord{From: 2, Time: 2000}})
	require.Len(t, e.Voided, 1)
	require.True(t, e.Lifecycle)
	require.Empty(t, v.PendingQueue())
	require.Equal(t, int64(10), v.Part(0).HW, "no one saw the voided offsets: they are assigned again")
	require.Equal(t, int64(10), v.Part(0).Visible())
	require.Equal(t, int64(0), v.Part(1).HW)
	got := v.Producer(ProducerKey{0, 7})
	require.Len(t, got.Batches, 1)
	require.Equal(t, int32(9), got.Batches[0].LastSeq, "back to before the voided batch: its retry is accepted")
	require.Equal(t, int16(-1), v.Producer(ProducerKey{1, 7}).Epoch, "no state before it: none now")
	require.True(t, v.recentCommitOf(c2.Key).Void)
	require.Zero(t, p0.Held+p1.Held)
}

// TestPendingVoidKeepsChangedProducer: a producer whose state another
// record changed after its voided batch (a marker's epoch bump) keeps it.
func TestPendingVoidKeepsChangedProducer(t *testing.T) {
	v := NewView(nil)
	ApplyEntry(v, []Record{CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 1, FirstPID: 0}})
	ApplyEntry(v, []Record{pendingCommit(v, 1, 0, 5, 0)})
	v.ApplyMarkerEpoch(TxnMarkerRecord{PID: 0, ProducerID: 7, Epoch: 3})
	ApplyEntry(v, []Record{VoidRecord{From: 1}})
	require.Equal(t, int16(3), v.Producer(ProducerKey{0, 7}).Epoch)
}

// TestPendingSpeculative: a speculative view queues, confirms and voids on
// its own copy of the queue, and its parent's is unchanged.
func TestPendingSpeculative(t *testing.T) {
	root := NewView(nil)
	ApplyEntry(root, []Record{CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 1, FirstPID: 0}})
	ApplyEntry(root, []Record{pendingCommit(root, 1, 0, 5, 0)})
	spec := NewView(root)
	spec.Apply(pendingCommit(spec, 2, 5, 5, 0))
	require.Len(t, spec.PendingQueue(), 2)
	require.Len(t, root.PendingQueue(), 1)
	spec.Apply(VoidRecord{From: 1})
	require.Empty(t, spec.PendingQueue())
	require.Len(t, root.PendingQueue(), 1)
	require.Equal(t, int32(4), root.Producer(ProducerKey{0, 7}).Batches[0].LastSeq)
	require.Equal(t, int16(-1), spec.Producer(ProducerKey{0, 7}).Epoch)
	require.Equal(t, int64(0), root.Part(0).Visible())
	require.Equal(t, int64(0), spec.Part(0).Visible())
}

// TestPendingVoidGap: voided offsets that a marker follows stay a gap;
// the high watermark does not go back past the marker.
func TestPendingVoidGap(t *testing.T) {
	v := NewView(nil)
	ApplyEntry(v, []Record{CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 1, FirstPID: 0}})
	ApplyEntry(v, []Record{pendingCommit(v, 1, 0, 5, 0)})
	ApplyEntry(v, []Record{TxnMarkerRecord{PID: 0, ProducerID: 8, Epoch: 0, Offset: 5, First: -1}})
	ApplyEntry(v, []Record{VoidRecord{From: 1}})
	require.Equal(t, int64(6), v.Part(0).HW)
	require.Equal(t, int64(6), v.Part(0).Visible())
}

// TestPendingCodec: the pending records and the queue's stored form
// decode to what was encoded; a queue loaded holds its offsets again.
func TestPendingCodec(t *testing.T) {
	v := NewView(nil)
	ApplyEntry(v, []Record{CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 2, FirstPID: 0}})
	c := pendingCommit(v, 1, 0, 5, 0, 1)
	records := []Record{c, ConfirmRecord{Through: 1}, VoidRecord{From: 2, Time: 99}, VoidRecord{From: 3, Time: 100}}
	b := AppendEntry(nil, Entry{Epoch: 1, Records: records})
	got, err := DecodeEntry(b)
	require.NoError(t, err)
	require.Equal(t, records, got.Records)

	e := ApplyEntry(v, []Record{c})
	pc := e.Queued[0]
	enc := AppendPendingCommit(nil, pc)
	dec, err := DecodePendingCommit(enc)
	require.NoError(t, err)
	require.Equal(t, pc, dec)
	_, err = DecodePendingCommit(append(enc, 0))
	require.Error(t, err)

	w := NewView(nil)
	ApplyEntry(w, []Record{CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 2, FirstPID: 0}})
	w.LoadPending([]PendingCommit{dec})
	require.Equal(t, int32(1), w.Part(1).Held)
	require.Equal(t, int64(0), w.Part(1).Visible())
}
