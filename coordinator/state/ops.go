package state

import (
	"context"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal/walmeta"
	"github.com/google/uuid"
)

// Op is one mutating request in the coordinator's loop. Need says what
// facts it reads from the store; Check decides it (pure: see core.go)
// against the speculative view and those facts, and adds the records it
// needs to the group; Finish answers it once the group's entry is durable
// and applied (err is nil), or when the entry failed.
type Op interface {
	Context() context.Context
	Need(n *Needs)
	Check(g *Group)
	Finish(err error)
	// Coords says how many batch coordinates the op carries, to size
	// groups.
	Coords() int
}

// BaseOp holds what every op has: its context and the channel that
// carries its answer. Only the loop's goroutine calls finish; the first
// call answers, later ones do nothing (a check that fails answers at once,
// and the loop still finishes every op of the group).
type BaseOp struct {
	Ctx      context.Context
	Done     chan error
	Finished bool
}

// NewBaseOp returns the BaseOp of a request made under ctx.
func NewBaseOp(ctx context.Context) BaseOp {
	return BaseOp{Ctx: ctx, Done: make(chan error, 1)}
}

func (o *BaseOp) Context() context.Context { return o.Ctx }

func (o *BaseOp) Coords() int { return 1 }

func (o *BaseOp) Need(*Needs) {}

func (o *BaseOp) Finish(err error) {
	if !o.Finished {
		o.Finished = true
		o.Done <- err
	}
}

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

type CreateOp struct {
	BaseOp
	Req CreatePartitionsRequest
	ID  uuid.UUID
}

func (o *CreateOp) Check(g *Group) {
	r := o.Req
	switch {
	case !legalTopicName.MatchString(r.Name) || r.Name == "." || r.Name == "..":
		o.Finish(kafkaerr.New(kafkaerr.InvalidTopicException, "topic name %q is not legal: 1 to 249 of [a-zA-Z0-9._-], not . or ..", r.Name))
		return
	case r.Partitions < 1:
		o.Finish(kafkaerr.New(kafkaerr.InvalidPartitions, "a topic needs at least 1 partition, not %d", r.Partitions))
		return
	case r.Config.Check() != nil:
		o.Finish(r.Config.Check())
		return
	case g.Spec.topicNamed(r.Name) != nil:
		o.Finish(kafkaerr.New(kafkaerr.TopicAlreadyExists, "topic %q already exists", r.Name))
		return
	case r.Assigned != nil && !increasingBelow(r.Assigned, r.Partitions):
		o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "assigned partitions %v are not increasing, at least one, in [0, %d)", r.Assigned, r.Partitions))
		return
	}
	o.ID = r.TopicID
	if o.ID == (uuid.UUID{}) {
		o.ID = uuid.New()
	} else if g.Spec.Topic(o.ID) != nil {
		o.Finish(kafkaerr.New(kafkaerr.TopicAlreadyExists, "a topic with ID %s already exists", o.ID))
		return
	}
	cfg := r.Config.Normalized()
	cfg.Partitions = r.Partitions
	g.add(CreateTopicRecord{TopicID: o.ID, Name: r.Name, Partitions: r.Partitions, FirstPID: g.Spec.NextPID, Config: cfg, Assigned: slices.Clone(r.Assigned)})
}

// Check returns the INVALID_CONFIG error of a config out of range, nil if
// it is valid.
func (c TopicConfig) Check() error {
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

// Normalized returns a valid config (see check) as a topic keeps it: the
// defaults filled in, whole milliseconds.
func (c TopicConfig) Normalized() TopicConfig {
	c = c.normalizeCompaction()
	switch {
	case c.Retention == 0:
		c.Retention = kbatch.DefaultRetentionTime
	case c.Retention < 0:
		c.Retention = -1
	default:
		c.Retention = MsDuration(c.RetentionMs())
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
		c.SegmentTime = MsDuration(DefaultSegmentMs)
	}
	c.SegmentTime = MsDuration(c.SegmentMs())
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

type DeleteTopicOp struct {
	BaseOp
	ID uuid.UUID
}

func (o *DeleteTopicOp) Check(g *Group) {
	if g.Spec.Topic(o.ID) == nil {
		o.Finish(kafkaerr.New(kafkaerr.UnknownTopicID, "no topic has ID %s", o.ID))
		return
	}
	g.add(DeleteTopicRecord{TopicID: o.ID, Time: g.Now})
}

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
	Coordinates []walmeta.Coordinate
	// Owners are the shards the object is committed to, in the order its
	// ownership passes from one to the next (a random permutation: see
	// Coordinator.CommitFile and LifecycleOptions); it must hold this shard,
	// once. Nil (or this shard alone) means this shard alone.
	Owners []int
}

type CommitOp struct {
	BaseOp
	Req CommitFileRequest
	// Pending says the object's upload may not have landed yet: the
	// commit is pending until a confirm or a void (pending.go), and its
	// offsets are not read before. (Not in the request: a pending commit
	// is never forwarded to another broker.)
	Pending bool
	Results []walmeta.Result
}

func (o *CommitOp) Coords() int { return len(o.Req.Coordinates) }

func (o *CommitOp) Need(n *Needs) {
	n.Keys = append(n.Keys, o.Req.ObjectKey)
	n.CommitKeys = append(n.CommitKeys, o.Req.ObjectKey)
}

func (o *CommitOp) Check(g *Group) {
	o.Results = make([]walmeta.Result, len(o.Req.Coordinates))
	switch known, err := g.objectKnown(o.Req.ObjectKey); {
	case err != nil:
		o.Finish(err)
		return
	case known:
		o.answerKnown(g)
		return
	}
	owners, err := checkOwners(o.Req.Owners, g.Shard)
	if err != nil {
		o.Finish(err)
		return
	}
	if err := g.checkDeadline(o.Req.ObjectKey); err != nil {
		o.Finish(err)
		return
	}
	rec := CommitFileRecord{
		ObjectID:   g.Spec.NextObjectID,
		Key:        o.Req.ObjectKey,
		Size:       o.Req.Size,
		Uploader:   o.Req.Uploader,
		CommitTime: g.Now,
		Owners:     owners,
		Pending:    o.Pending,
	}
	var undo []ProducerUndo // of a pending commit: the producers' states before it
	var seen map[ProducerKey]bool
	if rec.Pending {
		seen = map[ProducerKey]bool{}
	}
	// Apply each accepted batch to the speculative view at once (one row,
	// one producer batch), so the next batch of the same partition or
	// producer sees it; the record carries the merged rows.
	var one CommitFileRecord
	var oneRow [1]CommitRow
	var onePB [1]ProducerBatch
	for i := range o.Req.Coordinates {
		c := &o.Req.Coordinates[i]
		res, row, pb, ok := checkBatch(g.Spec, c, g.Now)
		o.Results[i] = res
		if !ok {
			continue
		}
		oneRow[0] = row
		one = CommitFileRecord{ObjectID: rec.ObjectID, CommitTime: g.Now, Rows: oneRow[:]}
		if pb != nil {
			if rec.Pending {
				undo = g.Spec.producerBefore(undo, seen, *pb)
			}
			onePB[0] = *pb
			one.Producers = onePB[:]
			rec.Producers = append(rec.Producers, *pb)
		}
		g.Spec.applyCommit(&one) // retains neither slice: the record has no key
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
	g.Records = append(g.Records, rec)
	if rec.Pending {
		g.Spec.queuePending(rec, undo)
	}
	g.Spec.NextObjectID = max(g.Spec.NextObjectID, rec.ObjectID+1)
	g.Spec.PendingKeys[rec.Key] = struct{}{}
	g.Spec.addRecent(rec.Key, rec.CommitTime, rec.Rows)
	g.Spec.Recent[rec.Key].results = o.Results
}

// answerKnown answers a commit of a key this shard already knows, and
// logs nothing: a retry of a commit (its answer lost) is answered as the
// first was; a key handed to this shard by its other owners (ReceiveOp)
// before this commit arrived takes no batch, and is refused retriably;
// any other known key (a remote segment's, a compaction's) is no object
// to commit.
func (o *CommitOp) answerKnown(g *Group) {
	key := o.Req.ObjectKey
	rc := g.Spec.recentCommitOf(key)
	if rc == nil && g.Facts != nil {
		rc = g.Facts.Commits[key]
	}
	if rc != nil {
		o.Results = retriedResults(g.Spec, rc, o.Req.Coordinates)
		return
	}
	st, found, _ := g.Facts.object(key)
	_, pendingReceived := g.Spec.pending(key)
	switch {
	case pendingReceived || found && st.Received:
		// None of its batches was appended: the producer sends them
		// again, in another object, as for a shard commit that failed.
		o.Finish(kafkaerr.New(kafkaerr.KafkaStorageError, "object %s was handed to this shard by its other owners before this commit arrived: its batches were not appended, upload them again", key))
	case found:
		// Committed with no row (every batch a duplicate or refused),
		// or its rows gone since: each batch is answered as checking it
		// now says, the duplicates with their offsets.
		o.Results = retriedResults(g.Spec, &RecentCommit{Time: g.Now}, o.Req.Coordinates)
	default:
		o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "object %s is already committed", key))
	}
}

// retriedResults answers a commit of an object already committed (its
// answer was lost: the request is retried, at the same leader or a new
// one) as the first commit was: each coordinate in a row the commit made
// gets the offset it took there; the others, which that commit did not
// append, get what checking them now says (the original offset of a
// duplicate, or an error), and are not appended now either.
func retriedResults(v *View, rc *RecentCommit, coords []walmeta.Coordinate) []walmeta.Result {
	if len(rc.results) == len(coords) {
		return slices.Clone(rc.results) // decided here: the very answers
	}
	out := make([]walmeta.Result, len(coords))
	next := make([]int64, len(rc.Rows)) // the offset of each row's next batch
	for i := range rc.Rows {
		next[i] = rc.Rows[i].BaseOffset
	}
	for i := range coords {
		c := &coords[i]
		res := walmeta.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		p := v.Partition(c.TopicPartition)
		if p == nil {
			res.Err = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", c.TopicPartition)
			out[i] = res
			continue
		}
		res.LogStartOffset = p.LogStart
		row := slices.IndexFunc(rc.Rows, func(w CommitRow) bool {
			return w.PID == p.PID && c.Offset >= w.BytePos && c.Offset < w.BytePos+w.ByteSize
		})
		if row >= 0 {
			res.BaseOffset = next[row]
			next[row] += int64(c.NumRecords)
			if t := v.Topic(p.TopicID); t != nil && t.Config.LogAppendTime {
				res.LogAppendTime = rc.Time
			}
			out[i] = res
			continue
		}
		// Not appended by that commit: a duplicate then is one now; an
		// error then is one now (what the check says, or out of order).
		again, _, _, ok := checkBatch(v, c, rc.Time)
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
func (g *Group) checkDeadline(key string) error {
	if g.CommitDeadline <= 0 {
		return nil
	}
	_, named, err := walmeta.ParseObjectKey(g.Prefix, key)
	if err != nil {
		return nil
	}
	return g.checkNamed("object", key, named)
}

// checkNamed refuses, with REQUEST_TIMED_OUT, what was named (its key's
// UUIDv7 time) longer than Options.CommitDeadline ago.
func (g *Group) checkNamed(what, key string, named time.Time) error {
	if g.CommitDeadline <= 0 {
		return nil
	}
	if age := time.Duration(g.Now-named.UnixMilli()) * time.Millisecond; age > g.CommitDeadline {
		return kafkaerr.New(kafkaerr.RequestTimedOut, "%s %s was named %v ago, past the commit deadline of %v: upload it again", what, key, age, g.CommitDeadline)
	}
	return nil
}

// objectKnown reports whether an object of that key is committed or on its
// way to the log.
func (g *Group) objectKnown(key string) (bool, error) {
	for v := g.Spec; v != nil; v = v.Parent {
		if _, ok := v.PendingKeys[key]; ok {
			return true, nil
		}
	}
	_, found, err := g.Facts.object(key)
	return found, err
}

// checkBatch decides one batch: Kafka's producer-state rules (docs/formats.md,
// "Producer state") and offset assignment. ok says whether it is appended;
// a duplicate of a retained batch is not, but answers success with the
// original offset.
func checkBatch(v *View, c *walmeta.Coordinate, now int64) (res walmeta.Result, row CommitRow, pb *ProducerBatch, ok bool) {
	res = walmeta.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
	p := v.Partition(c.TopicPartition)
	if p == nil {
		res.Err = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", c.TopicPartition)
		return res, row, nil, false
	}
	t := v.Topic(p.TopicID)
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
		key := ProducerKey{p.PID, c.ProducerID}
		st := v.Producer(key)
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
		pb = &ProducerBatch{
			PID: p.PID, ProducerID: c.ProducerID, Epoch: c.ProducerEpoch,
			FirstSeq: c.BaseSequence, LastSeq: lastSeq,
			LastOffset: p.HW + int64(c.NumRecords) - 1, Count: c.NumRecords, Timestamp: ts,
		}
	}
	row = CommitRow{
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
func checkSequence(st *ProducerState, c *walmeta.Coordinate, p *PartState) error {
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

type DeleteRecordsOp struct {
	BaseOp
	TP     walmeta.TopicPartition
	Offset int64
	LowWM  int64
}

func (o *DeleteRecordsOp) Check(g *Group) {
	p := g.Spec.Partition(o.TP)
	if p == nil {
		o.Finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", o.TP))
		return
	}
	off, hw := o.Offset, p.Visible()
	if off == -1 {
		off = hw
	}
	if off < 0 || off > hw {
		o.Finish(kafkaerr.New(kafkaerr.OffsetOutOfRange, "offset %d is outside [0, %d] in %s", o.Offset, hw, o.TP))
		return
	}
	o.LowWM = max(off, p.LogStart)
	if off > p.LogStart {
		g.add(TrimRecord{PID: p.PID, LogStart: off, Time: g.Now})
	}
}

type InitProducerIDOp struct {
	BaseOp
	ID int64
}

func (o *InitProducerIDOp) Check(g *Group) {
	o.ID = nextProducerID(g)
	g.add(InitProducerIDRecord{ProducerID: o.ID})
}

// producerIDShift places each shard's producer IDs in a range of their
// own: shard s gives IDs from s << producerIDShift on. Shard 0 gives the
// idempotent producers' IDs (InitProducerId with no transactional ID)
// and those of the transactional IDs it coordinates; every other shard
// those of its transactional IDs. Were the shards to count from 0 alike,
// a transactional producer of shard 1 could get the ID of an idempotent
// one, and a partition would take its batches for the other's (a
// sequence already written: a duplicate, acknowledged and dropped). The
// simulation found that (internal/sim). 2^48 IDs a shard is more than
// any cluster hands out.
const producerIDShift = 48

// nextProducerID is the producer ID this shard gives next: its counter,
// raised to the start of its range (a shard that counted from 0 before
// the ranges jumps there).
func nextProducerID(g *Group) int64 {
	return max(g.Spec.NextProducerID, int64(g.Shard)<<producerIDShift)
}

// inShardRange reports whether producer ID id is in the range of g's
// shard (see producerIDShift).
func inShardRange(g *Group, id int64) bool {
	return id>>producerIDShift == int64(g.Shard)
}

// RetentionChange is one partition whose log start offset retention
// raised.
type RetentionChange struct {
	TopicPartition walmeta.TopicPartition
	// LogStart is the new log start offset.
	LogStart int64
}

type RetentionOp struct {
	BaseOp
	Changes []RetentionChange
}

func (o *RetentionOp) Need(n *Needs) { n.Retention = true }

// Check raises the log start of every partition to retention's cut (the
// facts: Kafka's deleteOldSegments over the committed remote segments and
// batches, oldest first, stopping at the first that stays; see
// store.retentionCuts), where it is above the speculative log start and
// not above the visible high watermark.
func (o *RetentionOp) Check(g *Group) {
	if g.Facts.Err != nil {
		o.Finish(g.Facts.Err)
		return
	}
	pids := make([]int64, 0, len(g.Facts.Cuts))
	for pid := range g.Facts.Cuts {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		cut := g.Facts.Cuts[pid]
		p := g.Spec.Part(pid)
		if p == nil || cut <= p.LogStart || cut > p.Visible() {
			continue // deleted, or trimmed further, by a pending request
		}
		g.add(TrimRecord{PID: pid, LogStart: cut, Time: g.Now})
		o.Changes = append(o.Changes, RetentionChange{
			TopicPartition: walmeta.TopicPartition{TopicID: p.TopicID, Partition: p.Partition},
			LogStart:       cut,
		})
	}
}

type ObjectsDeletedOp struct {
	BaseOp
	Keys []string
}

func (o *ObjectsDeletedOp) Need(n *Needs) { n.Keys = append(n.Keys, o.Keys...) }

func (o *ObjectsDeletedOp) Check(g *Group) {
	var rec ObjectsDeletedRecord
	for _, k := range o.Keys {
		row, found, err := g.Facts.object(k)
		if err != nil {
			o.Finish(err)
			return
		}
		if !found || row.Live > 0 {
			continue // unknown, or still live: not ours to forget
		}
		rec.ObjectIDs = append(rec.ObjectIDs, row.ID)
	}
	if len(rec.ObjectIDs) > 0 {
		g.add(rec)
	}
}
