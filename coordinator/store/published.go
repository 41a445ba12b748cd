package store

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
	"github.com/google/uuid"
)

// Published is what readers need of the committed view, current as soon
// as an entry is applied (before the database transaction that holds it
// commits): each partition's log start offset, diskless start offset and
// high watermark, and the topics. The loop updates it; readers on any goroutine read it. So
// ListOffsets is always current, and FindBatches checks offsets against
// the current range even when its rows come from a read pool a little
// behind.
type Published struct {
	mu      sync.RWMutex
	parts   map[wal.TopicPartition]*pubPart
	topics  map[uuid.UUID]TopicInfo
	objects map[int64]pubObject // every committed object not yet deleted
	// security is the SCRAM credentials and ACLs (security.go), and
	// quotas the client quotas (quotas.go).
	Security atomic.Pointer[SecuritySnapshot]
	Quotas   atomic.Pointer[QuotasSnapshot]
}

// pubObject is what FindBatches needs of an object: batch rows name
// objects by ID, and resolving them here rather than with a join keeps
// the read a plain index range scan.
type pubObject struct {
	key         string
	committedAt int64
	// compacted: written by a compaction, its batches as they were read
	// (a LogAppendTime topic's stamped with their own commit times).
	compacted bool
}

// pubPart is one partition's published state.
type pubPart struct {
	pid           int64
	lat           bool
	logStart      atomic.Int64
	disklessStart atomic.Int64
	hw            atomic.Int64
	lso           atomic.Int64 // last stable offset
	cleanedTo     atomic.Int64
	// appliedAt is the log offset of the entry that last changed the
	// partition: a read of its rows waits until the read pool has it
	// (leader.readBarrier), so that rows and high watermark agree.
	appliedAt atomic.Int64
}

func NewPublished() *Published {
	return &Published{parts: map[wal.TopicPartition]*pubPart{}, topics: map[uuid.UUID]TopicInfo{}, objects: map[int64]pubObject{}}
}

// Load publishes every topic and partition of root, and the objects.
func (p *Published) Load(root *state.View, objects []state.ObjectRow) {
	p.Security.Store(newSecuritySnapshot(root))
	p.Quotas.Store(newQuotasSnapshot(root))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range objects {
		p.objects[o.ID] = pubObject{key: o.Key, committedAt: o.CommittedAt, compacted: o.Compacted}
	}
	for _, t := range root.Topics {
		p.addTopicLocked(t)
	}
	for pid := range root.Parts {
		p.setLocked(root, pid, -1)
	}
}

func (p *Published) addTopicLocked(t *state.TopicState) {
	p.topics[t.ID] = TopicInfo{ID: t.ID, Name: t.Name, Partitions: t.Partitions, Config: t.Config, Assigned: slices.Clone(t.Assigned)}
}

func (p *Published) setLocked(root *state.View, pid, offset int64) {
	rp := root.Part(pid)
	if rp == nil {
		return
	}
	tp := wal.TopicPartition{TopicID: rp.TopicID, Partition: rp.Partition}
	pp := p.parts[tp]
	if pp == nil {
		t := root.Topic(rp.TopicID)
		pp = &pubPart{pid: pid, lat: t != nil && t.Config.LogAppendTime}
		p.parts[tp] = pp
		if t != nil {
			p.addTopicLocked(t)
		}
	}
	// Readers load the log start first and the high watermark last: stored
	// in the other order, what one reader loads is in order (log start <=
	// diskless start <= high watermark) even while they move.
	pp.appliedAt.Store(offset)
	pp.hw.Store(rp.Visible())
	pp.lso.Store(rp.LastStable())
	pp.cleanedTo.Store(rp.CleanedTo)
	pp.disklessStart.Store(rp.DisklessStart)
	pp.logStart.Store(rp.LogStart)
}

// Update publishes what the entry at offset, applied to root, changed
// (its effects).
func (p *Published) Update(root *state.View, s *state.Effects, offset int64) {
	if s.Security {
		p.Security.Store(newSecuritySnapshot(root))
	}
	if s.Quotas {
		p.Quotas.Store(newQuotasSnapshot(root))
	}
	if len(s.Touched) == 0 && len(s.Gone) == 0 && len(s.Grown) == 0 && len(s.NewObjects) == 0 && len(s.DeadObjects) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range s.NewObjects {
		p.objects[o.ID] = pubObject{key: o.Key, committedAt: o.CommittedAt, compacted: o.Compacted}
	}
	for _, id := range s.DeadObjects {
		delete(p.objects, id)
	}
	for _, t := range s.Gone {
		delete(p.topics, t.ID)
		for i := int32(0); i < t.Partitions; i++ {
			delete(p.parts, wal.TopicPartition{TopicID: t.ID, Partition: i})
		}
	}
	for _, id := range s.Grown {
		if t := root.Topic(id); t != nil {
			p.addTopicLocked(t)
		}
	}
	for _, pid := range s.Touched {
		p.setLocked(root, pid, offset)
	}
}

// Lookup returns tp's published state, or UNKNOWN_TOPIC_OR_PARTITION.
func (p *Published) Lookup(tp wal.TopicPartition) (PartRow, error) {
	p.mu.RLock()
	pp := p.parts[tp]
	p.mu.RUnlock()
	if pp == nil {
		return PartRow{}, kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", tp)
	}
	return PartRow{PID: pp.pid, lat: pp.lat, LogStart: pp.logStart.Load(), disklessStart: pp.disklessStart.Load(), LSO: pp.lso.Load(), cleanedTo: pp.cleanedTo.Load(), HW: pp.hw.Load(), AppliedAt: pp.appliedAt.Load()}, nil
}

// Topic returns the topic of that ID.
func (p *Published) Topic(id uuid.UUID) (TopicInfo, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	t, ok := p.topics[id]
	t.Assigned = slices.Clone(t.Assigned)
	return t, ok
}

// TopicList returns the topics by name.
func (p *Published) TopicList() []TopicInfo {
	p.mu.RLock()
	out := make([]TopicInfo, 0, len(p.topics))
	for _, t := range p.topics {
		t.Assigned = slices.Clone(t.Assigned)
		out = append(out, t)
	}
	p.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
