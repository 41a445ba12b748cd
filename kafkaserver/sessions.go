package kafkaserver

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Fetch session epochs (KIP-227), as Kafka's FetchMetadata names them.
const (
	initialEpoch = 0  // a full fetch that asks for a new session
	finalEpoch   = -1 // a full fetch without a session (closes the one named)
)

// sessionEvictAfter is how long a session must have been idle before a
// new one may take its slot (Kafka's
// min.incremental.fetch.session.eviction.ms).
const sessionEvictAfter = 120 * time.Second

// fetchSessions is the cache of incremental fetch sessions (KIP-227): a
// consumer fetching many partitions sends them all once (a full fetch
// with epoch 0), gets a session ID, and from then on sends only the
// partitions whose fetch offset changed (and those to forget); the
// answer holds only the partitions with records, an error, or a new high
// watermark or log start offset. Its size is bounded; when it is full, a
// new session takes the slot of one idle for sessionEvictAfter, else of
// the smallest session if that is smaller than the new one, else the
// client gets no session (ID 0) and goes on with full fetches, as with
// Kafka. It is safe for concurrent use.
type fetchSessions struct {
	max int

	mu struct {
		sync.Mutex
		byID map[int32]*fetchSession
	}
}

// fetchSession is one session; its fields are under fetchSessions.mu.
type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next request must carry
	parts    []*sessionPartition
	index    map[topicPartition]*sessionPartition
	lastUsed time.Time
}

// sessionPartition is a partition of a session: what the client last
// asked for it, and what the last answer said (to answer only changes).
type sessionPartition struct {
	tp             topicPartition
	fetchOffset    int64
	maxBytes       int32
	highWatermark  int64 // -1: not answered yet (or an error since)
	lastStable     int64
	logStartOffset int64
}

func newFetchSessions(max int) *fetchSessions {
	fs := &fetchSessions{max: max}
	fs.mu.byID = map[int32]*fetchSession{}
	return fs
}

// fetchPlan is what one fetch request reads, and how its answer is built.
type fetchPlan struct {
	code  int16 // a session error: the answer is only this
	parts []*sessionPartition
	// reads are parts' fetch offsets and bounds, as the request left them.
	reads []diskless.FetchPartition
	// session is the incremental session the answer is for, nil for a
	// full fetch; sessionID is the ID to answer (a full fetch that got a
	// new session answers its ID).
	session   *fetchSession
	sessionID int32
	// newSession creates a session from parts once the full fetch is
	// answered.
	newSession bool
}

// plan decides what a fetch request reads: its partitions (a full fetch),
// or its session's partitions updated by the request (an incremental
// one), or a session error.
func (fs *fetchSessions) plan(req *kmsg.FetchRequest, now time.Time) fetchPlan {
	fromReq := func() []*sessionPartition {
		var ps []*sessionPartition
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				ps = append(ps, &sessionPartition{tp: topicPartition{rt.Topic, rp.Partition}, fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, highWatermark: -1, logStartOffset: -1})
			}
		}
		return ps
	}
	if req.Version < 7 || req.SessionEpoch == initialEpoch || req.SessionEpoch == finalEpoch {
		if req.Version >= 7 && req.SessionID != 0 {
			fs.remove(req.SessionID) // a full fetch closes the session it names
		}
		ps := fromReq()
		return fetchPlan{parts: ps, reads: reads(ps), newSession: req.Version >= 7 && req.SessionEpoch == initialEpoch && fs.max > 0}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sess := fs.mu.byID[req.SessionID]
	switch {
	case sess == nil:
		return fetchPlan{code: int16(kafkaerr.FetchSessionIDNotFound)}
	case sess.epoch != req.SessionEpoch:
		return fetchPlan{code: int16(kafkaerr.InvalidFetchSessionEpoch)}
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			if p := sess.index[tp]; p != nil {
				p.fetchOffset, p.maxBytes = rp.FetchOffset, rp.PartitionMaxBytes
				continue
			}
			p := &sessionPartition{tp: tp, fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, highWatermark: -1, logStartOffset: -1}
			sess.index[tp] = p
			sess.parts = append(sess.parts, p)
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, part := range ft.Partitions {
			tp := topicPartition{ft.Topic, part}
			if p := sess.index[tp]; p != nil {
				delete(sess.index, tp)
				sess.parts = slices.DeleteFunc(sess.parts, func(q *sessionPartition) bool { return q == p })
			}
		}
	}
	if len(sess.parts) == 0 { // nothing left: the session ends, as in Kafka
		delete(fs.mu.byID, sess.id)
		return fetchPlan{}
	}
	sess.epoch = nextEpoch(sess.epoch)
	sess.lastUsed = now
	return fetchPlan{parts: slices.Clone(sess.parts), reads: reads(sess.parts), session: sess, sessionID: sess.id}
}

// reads returns what the facade is to read of ps.
func reads(ps []*sessionPartition) []diskless.FetchPartition {
	out := make([]diskless.FetchPartition, len(ps))
	for i, p := range ps {
		out[i] = diskless.FetchPartition{Topic: p.tp.topic, Partition: p.tp.partition, Offset: p.fetchOffset, MaxBytes: p.maxBytes}
	}
	return out
}

// nextEpoch is the epoch after e: it wraps from MaxInt32 to 1.
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// remove ends session id, if it exists.
func (fs *fetchSessions) remove(id int32) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.mu.byID, id)
}

// create makes a session of parts (a full fetch's, answered), if a slot
// is free or can be freed, and returns its ID, or 0 for none.
func (fs *fetchSessions) create(parts []*sessionPartition, now time.Time) int32 {
	if fs.max <= 0 || len(parts) == 0 {
		return 0
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.mu.byID) >= fs.max && !fs.evictLocked(len(parts), now) {
		return 0
	}
	id := int32(0)
	for id == 0 || fs.mu.byID[id] != nil {
		id = rand.Int32() // positive: 0 means none
	}
	sess := &fetchSession{id: id, epoch: nextEpoch(initialEpoch), parts: parts, index: make(map[topicPartition]*sessionPartition, len(parts)), lastUsed: now}
	for _, p := range parts {
		sess.index[p.tp] = p
	}
	fs.mu.byID[id] = sess
	return id
}

// evictLocked frees one slot for a session of size partitions: the
// least recently used session idle for sessionEvictAfter, else the
// smallest session if it is smaller. It reports whether it freed one.
func (fs *fetchSessions) evictLocked(size int, now time.Time) bool {
	var idle, small *fetchSession
	for _, s := range fs.mu.byID {
		if now.Sub(s.lastUsed) >= sessionEvictAfter && (idle == nil || s.lastUsed.Before(idle.lastUsed)) {
			idle = s
		}
		if small == nil || len(s.parts) < len(small.parts) {
			small = s
		}
	}
	switch {
	case idle != nil:
		delete(fs.mu.byID, idle.id)
	case small != nil && len(small.parts) < size:
		delete(fs.mu.byID, small.id)
	default:
		return false
	}
	return true
}

// len returns the number of sessions.
func (fs *fetchSessions) len() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.mu.byID)
}

// changed records what an answer says of p, and reports whether an
// incremental answer must include it: it has records or an error, or its
// high watermark or log start offset moved since the last answer.
func (fs *fetchSessions) changed(p *sessionPartition, code int16, hwm, lso, logStart int64, records int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	must := records > 0 || code != 0 || hwm != p.highWatermark || lso != p.lastStable || logStart != p.logStartOffset
	p.highWatermark, p.lastStable, p.logStartOffset = hwm, lso, logStart
	if code != 0 {
		p.highWatermark = -1 // sent again once the error is gone
	}
	return must
}

// rotate moves the partitions that returned records to the end of the
// session's order, so that the next answers, bounded by MaxBytes, start
// with the others, as Kafka's sessions do.
func (fs *fetchSessions) rotate(sess *fetchSession, served map[*sessionPartition]bool) {
	if len(served) == 0 {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	rest := make([]*sessionPartition, 0, len(sess.parts))
	var moved []*sessionPartition
	for _, p := range sess.parts {
		if served[p] {
			moved = append(moved, p)
		} else {
			rest = append(rest, p)
		}
	}
	sess.parts = append(rest, moved...)
}
