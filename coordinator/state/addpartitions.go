package state

import (
	"encoding/binary"
	"slices"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/google/uuid"
)

// pidExtent is a range of PIDs of partitions added to a topic: partition
// i >= From has PID FirstPID+(i-From), up to the next extent's From.
type PIDExtent struct {
	From     int32
	FirstPID int64
}

// pid returns partition i's PID.
func (t *TopicState) PID(i int32) int64 {
	for j := len(t.Extents) - 1; j >= 0; j-- {
		if e := t.Extents[j]; i >= e.From {
			return e.FirstPID + int64(i-e.From)
		}
	}
	return t.FirstPID + int64(i)
}

// pidRanges returns the topic's PIDs as inclusive ranges.
func (t *TopicState) PIDRanges() [][2]int64 {
	end := t.Partitions
	if len(t.Extents) > 0 {
		end = t.Extents[0].From
	}
	out := [][2]int64{{t.FirstPID, t.FirstPID + int64(end) - 1}}
	for j, e := range t.Extents {
		end := t.Partitions
		if j+1 < len(t.Extents) {
			end = t.Extents[j+1].From
		}
		out = append(out, [2]int64{e.FirstPID, e.FirstPID + int64(end-e.From) - 1})
	}
	return out
}

// HasPID reports whether pid is one of the topic's.
func (t *TopicState) HasPID(pid int64) bool {
	for _, r := range t.PIDRanges() {
		if pid >= r[0] && pid <= r[1] {
			return true
		}
	}
	return false
}

// AddPartitionsRecord raises a topic's partition count to Partitions (the
// new partitions' PIDs from FirstPID on), or, with the count unchanged,
// only adds served partitions; Assigned are the new partitions this shard
// serves, in increasing order, nil for all those the record adds.
type AddPartitionsRecord struct {
	TopicID    uuid.UUID
	Partitions int32
	FirstPID   int64
	Assigned   []int32
}

func (AddPartitionsRecord) Kind() recordType { return recAddPartitions }

func (r AddPartitionsRecord) AppendTo(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	b = binary.AppendVarint(b, int64(r.Partitions))
	b = binary.AppendVarint(b, r.FirstPID)
	if r.Assigned == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	return AppendInt32s(b, r.Assigned)
}

func (d *Decoder) addPartitions() AddPartitionsRecord {
	r := AddPartitionsRecord{TopicID: d.uuid(), Partitions: d.Int32(), FirstPID: d.Varint()}
	switch f := d.byte(); f {
	case 0:
	case 1:
		n := d.Count(1)
		r.Assigned = make([]int32, 0, n)
		for i := 0; i < n && d.Err == nil; i++ {
			r.Assigned = append(r.Assigned, d.Int32())
		}
	default:
		d.Fail("unknown add-partitions flag %d", f)
	}
	return r
}

// applyAdd applies an add partitions record to the view.
func (v *View) applyAdd(r AddPartitionsRecord) {
	t := v.Topic(r.TopicID)
	if t == nil {
		return
	}
	old := t.Partitions
	c := *t
	c.Extents = slices.Clone(t.Extents)
	if r.Partitions > old {
		c.Extents = append(c.Extents, PIDExtent{From: old, FirstPID: r.FirstPID})
		c.Partitions, c.Config.Partitions = r.Partitions, r.Partitions
		v.NextPID = max(v.NextPID, r.FirstPID+int64(r.Partitions-old))
	}
	add := r.Assigned
	if add == nil {
		for i := old; i < c.Partitions; i++ {
			add = append(add, i)
		}
	}
	if t.Assigned != nil || r.Assigned != nil {
		served := t.Assigned
		if served == nil {
			served = AllPartitions(old)
		}
		merged := slices.Clone(served)
		for _, i := range add {
			if i >= 0 && i < c.Partitions && !slices.Contains(merged, i) {
				merged = append(merged, i)
			}
		}
		slices.Sort(merged)
		c.Assigned = merged
	}
	v.setTopic(c.ID, c.Name, &c)
	for _, i := range add {
		if !c.Serves(i) {
			continue
		}
		if pid := c.PID(i); v.Part(pid) == nil {
			v.Parts[pid] = &PartState{PID: pid, TopicID: c.ID, Partition: i, RemoteEnd: -1}
		}
	}
}

// AddPartitionsRequest adds partitions to a topic of a shard.
type AddPartitionsRequest struct {
	TopicID uuid.UUID
	// Partitions is the topic's new partition count: more than it has,
	// or as many, to serve more of those it has.
	Partitions int32
	// Assigned are the partitions this shard serves of those added (at
	// or above the count before), in increasing order, possibly none; nil
	// means every partition added.
	Assigned []int32
}

type AddPartitionsOp struct {
	BaseOp
	Req AddPartitionsRequest
}

func (o *AddPartitionsOp) Check(g *Group) {
	r := o.Req
	t := g.Spec.Topic(r.TopicID)
	switch {
	case t == nil:
		o.Finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", r.TopicID))
		return
	case r.Partitions < t.Partitions:
		o.Finish(kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s has %d partitions, more than %d", t.Name, t.Partitions, r.Partitions))
		return
	case r.Partitions == t.Partitions && r.Assigned == nil:
		o.Finish(kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s already has %d partitions", t.Name, t.Partitions))
		return
	}
	var newly []int32
	for i, p := range r.Assigned {
		if p < 0 || p >= r.Partitions || (i > 0 && p <= r.Assigned[i-1]) {
			o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "assigned partitions %v are not increasing, in [0, %d)", r.Assigned, r.Partitions))
			return
		}
		if p < t.Partitions && t.Serves(p) {
			continue // served already: a repeated request
		}
		newly = append(newly, p)
	}
	if r.Partitions == t.Partitions && len(newly) == 0 {
		o.Finish(nil) // nothing to do: a repeated request
		return
	}
	rec := AddPartitionsRecord{TopicID: t.ID, Partitions: r.Partitions, FirstPID: g.Spec.NextPID}
	if r.Assigned != nil {
		rec.Assigned = newly
		if rec.Assigned == nil {
			rec.Assigned = []int32{}
		}
	}
	if r.Partitions == t.Partitions {
		rec.FirstPID = 0
	}
	g.add(rec)
}
