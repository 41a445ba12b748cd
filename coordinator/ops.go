package coordinator

import (
	"context"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// op is one mutating request in the coordinator's loop. need says what
// facts it reads from the store; check decides it (pure: see core.go)
// against the speculative view and those facts, and adds the records it
// needs to the group; finish answers it once the group's entry is durable
// and applied (err is nil), or when the entry failed.
type op interface {
	context() context.Context
	need(n *needs)
	check(g *group)
	finish(err error)
	// coords says how many batch coordinates the op carries, to size
	// groups.
	coords() int
}

// baseOp holds what every op has: its context and the channel that
// carries its answer. Only the loop's goroutine calls finish; the first
// call answers, later ones do nothing (a check that fails answers at once,
// and the loop still finishes every op of the group).
type baseOp struct {
	ctx      context.Context
	done     chan error
	finished bool
}

func newBaseOp(ctx context.Context) baseOp { return baseOp{ctx: ctx, done: make(chan error, 1)} }

func (o *baseOp) context() context.Context { return o.ctx }
func (o *baseOp) coords() int              { return 1 }
func (o *baseOp) need(*needs)              {}

func (o *baseOp) finish(err error) {
	if !o.finished {
		o.finished = true
		o.done <- err
	}
}

// --- CreatePartitions ---------------------------------------------------

// CreatePartitionsRequest creates a topic and its partitions.
type CreatePartitionsRequest struct {
	// TopicID is the topic's ID; the zero UUID asks the coordinator for a
	// random one.
	TopicID uuid.UUID
	// Name is the topic's name: 1 to 249 of [a-zA-Z0-9._-], not "." or
	// "..".
	Name string
	// Partitions is how many partitions the topic has, at least 1.
	Partitions int32
	// Config is the topic's configuration.
	Config TopicConfig
	// Assigned, when not nil, are the partitions of the topic that this
	// shard serves, in increasing order, each in [0, Partitions): the
	// others are another shard's (Coordinator sets it), and this one answers
	// UNKNOWN_TOPIC_OR_PARTITION for them. Nil means all of them.
	Assigned []int32
}

// legalTopicName is Kafka's rule (org.apache.kafka.common.internals.Topic).
var legalTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

type createOp struct {
	baseOp
	req CreatePartitionsRequest
	id  uuid.UUID
}

func (o *createOp) check(g *group) {
	r := o.req
	switch {
	case !legalTopicName.MatchString(r.Name) || r.Name == "." || r.Name == "..":
		o.finish(kafkaerr.New(kafkaerr.InvalidTopicException, "topic name %q is not legal: 1 to 249 of [a-zA-Z0-9._-], not . or ..", r.Name))
		return
	case r.Partitions < 1:
		o.finish(kafkaerr.New(kafkaerr.InvalidPartitions, "a topic needs at least 1 partition, not %d", r.Partitions))
		return
	case r.Config.check() != nil:
		o.finish(r.Config.check())
		return
	case g.spec.topicNamed(r.Name) != nil:
		o.finish(kafkaerr.New(kafkaerr.TopicAlreadyExists, "topic %q already exists", r.Name))
		return
	case r.Assigned != nil && !increasingBelow(r.Assigned, r.Partitions):
		o.finish(kafkaerr.New(kafkaerr.InvalidRequest, "assigned partitions %v are not increasing, at least one, in [0, %d)", r.Assigned, r.Partitions))
		return
	}
	o.id = r.TopicID
	if o.id == (uuid.UUID{}) {
		o.id = uuid.New()
	} else if g.spec.topic(o.id) != nil {
		o.finish(kafkaerr.New(kafkaerr.TopicAlreadyExists, "a topic with ID %s already exists", o.id))
		return
	}
	cfg := r.Config.normalized()
	cfg.Partitions = r.Partitions
	g.add(createTopicRecord{TopicID: o.id, Name: r.Name, Partitions: r.Partitions, FirstPID: g.spec.nextPID, Config: cfg, Assigned: slices.Clone(r.Assigned)})
}

// check returns the INVALID_CONFIG error of a config out of range, nil if
// it is valid.
func (c TopicConfig) check() error {
	switch {
	case c.MaxMessageBytes < 0 || c.SegmentBytes < 0 || c.SegmentTime < 0:
		return kafkaerr.New(kafkaerr.InvalidConfig, "max.message.bytes %d, segment.bytes %d, segment.ms %d: none may be negative",
			c.MaxMessageBytes, c.SegmentBytes, c.SegmentTime.Milliseconds())
	case c.MinCompactionLag < 0 || c.MaxCompactionLag < 0 || !c.normalizeCompaction().compactionValid():
		return kafkaerr.New(kafkaerr.InvalidConfig, "min.compaction.lag.ms %d, max.compaction.lag.ms %d: neither may be negative; min.cleanable.dirty.ratio %v may not be above 1",
			c.MinCompactionLag.Milliseconds(), c.MaxCompactionLag.Milliseconds(), c.MinCleanableDirtyRatio)
	case c.MaxCompactionLag > 0 && c.MinCompactionLag > c.MaxCompactionLag:
		return kafkaerr.New(kafkaerr.InvalidConfig, "conflict topic config setting max.compaction.lag.ms (%d) < min.compaction.lag.ms (%d)",
			c.MaxCompactionLag.Milliseconds(), c.MinCompactionLag.Milliseconds())
	}
	return nil
}

// normalized returns a valid config (see check) as a topic keeps it: the
// defaults filled in, whole milliseconds.
func (c TopicConfig) normalized() TopicConfig {
	c = c.normalizeCompaction()
	switch {
	case c.Retention == 0:
		c.Retention = 7 * 24 * time.Hour
	case c.Retention < 0:
		c.Retention = -1
	default:
		c.Retention = msDuration(c.retentionMs())
	}
	if c.RetentionBytes <= 0 {
		c.RetentionBytes = -1
	}
	if !c.Compact && !c.Delete {
		c.Delete = true
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = kbatch.DefaultMaxMessageBytes
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = kbatch.DefaultSegmentBytes
	}
	if c.SegmentTime == 0 {
		c.SegmentTime = msDuration(defaultSegmentMs)
	}
	c.SegmentTime = msDuration(c.segmentMs())
	return c
}

// increasingBelow reports whether vs is not empty, increasing, and in
// [0, n).
func increasingBelow(vs []int32, n int32) bool {
	for i, v := range vs {
		if v < 0 || v >= n || (i > 0 && v <= vs[i-1]) {
			return false
		}
	}
	return len(vs) > 0
}

// --- DeleteTopic --------------------------------------------------------

type deleteTopicOp struct {
	baseOp
	id uuid.UUID
}

func (o *deleteTopicOp) check(g *group) {
	if g.spec.topic(o.id) == nil {
		o.finish(kafkaerr.New(kafkaerr.UnknownTopicID, "no topic has ID %s", o.id))
		return
	}
	g.add(deleteTopicRecord{TopicID: o.id, Time: g.now})
}

// --- CommitFile ---------------------------------------------------------

// CommitFileRequest commits an uploaded WAL object: its batches get
// offsets.
type CommitFileRequest struct {
	// ObjectKey, Size and Uploader name the object, its size and the
	// broker that uploaded it.
	ObjectKey string
	Size      int64
	Uploader  int32
	// Coordinates are the object's batches, in object order, as
	// wal.Object.Encode returned them. The coordinator commits those of
	// its partitions; coordinates of unknown partitions get
	// UNKNOWN_TOPIC_OR_PARTITION.
	Coordinates []wal.Coordinate
	// Owners are the shards the object is committed to, in the order its
	// ownership passes from one to the next (a random permutation: see
	// Coordinator.CommitFile and LifecycleOptions); it must hold this shard,
	// once. Nil (or this shard alone) means this shard alone.
	Owners []int
}

type commitOp struct {
	baseOp
	req     CommitFileRequest
	results []wal.Result
}

func (o *commitOp) coords() int { return len(o.req.Coordinates) }
func (o *commitOp) need(n *needs) {
	n.keys = append(n.keys, o.req.ObjectKey)
	n.commitKeys = append(n.commitKeys, o.req.ObjectKey)
}

func (o *commitOp) check(g *group) {
	o.results = make([]wal.Result, len(o.req.Coordinates))
	if known, err := g.objectKnown(o.req.ObjectKey); err != nil || known {
		if err == nil {
			rc := g.spec.recentCommitOf(o.req.ObjectKey)
			if rc == nil && g.facts != nil {
				rc = g.facts.commits[o.req.ObjectKey]
			}
			if st, found, _ := g.facts.object(o.req.ObjectKey); rc == nil && found && !st.received {
				// Committed with no row (every batch a duplicate or
				// refused), or its rows gone since: each batch is
				// answered as checking it now says, the duplicates with
				// their offsets, and nothing is appended.
				rc = &recentCommit{time: g.now}
			}
			if rc != nil {
				o.results = retriedResults(g.spec, rc, o.req.Coordinates)
				return // answered as the first time, nothing logged
			}
			err = kafkaerr.New(kafkaerr.InvalidRequest, "object %s is already committed", o.req.ObjectKey)
		}
		o.finish(err)
		return
	}
	owners, err := checkOwners(o.req.Owners, g.shard)
	if err != nil {
		o.finish(err)
		return
	}
	if err := g.checkDeadline(o.req.ObjectKey); err != nil {
		o.finish(err)
		return
	}
	rec := commitFileRecord{
		ObjectID:   g.spec.nextObjectID,
		Key:        o.req.ObjectKey,
		Size:       o.req.Size,
		Uploader:   o.req.Uploader,
		CommitTime: g.now,
		Owners:     owners,
	}
	// Apply each accepted batch to the speculative view at once (one row,
	// one producer batch), so the next batch of the same partition or
	// producer sees it; the record carries the merged rows.
	var one commitFileRecord
	for i := range o.req.Coordinates {
		c := &o.req.Coordinates[i]
		res, row, pb, ok := checkBatch(g.spec, c, g.now)
		o.results[i] = res
		if !ok {
			continue
		}
		one = commitFileRecord{ObjectID: rec.ObjectID, CommitTime: g.now, Rows: []commitRow{row}}
		if pb != nil {
			one.Producers = []producerBatch{*pb}
			rec.Producers = append(rec.Producers, *pb)
		}
		g.spec.apply(one)
		if n := len(rec.Rows); n > 0 {
			last := &rec.Rows[n-1]
			if last.PID == row.PID && last.LastOffset+1 == row.BaseOffset && last.BytePos+last.ByteSize == row.BytePos {
				last.LastOffset = row.LastOffset
				last.ByteSize += row.ByteSize
				last.MaxTimestamp = max(last.MaxTimestamp, row.MaxTimestamp)
				continue
			}
		}
		rec.Rows = append(rec.Rows, row)
	}
	g.records = append(g.records, rec)
	g.spec.nextObjectID = max(g.spec.nextObjectID, rec.ObjectID+1)
	g.spec.pendingKeys[rec.Key] = struct{}{}
	g.spec.addRecent(rec.Key, rec.CommitTime, rec.Rows)
	g.spec.recent[rec.Key].results = o.results
}

// retriedResults answers a commit of an object already committed (its
// answer was lost: the request is retried, at the same leader or a new
// one) as the first commit was: each coordinate in a row the commit made
// gets the offset it took there; the others, which that commit did not
// append, get what checking them now says (the original offset of a
// duplicate, or an error), and are not appended now either.
func retriedResults(v *view, rc *recentCommit, coords []wal.Coordinate) []wal.Result {
	if len(rc.results) == len(coords) {
		return slices.Clone(rc.results) // decided here: the very answers
	}
	out := make([]wal.Result, len(coords))
	next := make([]int64, len(rc.rows)) // the offset of each row's next batch
	for i := range rc.rows {
		next[i] = rc.rows[i].BaseOffset
	}
	for i := range coords {
		c := &coords[i]
		res := wal.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		p := v.partition(c.TopicPartition)
		if p == nil {
			res.Err = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", c.TopicPartition)
			out[i] = res
			continue
		}
		res.LogStartOffset = p.LogStart
		row := slices.IndexFunc(rc.rows, func(w commitRow) bool {
			return w.PID == p.PID && c.Offset >= w.BytePos && c.Offset < w.BytePos+w.ByteSize
		})
		if row >= 0 {
			res.BaseOffset = next[row]
			next[row] += int64(c.NumRecords)
			if t := v.topic(p.TopicID); t != nil && t.Config.LogAppendTime {
				res.LogAppendTime = rc.time
			}
			out[i] = res
			continue
		}
		// Not appended by that commit: a duplicate then is one now; an
		// error then is one now (what the check says, or out of order).
		again, _, _, ok := checkBatch(v, c, rc.time)
		if ok {
			again.BaseOffset, again.LogAppendTime = -1, -1
			again.Err = kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "batch %d of object retried after its commit was not appended then", i)
		}
		out[i] = again
	}
	return out
}

// checkOwners checks an owners list that must hold shard once, and returns
// it as the record keeps it: nil for this shard alone.
func checkOwners(owners []int, shard int) ([]int32, error) {
	if len(owners) == 0 || (len(owners) == 1 && owners[0] == shard) {
		return nil, nil
	}
	out := make([]int32, len(owners))
	self := 0
	for i, s := range owners {
		if s < 0 || s > math.MaxInt32 || slices.Contains(owners[:i], s) {
			return nil, kafkaerr.New(kafkaerr.InvalidRequest, "owners %v are not distinct shard numbers", owners)
		}
		if s == shard {
			self++
		}
		out[i] = int32(s)
	}
	if self != 1 {
		return nil, kafkaerr.New(kafkaerr.InvalidRequest, "owners %v do not hold this shard, %d", owners, shard)
	}
	return out, nil
}

// checkDeadline refuses an object whose key says it was named longer than
// Options.CommitDeadline ago: the orphan collector may delete it (see
// OrphanOptions). Keys that are not WAL object keys under Options.Prefix
// have no time and are not checked.
func (g *group) checkDeadline(key string) error {
	if g.commitDeadline <= 0 {
		return nil
	}
	_, named, err := wal.ParseObjectKey(g.prefix, key)
	if err != nil {
		return nil
	}
	return g.checkNamed("object", key, named)
}

// checkNamed refuses, with REQUEST_TIMED_OUT, what was named (its key's
// UUIDv7 time) longer than Options.CommitDeadline ago.
func (g *group) checkNamed(what, key string, named time.Time) error {
	if g.commitDeadline <= 0 {
		return nil
	}
	if age := time.Duration(g.now-named.UnixMilli()) * time.Millisecond; age > g.commitDeadline {
		return kafkaerr.New(kafkaerr.RequestTimedOut, "%s %s was named %v ago, past the commit deadline of %v: upload it again", what, key, age, g.commitDeadline)
	}
	return nil
}

// objectKnown reports whether an object of that key is committed or on its
// way to the log.
func (g *group) objectKnown(key string) (bool, error) {
	for v := g.spec; v != nil; v = v.parent {
		if _, ok := v.pendingKeys[key]; ok {
			return true, nil
		}
	}
	_, found, err := g.facts.object(key)
	return found, err
}

// checkBatch decides one batch: Kafka's producer-state rules (docs/formats.md,
// "Producer state") and offset assignment. ok says whether it is appended;
// a duplicate of a retained batch is not, but answers success with the
// original offset.
func checkBatch(v *view, c *wal.Coordinate, now int64) (res wal.Result, row commitRow, pb *producerBatch, ok bool) {
	res = wal.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
	p := v.partition(c.TopicPartition)
	if p == nil {
		res.Err = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", c.TopicPartition)
		return res, row, nil, false
	}
	t := v.topic(p.TopicID)
	res.LogStartOffset = p.LogStart
	if c.NumRecords < 1 || c.Size < kbatch.HeaderSize {
		res.Err = kafkaerr.New(kafkaerr.InvalidRecord, "a batch of %d records in %d bytes", c.NumRecords, c.Size)
		return res, row, nil, false
	}
	if c.Transactional && c.ProducerID < 0 {
		res.Err = kafkaerr.New(kafkaerr.InvalidRecord, "a transactional batch with no producer ID")
		return res, row, nil, false
	}
	appendTime := int64(-1)
	ts := c.MaxTimestamp
	if t.Config.LogAppendTime {
		appendTime, ts = now, now
	}
	if c.ProducerID >= 0 {
		key := producerKey{p.PID, c.ProducerID}
		st := v.producer(key)
		lastSeq := kbatch.IncrementSequence(c.BaseSequence, c.NumRecords-1)
		if st != nil && st.Epoch == c.ProducerEpoch {
			for _, b := range st.Batches {
				if b.FirstSeq == c.BaseSequence && b.LastSeq == lastSeq {
					res.BaseOffset = b.LastOffset - int64(b.Count) + 1
					if t.Config.LogAppendTime {
						res.LogAppendTime = b.Timestamp
					}
					return res, row, nil, false
				}
			}
		}
		if err := checkTxnBatch(p, c); err != nil {
			res.Err = err
			return res, row, nil, false
		}
		if err := checkSequence(st, c, p); err != nil {
			res.Err = err
			return res, row, nil, false
		}
		pb = &producerBatch{
			PID: p.PID, ProducerID: c.ProducerID, Epoch: c.ProducerEpoch,
			FirstSeq: c.BaseSequence, LastSeq: lastSeq,
			LastOffset: p.HW + int64(c.NumRecords) - 1, Count: c.NumRecords, Timestamp: ts,
		}
	}
	row = commitRow{
		PID:          p.PID,
		BaseOffset:   p.HW,
		LastOffset:   p.HW + int64(c.NumRecords) - 1,
		BytePos:      c.Offset,
		ByteSize:     int64(c.Size),
		MaxTimestamp: ts,
	}
	res.BaseOffset, res.LogAppendTime = row.BaseOffset, appendTime
	return res, row, pb, true
}

// checkSequence applies Kafka's ProducerAppendInfo checks: the epoch may
// not go backwards; a new epoch starts at sequence 0 (unless the state's
// epoch is unknown); within an epoch, sequences follow on, wrapping after
// MaxInt32. A producer with no state is accepted at any sequence, as in
// Kafka 3.x.
func checkSequence(st *producerState, c *wal.Coordinate, p *partState) error {
	if st == nil {
		return nil
	}
	if c.ProducerEpoch < st.Epoch {
		return kafkaerr.New(kafkaerr.InvalidProducerEpoch, "producer %d has epoch %d, older than the current %d, in partition %d",
			c.ProducerID, c.ProducerEpoch, st.Epoch, p.PID)
	}
	if c.ProducerEpoch != st.Epoch {
		if c.BaseSequence != 0 && st.Epoch != kbatch.NoProducerEpoch {
			return kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "producer %d starts epoch %d at sequence %d, not 0",
				c.ProducerID, c.ProducerEpoch, c.BaseSequence)
		}
		return nil
	}
	if len(st.Batches) == 0 {
		return nil
	}
	last := st.Batches[len(st.Batches)-1].LastSeq
	if !(int64(c.BaseSequence) == int64(last)+1 || (c.BaseSequence == 0 && last == 1<<31-1)) {
		return kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "producer %d epoch %d sent sequence %d after %d",
			c.ProducerID, c.ProducerEpoch, c.BaseSequence, last)
	}
	return nil
}

// --- DeleteRecords ------------------------------------------------------

type deleteRecordsOp struct {
	baseOp
	tp     wal.TopicPartition
	offset int64
	lowWM  int64
}

func (o *deleteRecordsOp) check(g *group) {
	p := g.spec.partition(o.tp)
	if p == nil {
		o.finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", o.tp))
		return
	}
	off := o.offset
	if off == -1 {
		off = p.HW
	}
	if off < 0 || off > p.HW {
		o.finish(kafkaerr.New(kafkaerr.OffsetOutOfRange, "offset %d is outside [0, %d] in %s", o.offset, p.HW, o.tp))
		return
	}
	o.lowWM = max(off, p.LogStart)
	if off > p.LogStart {
		g.add(trimRecord{PID: p.PID, LogStart: off, Time: g.now})
	}
}

// --- InitProducerID -----------------------------------------------------

type initProducerIDOp struct {
	baseOp
	id int64
}

func (o *initProducerIDOp) check(g *group) {
	o.id = g.spec.nextProducerID
	g.add(initProducerIDRecord{ProducerID: o.id})
}

// --- EnforceRetention ---------------------------------------------------

// RetentionChange is one partition whose log start offset retention
// raised.
type RetentionChange struct {
	TopicPartition wal.TopicPartition
	// LogStart is the new log start offset.
	LogStart int64
}

type retentionOp struct {
	baseOp
	changes []RetentionChange
}

func (o *retentionOp) need(n *needs) { n.retention = true }

// check raises the log start of every partition to retention's cut (the
// facts: Kafka's deleteOldSegments over the committed remote segments and
// batches, oldest first, stopping at the first that stays; see
// store.retentionCuts), where it is above the speculative log start and
// not above the high watermark.
func (o *retentionOp) check(g *group) {
	if g.facts.err != nil {
		o.finish(g.facts.err)
		return
	}
	pids := make([]int64, 0, len(g.facts.cuts))
	for pid := range g.facts.cuts {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		cut := g.facts.cuts[pid]
		p := g.spec.part(pid)
		if p == nil || cut <= p.LogStart || cut > p.HW {
			continue // deleted, or trimmed further, by a pending request
		}
		g.add(trimRecord{PID: pid, LogStart: cut, Time: g.now})
		o.changes = append(o.changes, RetentionChange{
			TopicPartition: wal.TopicPartition{TopicID: p.TopicID, Partition: p.Partition},
			LogStart:       cut,
		})
	}
}

// --- ObjectsDeleted -----------------------------------------------------

type objectsDeletedOp struct {
	baseOp
	keys []string
}

func (o *objectsDeletedOp) need(n *needs) { n.keys = append(n.keys, o.keys...) }

func (o *objectsDeletedOp) check(g *group) {
	var rec objectsDeletedRecord
	for _, k := range o.keys {
		row, found, err := g.facts.object(k)
		if err != nil {
			o.finish(err)
			return
		}
		if !found || row.live > 0 {
			continue // unknown, or still live: not ours to forget
		}
		rec.ObjectIDs = append(rec.ObjectIDs, row.id)
	}
	if len(rec.ObjectIDs) > 0 {
		g.add(rec)
	}
}
