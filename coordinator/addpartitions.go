package coordinator

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Adding partitions to a topic (Kafka's CreatePartitions).
//
// A topic's partitions are numbered by PIDs, this shard's partition
// numbers: at creation, partition i has PID FirstPID+i. Partitions added
// later get a new range of PIDs, an extent: from partition From on,
// partition i has PID FirstPID+(i-From) of the extent (topicState.pid).
// The extents are in the table topic_extents; the topics row holds the
// count and the served partitions. One record (addPartitionsRecord) raises
// the count, adding an extent, and names the new partitions this shard
// serves; the same record with the count unchanged only adds served
// partitions of the ranges already there (a Coordinator that finishes an
// addition a shard failed before).

// pidExtent is a range of PIDs of partitions added to a topic: partition
// i >= From has PID FirstPID+(i-From), up to the next extent's From.
type pidExtent struct {
	From     int32
	FirstPID int64
}

// pid returns partition i's PID.
func (t *topicState) pid(i int32) int64 {
	for j := len(t.Extents) - 1; j >= 0; j-- {
		if e := t.Extents[j]; i >= e.From {
			return e.FirstPID + int64(i-e.From)
		}
	}
	return t.FirstPID + int64(i)
}

// pidRanges returns the topic's PIDs as inclusive ranges.
func (t *topicState) pidRanges() [][2]int64 {
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

// hasPID reports whether pid is one of the topic's.
func (t *topicState) hasPID(pid int64) bool {
	for _, r := range t.pidRanges() {
		if pid >= r[0] && pid <= r[1] {
			return true
		}
	}
	return false
}

// addPartitionsRecord raises a topic's partition count to Partitions (the
// new partitions' PIDs from FirstPID on), or, with the count unchanged,
// only adds served partitions; Assigned are the new partitions this shard
// serves, in increasing order, nil for all those the record adds.
type addPartitionsRecord struct {
	TopicID    uuid.UUID
	Partitions int32
	FirstPID   int64
	Assigned   []int32
}

func (addPartitionsRecord) kind() recordType { return recAddPartitions }

func (r addPartitionsRecord) appendTo(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	b = binary.AppendVarint(b, int64(r.Partitions))
	b = binary.AppendVarint(b, r.FirstPID)
	if r.Assigned == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	return appendInt32s(b, r.Assigned)
}

func (d *decoder) addPartitions() addPartitionsRecord {
	r := addPartitionsRecord{TopicID: d.uuid(), Partitions: d.int32(), FirstPID: d.varint()}
	switch f := d.byte(); f {
	case 0:
	case 1:
		n := d.count(1)
		r.Assigned = make([]int32, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			r.Assigned = append(r.Assigned, d.int32())
		}
	default:
		d.fail("unknown add-partitions flag %d", f)
	}
	return r
}

// applyAdd applies an add partitions record to the view.
func (v *view) applyAdd(r addPartitionsRecord) {
	t := v.topic(r.TopicID)
	if t == nil {
		return
	}
	old := t.Partitions
	c := *t
	c.Extents = slices.Clone(t.Extents)
	if r.Partitions > old {
		c.Extents = append(c.Extents, pidExtent{From: old, FirstPID: r.FirstPID})
		c.Partitions, c.Config.Partitions = r.Partitions, r.Partitions
		v.nextPID = max(v.nextPID, r.FirstPID+int64(r.Partitions-old))
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
			served = allPartitions(old)
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
		if !c.serves(i) {
			continue
		}
		if pid := c.pid(i); v.part(pid) == nil {
			v.parts[pid] = &partState{PID: pid, TopicID: c.ID, Partition: i, RemoteEnd: -1}
		}
	}
}

// --- AddPartitions (a shard) -------------------------------------------

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

type addPartitionsOp struct {
	baseOp
	req AddPartitionsRequest
}

func (o *addPartitionsOp) check(g *group) {
	r := o.req
	t := g.spec.topic(r.TopicID)
	switch {
	case t == nil:
		o.finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", r.TopicID))
		return
	case r.Partitions < t.Partitions:
		o.finish(kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s has %d partitions, more than %d", t.Name, t.Partitions, r.Partitions))
		return
	case r.Partitions == t.Partitions && r.Assigned == nil:
		o.finish(kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s already has %d partitions", t.Name, t.Partitions))
		return
	}
	var newly []int32
	for i, p := range r.Assigned {
		if p < 0 || p >= r.Partitions || (i > 0 && p <= r.Assigned[i-1]) {
			o.finish(kafkaerr.New(kafkaerr.InvalidRequest, "assigned partitions %v are not increasing, in [0, %d)", r.Assigned, r.Partitions))
			return
		}
		if p < t.Partitions && t.serves(p) {
			continue // served already: a repeated request
		}
		newly = append(newly, p)
	}
	if r.Partitions == t.Partitions && len(newly) == 0 {
		o.finish(nil) // nothing to do: a repeated request
		return
	}
	rec := addPartitionsRecord{TopicID: t.ID, Partitions: r.Partitions, FirstPID: g.spec.nextPID}
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

// AddPartitions adds partitions to a topic of this shard. Errors carry
// Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (fewer
// partitions than the topic has, or as many with nothing to assign),
// INVALID_REQUEST. A request repeated once it is done changes nothing.
func (c *leader) AddPartitions(ctx context.Context, req AddPartitionsRequest) error {
	o := &addPartitionsOp{baseOp: newBaseOp(ctx), req: req}
	return c.submit(ctx, o, o.done)
}

// --- the store ----------------------------------------------------------

// The writer's statements of added partitions.
const (
	sqlUpdateTopicPartitions = "UPDATE topics SET partitions = ?, assigned = ? WHERE topic_id = ?"
	sqlInsertExtent          = "INSERT OR IGNORE INTO topic_extents (topic_id, from_partition, first_pid) VALUES (?, ?, ?)"
	sqlDeleteExtents         = "DELETE FROM topic_extents WHERE topic_id = ?"
	sqlLoadExtents           = "SELECT topic_id, from_partition, first_pid FROM topic_extents ORDER BY topic_id, from_partition"
)

// addPartitions writes an add partitions record, given the topic as the
// record left it.
func (s *store) addPartitions(ctx context.Context, t *topicState) error {
	if t == nil {
		return nil
	}
	if _, err := s.exec(ctx, sqlUpdateTopicPartitions, t.Partitions, int32sBlob(t.Assigned), t.ID[:]); err != nil {
		return err
	}
	for _, e := range t.Extents {
		if _, err := s.exec(ctx, sqlInsertExtent, t.ID[:], e.From, e.FirstPID); err != nil {
			return err
		}
	}
	for i := range t.Partitions {
		if pid := t.pid(i); t.serves(i) && s.bytes[pid] == nil {
			s.bytes[pid] = &partBytes{}
		}
	}
	return nil
}

// --- the Coordinator ----------------------------------------------------

// AddPartitions raises a topic's partition count to partitions, as
// Kafka's CreatePartitions: each new partition is assigned a shard (the
// least loaded, as at creation), and every shard that serves the topic
// learns the new count, concurrently. Errors carry Kafka's codes:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not more than it has).
// If a shard fails, the error is returned; the others have their
// partitions, and the same call made again finishes the addition.
func (s *Coordinator) AddPartitions(ctx context.Context, topicID uuid.UUID, partitions int32) error {
	if s.remotes == nil {
		return s.addPartitions(ctx, topicID, partitions)
	}
	if _, err := s.localShard(0); err == nil {
		return s.addPartitions(ctx, topicID, partitions)
	}
	_, err := remoteCall[bool](ctx, s.remotes[0], fwAdminAdd, addPartitionsCall{TopicID: topicID, Partitions: partitions})
	s.refreshCatalog(ctx)
	return err
}

// addPartitionsCall is the request of a forwarded AddPartitions.
type addPartitionsCall struct {
	TopicID    uuid.UUID
	Partitions int32
}

// addPartitions is AddPartitions done here (one process, or the leader of
// shard 0 of a cluster).
func (s *Coordinator) addPartitions(ctx context.Context, id uuid.UUID, total int32) error {
	if s.remotes != nil {
		s.refreshCatalog(ctx)
	}
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	s.mu.RLock()
	st := s.mu.topics[id]
	var info TopicInfo
	var serving []int
	var unserved []int32 // partitions below total no shard serves yet
	counts := slices.Clone(s.mu.counts)
	if st != nil {
		info, serving = st.info, slices.Clone(st.shards)
		for p := int32(0); p < total; p++ {
			if _, ok := s.mu.parts[wal.TopicPartition{TopicID: id, Partition: p}]; !ok {
				unserved = append(unserved, p)
			}
		}
	}
	s.mu.RUnlock()
	switch {
	case st == nil:
		return kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", id)
	case total <= info.Partitions && len(unserved) == 0:
		return kafkaerr.New(kafkaerr.InvalidPartitions, "topic %s has %d partitions, not fewer than %d", info.Name, info.Partitions, total)
	}
	assigned := assignLeastLoaded(counts, unserved)
	// One shard serving the whole topic, and getting every new
	// partition, keeps serving "all".
	whole := len(serving) == 1 && len(unserved) > 0 && len(assigned[serving[0]]) == len(unserved) && unserved[0] == info.Partitions
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	for i := range counts {
		has := slices.Contains(serving, i)
		if !has && len(assigned[i]) == 0 {
			continue
		}
		wg.Go(func() {
			c, err := s.shard(i)
			if err != nil {
				errs[i] = err
				return
			}
			if !has {
				req := CreatePartitionsRequest{TopicID: id, Name: info.Name, Partitions: total, Config: info.Config, Assigned: assigned[i]}
				if _, err = c.CreatePartitions(ctx, req); kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
					errs[i] = err
					return
				}
			}
			req := AddPartitionsRequest{TopicID: id, Partitions: total, Assigned: assigned[i]}
			if req.Assigned == nil {
				req.Assigned = []int32{}
			}
			if whole {
				req.Assigned = nil
			}
			errs[i] = c.AddPartitions(ctx, req)
		})
	}
	wg.Wait()
	var firstErr error
	s.mu.Lock()
	for i, err := range errs {
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			s.logger.Warn("coordinator: adding partitions", zap.Stringer("topic", id), zap.Int("shard", i), zap.Error(err))
			continue
		}
		got := TopicInfo{ID: id, Name: info.Name, Partitions: total, Config: info.Config, Assigned: assigned[i]}
		switch {
		case i < len(s.mu.coords) && s.mu.coords[i] != nil:
			// A shard of this process: its own view.
			t, ok := s.mu.coords[i].pub.topic(id)
			if !ok {
				continue
			}
			got = t
		case whole:
			got.Assigned = nil
		case len(assigned[i]) == 0:
			continue // serves none of the new ones
		}
		s.addLocked(i, got)
	}
	if firstErr == nil {
		if st := s.mu.topics[id]; st != nil {
			st.info.Partitions = total
			st.info.Config.Partitions = total
		}
	}
	s.mu.Unlock()
	return firstErr
}
