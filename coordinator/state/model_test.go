package state

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/scram"
	"github.com/diskless-go/diskless/wal"
)

// The model test of the pure core, with no SQLite and no log: random
// requests of every op type are decided in groups against the
// speculative view (one request a group, or several: the action
// "together"), several groups may be decided before the first is applied
// (as the coordinator's loop pipelines them), and every answer, and the
// committed view after each apply, must agree with a plain model of what
// the coordinator must do (maps and slices, in this file and the other
// model_*_test.go files). After each apply the model the view is checked
// against is the one the applied group left (the model is updated as
// each request is decided, and its expectations are kept with the
// group). The facts a decision reads from the store come from the rig's
// record of what was applied (the object rows as the model had them when
// the last applied group was decided), or, for retention's cuts,
// compaction's fingerprints and the objects the lifecycle forgets, from
// the model with nothing pending. Group offsets and metadata, which the
// view does not hold, are checked as the rows the applied records write.
// At the end, applying every entry again, decoded from its log encoding,
// to a new view must give the same view: applying is a function of the
// view and the records. TestEveryOpModelled (ops_modelled_test.go)
// requires an action for every op type of the package.

const (
	mPrefix   = "p/"
	mDeadline = 60 * time.Second
	mStart    = int64(1_764_500_000_000)
	mShard    = 0
)

// exercised counts, by op type (a TxnRequestOp by its kind too), the ops
// the model test decided: TestEveryOpModelled requires each.
var exercised = map[string]int{}

func opName(o Op) string {
	n := reflect.TypeOf(o).Elem().Name()
	if t, ok := o.(*TxnRequestOp); ok {
		n += "/" + txnOpNames[t.Req.Op]
	}
	return n
}

var txnOpNames = map[TxnOp]string{TxnInit: "TxnInit", TxnAddPartitions: "TxnAddPartitions", TxnAddGroup: "TxnAddGroup",
	TxnCommitOffsets: "TxnCommitOffsets", TxnEnd: "TxnEnd", TxnComplete: "TxnComplete"}

// ---- The model: what the coordinator must do, as plainly as possible.

type mBatch struct {
	firstSeq, lastSeq int32
	base              int64
	count             int32
	ts                int64
}

type mProducer struct {
	epoch   int16
	batches []mBatch // all accepted in the epoch, newest last; the last 5 count
}

func (p *mProducer) recent() []mBatch { return p.batches[max(0, len(p.batches)-5):] }

type mRun struct {
	base, last int64
	key        string
	pos, size  int64
	maxTs      int64
}

type mSeg struct {
	base, end   int64
	key         string
	maxTs, size int64
}

type mOpen struct {
	producer int64
	epoch    int16
	first    int64
}

type mPart struct {
	hw, logStart, disklessStart int64
	runs                        []mRun // live batches, oldest first
	segs                        []mSeg // live remote segments, oldest first
	producers                   map[int64]*mProducer
	open                        []mOpen // open transactions, oldest first
	cleanedTo, compactions      int64
}

func (p *mPart) openOf(producer int64) int {
	return slices.IndexFunc(p.open, func(o mOpen) bool { return o.producer == producer })
}

type mTopic struct {
	id      uuid.UUID
	name    string
	cfg     TopicConfig
	parts   []*mPart // nil: a partition another shard serves
	deleted bool
}

// mObject is an object row: a WAL object, a compacted object, a remote
// segment, or one received.
type mObject struct {
	group     int // the group (by decide order) that made the row
	owners    []int32
	received  bool
	forgotten int // the group that forgot it (ObjectsDeleted), 0 if none
	deadAt    int64
}

type mMeta struct {
	gen   int64
	value []byte
}

// mCommit is a commit accepted, for retries.
type mCommit struct {
	key      string
	coords   []wal.Coordinate
	results  []wal.Result
	appended []bool
	time     int64
}

type model struct {
	now         int64
	topics      []*mTopic
	objects     map[string]*mObject
	commits     []*mCommit
	producerIDs []int64 // every producer ID given, in order
	claims      map[string]int64
	offsets     map[string]map[GroupPartition]GroupOffset
	meta        map[string]mMeta
	txns        map[string]*Transaction
	creds       map[ScramKey]scram.Credential
	acls        map[acl.Binding]bool
	secVersion  int64
	quotas      map[QuotaKey]float64
	quotaVer    int64
	keys        int
	applied     int      // groups applied (the rig's count)
	keyOrder    []string // the objects' keys, first made first (for drawing)
}

// addObject makes (or makes again) the row of an object.
func (m *model) addObject(key string, o *mObject) {
	if m.objects[key] == nil {
		m.keyOrder = append(m.keyOrder, key)
	}
	m.objects[key] = o
}

func newModel() *model {
	return &model{now: mStart, objects: map[string]*mObject{}, claims: map[string]int64{},
		offsets: map[string]map[GroupPartition]GroupOffset{}, meta: map[string]mMeta{}, txns: map[string]*Transaction{},
		creds: map[ScramKey]scram.Credential{}, acls: map[acl.Binding]bool{}, quotas: map[QuotaKey]float64{}}
}

func (m *model) topic(id uuid.UUID) *mTopic {
	for _, t := range m.topics {
		if t.id == id && !t.deleted {
			return t
		}
	}
	return nil
}

func (m *model) topicNamed(name string) *mTopic {
	for _, t := range m.topics {
		if t.name == name && !t.deleted {
			return t
		}
	}
	return nil
}

func (m *model) part(tp wal.TopicPartition) *mPart {
	t := m.topic(tp.TopicID)
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.parts) {
		return nil
	}
	return t.parts[tp.Partition]
}

// liveParts calls f with every partition of a live topic this shard
// serves.
func (m *model) liveParts(f func(t *mTopic, i int32, p *mPart)) {
	for _, t := range m.topics {
		if t.deleted {
			continue
		}
		for i, p := range t.parts {
			if p != nil {
				f(t, int32(i), p)
			}
		}
	}
}

// live counts each object's live references: runs and remote segments
// of live partitions.
func (m *model) live() map[string]int64 {
	n := map[string]int64{}
	m.liveParts(func(_ *mTopic, _ int32, p *mPart) {
		for _, r := range p.runs {
			n[r.key]++
		}
		for _, s := range p.segs {
			n[s.key]++
		}
	})
	return n
}

// known reports whether an object of that key has a row (or is on its
// way to one): its row stays until the group that forgets it is applied.
func (m *model) known(key string) bool {
	o := m.objects[key]
	return o != nil && (o.forgotten == 0 || o.forgotten > m.applied)
}

func (m *model) newKey(age int64) string {
	m.keys++
	return wal.NewObjectKey(mPrefix, time.UnixMilli(m.now-age))
}

// normalized is a valid config as a topic keeps it: Kafka's defaults
// filled in.
func normalized(c TopicConfig, partitions int32) TopicConfig {
	switch {
	case c.Retention == 0:
		c.Retention = 7 * 24 * time.Hour
	case c.Retention < 0:
		c.Retention = -1
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
		c.SegmentTime = 7 * 24 * time.Hour
	}
	c.Partitions = partitions
	return c
}

// configErr is the error of a config the model's generator makes.
func configErr(c TopicConfig) kafkaerr.Code {
	if c.MaxMessageBytes < 0 || (c.MaxCompactionLag > 0 && c.MinCompactionLag > c.MaxCompactionLag) {
		return kafkaerr.InvalidConfig
	}
	return kafkaerr.NoError
}

// commit is the model's CommitFile of a new object.
func (m *model) commit(key string, coords []wal.Coordinate) ([]wal.Result, []bool) {
	out := make([]wal.Result, len(coords))
	appended := make([]bool, len(coords))
	var prev *mRun
	var prevPart *mPart
	for i, c := range coords {
		res := wal.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		out[i] = res
		t := m.topic(c.TopicID)
		p := m.part(c.TopicPartition)
		if p == nil {
			out[i].Err = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "")
			continue
		}
		res.LogStartOffset = p.logStart
		if c.NumRecords < 1 || c.Size < kbatch.HeaderSize || (c.Transactional && c.ProducerID < 0) {
			res.Err = kafkaerr.New(kafkaerr.InvalidRecord, "")
			out[i] = res
			continue
		}
		ts, appendTime := c.MaxTimestamp, int64(-1)
		if t.cfg.LogAppendTime {
			ts, appendTime = m.now, m.now
		}
		lastSeq := kbatch.IncrementSequence(c.BaseSequence, c.NumRecords-1)
		if c.ProducerID >= 0 {
			st := p.producers[c.ProducerID]
			if st != nil && st.epoch == c.ProducerEpoch {
				dup := slices.IndexFunc(st.recent(), func(b mBatch) bool { return b.firstSeq == c.BaseSequence && b.lastSeq == lastSeq })
				if dup >= 0 {
					b := st.recent()[dup]
					res.BaseOffset = b.base
					if t.cfg.LogAppendTime {
						res.LogAppendTime = b.ts
					}
					out[i] = res
					continue
				}
			}
			open := p.openOf(c.ProducerID)
			switch {
			case !c.Transactional && open >= 0:
				res.Err = kafkaerr.New(kafkaerr.InvalidTxnState, "")
			case c.Transactional && open < 0:
				res.Err = kafkaerr.New(kafkaerr.InvalidTxnState, "")
			case c.Transactional && p.open[open].epoch != c.ProducerEpoch:
				res.Err = kafkaerr.New(kafkaerr.InvalidProducerEpoch, "")
			case st == nil:
			case c.ProducerEpoch < st.epoch:
				res.Err = kafkaerr.New(kafkaerr.InvalidProducerEpoch, "")
			case c.ProducerEpoch != st.epoch:
				if c.BaseSequence != 0 && st.epoch != -1 {
					res.Err = kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "")
				}
			case len(st.batches) > 0 && c.BaseSequence != kbatch.IncrementSequence(st.batches[len(st.batches)-1].lastSeq, 1):
				res.Err = kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "")
			}
			if res.Err != nil {
				out[i] = res
				continue
			}
			if st == nil || st.epoch != c.ProducerEpoch {
				st = &mProducer{epoch: c.ProducerEpoch}
				p.producers[c.ProducerID] = st
			}
			st.batches = append(st.batches, mBatch{firstSeq: c.BaseSequence, lastSeq: lastSeq, base: p.hw, count: c.NumRecords, ts: ts})
			if open >= 0 && p.open[open].first < 0 {
				p.open[open].first = p.hw
			}
		}
		res.BaseOffset, res.LogAppendTime = p.hw, appendTime
		last := p.hw + int64(c.NumRecords) - 1
		if prev != nil && prevPart == p && prev.last+1 == p.hw && prev.pos+prev.size == c.Offset {
			prev.last = last
			prev.size += int64(c.Size)
			prev.maxTs = max(prev.maxTs, ts)
		} else {
			p.runs = append(p.runs, mRun{base: p.hw, last: last, key: key, pos: c.Offset, size: int64(c.Size), maxTs: ts})
			prev, prevPart = &p.runs[len(p.runs)-1], p
		}
		p.hw = last + 1
		out[i], appended[i] = res, true
	}
	return out, appended
}

// trim is DeleteRecords and retention: runs and remote segments wholly
// before logStart go.
func (m *model) trim(p *mPart, logStart int64) {
	if logStart <= p.logStart {
		return
	}
	p.logStart = logStart
	p.disklessStart = max(p.disklessStart, logStart)
	for len(p.runs) > 0 && p.runs[0].last < logStart {
		p.runs = p.runs[1:]
	}
	for len(p.segs) > 0 && p.segs[0].end < logStart {
		p.segs = p.segs[1:]
	}
}

// retentionCut is where retention.ms and retention.bytes raise the
// partition's log start to, over its remote segments and batches.
func (m *model) retentionCut(t *mTopic, p *mPart) int64 {
	retMs := t.cfg.Retention.Milliseconds()
	if t.cfg.Retention < 0 {
		retMs = 1 << 62
	}
	var all []mRun
	for _, s := range p.segs {
		all = append(all, mRun{last: s.end, size: s.size, maxTs: s.maxTs})
	}
	all = append(all, p.runs...)
	var bytes int64
	for _, r := range all {
		bytes += r.size
	}
	excess := int64(-1)
	if t.cfg.RetentionBytes >= 0 {
		excess = bytes - t.cfg.RetentionBytes
	}
	start := p.logStart
	for _, r := range all {
		if !(r.maxTs < m.now-retMs) && !(excess >= 0 && excess-r.size >= 0) {
			break
		}
		excess -= r.size
		start = r.last + 1
	}
	return start
}

// ---- The expected state after a group: what the committed view (and
// the rows the store writes) must hold once the group is applied.

type expTopic struct {
	name       string
	partitions int32
	cfg        TopicConfig
	served     []bool
}

type expPart struct {
	offsets   [6]int64 // log start, diskless start, HW, remote end, cleaned to, compactions
	open      []OpenTxn
	producers map[int64]ProducerState
}

type expected struct {
	topics     map[uuid.UUID]expTopic
	parts      map[wal.TopicPartition]expPart
	txns       map[string]Transaction
	claims     map[string]int64
	offsets    map[string]map[GroupPartition]GroupOffset
	meta       map[string]mMeta
	creds      map[ScramKey]scram.Credential
	acls       map[acl.Binding]bool
	secVersion int64
	quotas     map[QuotaKey]float64
	quotaVer   int64
	// objects are the object rows, the store's facts.
	objects map[string]ObjectState
}

func (m *model) expect(ids map[string]int64) *expected {
	e := &expected{topics: map[uuid.UUID]expTopic{}, parts: map[wal.TopicPartition]expPart{}, txns: map[string]Transaction{},
		claims: map[string]int64{}, offsets: map[string]map[GroupPartition]GroupOffset{}, meta: map[string]mMeta{},
		creds: map[ScramKey]scram.Credential{}, acls: map[acl.Binding]bool{}, secVersion: m.secVersion, objects: map[string]ObjectState{},
		quotas: maps.Clone(m.quotas), quotaVer: m.quotaVer}
	for _, t := range m.topics {
		if t.deleted {
			continue
		}
		et := expTopic{name: t.name, partitions: int32(len(t.parts)), cfg: t.cfg}
		for _, p := range t.parts {
			et.served = append(et.served, p != nil)
		}
		e.topics[t.id] = et
	}
	m.liveParts(func(t *mTopic, i int32, p *mPart) {
		remoteEnd := int64(-1)
		if len(p.segs) > 0 {
			remoteEnd = p.segs[len(p.segs)-1].end
		}
		ep := expPart{offsets: [6]int64{p.logStart, p.disklessStart, p.hw, remoteEnd, p.cleanedTo, p.compactions}, producers: map[int64]ProducerState{}}
		for _, o := range p.open {
			ep.open = append(ep.open, OpenTxn{ProducerID: o.producer, Epoch: o.epoch, First: o.first})
		}
		for id, st := range p.producers {
			ps := ProducerState{Epoch: st.epoch}
			for _, b := range st.recent() {
				ps.Batches = append(ps.Batches, BatchMeta{FirstSeq: b.firstSeq, LastSeq: b.lastSeq, LastOffset: b.base + int64(b.count) - 1, Count: b.count, Timestamp: b.ts})
			}
			ep.producers[id] = ps
		}
		e.parts[wal.TopicPartition{TopicID: t.id, Partition: i}] = ep
	})
	for id, t := range m.txns {
		e.txns[id] = normTxn(*t)
	}
	for g, c := range m.claims {
		e.claims[g] = c
	}
	for g, offs := range m.offsets {
		if len(offs) > 0 {
			e.offsets[g] = map[GroupPartition]GroupOffset{}
			for k, v := range offs {
				e.offsets[g][k] = v
			}
		}
	}
	for g, v := range m.meta {
		e.meta[g] = v
	}
	for k, c := range m.creds {
		e.creds[k] = c
	}
	for b := range m.acls {
		e.acls[b] = true
	}
	live := m.live()
	for k, o := range m.objects {
		if o.forgotten == 0 {
			e.objects[k] = ObjectState{ID: ids[k], Live: live[k], DeadAt: o.deadAt, Owners: o.owners, Received: o.received}
		}
	}
	return e
}

// normTxn returns t with empty lists nil, for comparing.
func normTxn(t Transaction) Transaction {
	if len(t.Partitions) == 0 {
		t.Partitions = nil
	}
	if len(t.Groups) == 0 {
		t.Groups = nil
	}
	if len(t.Offsets) == 0 {
		t.Offsets = nil
	}
	t.Partitions, t.Groups, t.Offsets = slices.Clone(t.Partitions), slices.Clone(t.Groups), slices.Clone(t.Offsets)
	return t
}

// storeRows are the rows of group offsets and metadata that the applied
// records write (the store's tables; the view does not hold them).
type storeRows struct {
	offsets map[string]map[GroupPartition]GroupOffset
	meta    map[string]mMeta
}

func (s *storeRows) apply(recs []Record) {
	for _, r := range recs {
		switch r := r.(type) {
		case OffsetCommitRecord:
			if s.offsets[r.Group] == nil {
				s.offsets[r.Group] = map[GroupPartition]GroupOffset{}
			}
			for _, o := range r.Offsets {
				o.CommitTime = r.Time
				s.offsets[r.Group][GroupPartition{o.Topic, o.Partition}] = o
			}
		case OffsetDeleteRecord:
			if r.Partitions == nil {
				delete(s.offsets, r.Group)
				continue
			}
			for _, p := range r.Partitions {
				delete(s.offsets[r.Group], p)
			}
			if len(s.offsets[r.Group]) == 0 {
				delete(s.offsets, r.Group)
			}
		case GroupMetadataRecord:
			switch cur, ok := s.meta[r.Group]; {
			case len(r.Value) == 0:
				delete(s.meta, r.Group)
			case !ok || cur.gen <= r.Generation:
				s.meta[r.Group] = mMeta{gen: r.Generation, value: r.Value}
			}
		}
	}
}

// checkView requires that the committed view (and the store's rows) hold
// what the model expects.
func checkView(t require.TestingT, root *View, store *storeRows, e *expected) {
	require.Len(t, root.Topics, len(e.topics), "topics")
	require.Len(t, root.Names, len(e.topics), "topic names")
	for id, et := range e.topics {
		got := root.Topics[id]
		require.NotNil(t, got, "topic %s", et.name)
		require.Equal(t, et.name, got.Name)
		require.Same(t, got, root.Names[et.name])
		require.Equal(t, et.partitions, got.Partitions, "partitions of %s", et.name)
		require.Equal(t, et.cfg, got.Config, "config of %s", et.name)
		for i, s := range et.served {
			require.Equal(t, s, got.Serves(int32(i)), "%s/%d served", et.name, i)
		}
	}
	require.Len(t, root.Parts, len(e.parts), "partitions")
	pids := map[int64]bool{}
	producers := 0
	for tp, ep := range e.parts {
		p := root.Partition(tp)
		require.NotNil(t, p, "partition %s", tp)
		require.False(t, pids[p.PID], "PID %d twice", p.PID)
		pids[p.PID] = true
		require.Equal(t, ep.offsets, [6]int64{p.LogStart, p.DisklessStart, p.HW, p.RemoteEnd, p.CleanedTo, p.Compactions},
			"log start, diskless start, HW, remote end, cleaned to, compactions of %s", tp)
		require.Equal(t, ep.open, nilIfEmpty(p.Open), "open transactions of %s", tp)
		for id, ps := range ep.producers {
			got := root.Producers[ProducerKey{p.PID, id}]
			require.NotNil(t, got, "producer %d in %s", id, tp)
			require.Equal(t, ps.Epoch, got.Epoch, "epoch of producer %d in %s", id, tp)
			require.Equal(t, ps.Batches, nilIfEmpty(got.Batches), "batches of producer %d in %s", id, tp)
		}
		producers += len(ep.producers)
	}
	require.Len(t, root.Producers, producers, "producer states")
	require.Len(t, root.Txns, len(e.txns), "transactions")
	for id, tx := range e.txns {
		require.NotNil(t, root.Txns[id], "transaction %q", id)
		require.Equal(t, tx, normTxn(*root.Txns[id]), "transaction %q", id)
	}
	require.Equal(t, e.claims, root.Claims, "group claims")
	require.Equal(t, e.offsets, store.offsets, "group offsets")
	require.Equal(t, e.meta, store.meta, "group metadata")
	require.Len(t, root.Creds, len(e.creds), "SCRAM credentials")
	for k, c := range e.creds {
		require.NotNil(t, root.Creds[k], "credential %v", k)
		require.Equal(t, c, *root.Creds[k], "credential %v", k)
	}
	require.Equal(t, e.acls, root.ACLs, "ACLs")
	require.Equal(t, e.secVersion, root.SecurityVersion, "security version")
	require.Equal(t, e.quotas, root.Quotas, "client quotas")
	require.Equal(t, e.quotaVer, root.QuotaVersion, "quota version")
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// ---- The rig: the core driven as the loop drives it, its I/O replaced
// by memory.

type pendingGroup struct {
	recs []Record
	exp  *expected // the model once the group is applied
}

type rig struct {
	root, spec *View
	pending    []pendingGroup
	applied    [][]byte
	objects    map[string]ObjectState // the committed object rows
	ids        map[string]int64       // object IDs, by key
	store      *storeRows
	decided    int // groups decided
	done       int // groups applied
	// joint, when not nil, is the group being decided: the ops decided
	// go into it (the action "together").
	joint *Group
	// factsErr, when not nil, is why the facts could not be read.
	factsErr error
}

func newRig() *rig {
	r := &rig{root: NewView(nil), objects: map[string]ObjectState{}, ids: map[string]int64{},
		store: &storeRows{offsets: map[string]map[GroupPartition]GroupOffset{}, meta: map[string]mMeta{}}}
	r.spec = NewView(r.root)
	return r
}

// seal records what the model expects once the last group decided is
// applied (the actions update the model right after deciding).
func (r *rig) seal(m *model) {
	if n := len(r.pending); n > 0 && r.pending[n-1].exp == nil {
		r.pending[n-1].exp = m.expect(r.ids)
	}
}

// decide decides one group of ops at the model's time, and finishes every
// op as the loop does once the group is durable (an op refused keeps its
// error). The facts are the committed object rows of the keys the ops
// need, and cuts and prints when given.
func (r *rig) decide(m *model, cuts map[int64]int64, prints map[[3]int64]uint64, ops ...Op) []Record {
	if r.joint == nil {
		r.seal(m)
	}
	n := Needs{Prefix: mPrefix}
	for _, o := range ops {
		o.Need(&n)
		exercised[opName(o)]++
	}
	f := &Facts{Objects: map[string]ObjectState{}, Cuts: cuts, Prints: prints, Err: r.factsErr}
	for _, k := range n.Keys {
		if st, ok := r.objects[k]; ok {
			f.Objects[k] = st
		}
	}
	g := r.joint
	if g == nil {
		g = &Group{Shard: mShard, Prefix: mPrefix, CommitDeadline: mDeadline, Spec: r.spec, Now: m.now}
	}
	g.Facts = f
	start := len(g.Records)
	for _, o := range ops {
		o.Check(g)
	}
	for _, o := range ops {
		o.Finish(nil)
	}
	recs := g.Records[start:]
	for _, rec := range recs {
		switch rec := rec.(type) {
		case CommitFileRecord:
			r.ids[rec.Key] = rec.ObjectID
		case CompactRecord:
			r.ids[rec.Key] = rec.ObjectID
		case RemoteSegmentRecord:
			r.ids[rec.Key] = rec.ObjectID
		case OwnershipRecord:
			if rec.ObjectID >= 0 {
				r.ids[rec.Key] = rec.ObjectID
			}
		}
	}
	if r.joint == nil {
		r.decided++
		r.pending = append(r.pending, pendingGroup{recs: g.Records})
	}
	return recs
}

// together decides the ops of f in one group.
func (r *rig) together(m *model, f func()) {
	r.seal(m)
	r.decided++
	r.joint = &Group{Shard: mShard, Prefix: mPrefix, CommitDeadline: mDeadline, Spec: r.spec, Now: m.now}
	defer func() {
		r.pending = append(r.pending, pendingGroup{recs: r.joint.Records})
		r.joint = nil
	}()
	f()
}

// applyOne applies the oldest pending group, as its entry became durable,
// and checks the committed view against what the model expected then.
func (r *rig) applyOne(t *rapid.T, m *model) {
	r.seal(m)
	pg := r.pending[0]
	r.pending = r.pending[1:]
	e := ApplyEntry(r.root, pg.recs)
	require.Len(t, e.Skip, len(pg.recs))
	// Decided against the committed view and the groups before it, in
	// order, every record changes something.
	require.NotContains(t, e.Skip, true, "records skipped: %v of %+v", e.Skip, pg.recs)
	if len(pg.recs) > 0 {
		r.applied = append(r.applied, AppendEntry(nil, Entry{Records: pg.recs}))
	}
	r.store.apply(pg.recs)
	r.objects = pg.exp.objects
	r.done++
	m.applied = r.done
	r.spec = NewView(r.root)
	for _, g := range r.pending {
		for _, rec := range g.recs {
			r.spec.Apply(rec)
		}
	}
	checkView(t, r.root, r.store, pg.exp)
}

func (r *rig) flush(t *rapid.T, m *model) {
	for len(r.pending) > 0 {
		r.applyOne(t, m)
	}
}

// requireSameView checks that two committed views hold the same state.
func requireSameView(t require.TestingT, want, got *View) {
	require.Equal(t, want.Epoch, got.Epoch)
	require.Equal(t, [3]int64{want.NextPID, want.NextObjectID, want.NextProducerID}, [3]int64{got.NextPID, got.NextObjectID, got.NextProducerID})
	require.Equal(t, len(want.Topics), len(got.Topics))
	for id, tw := range want.Topics {
		require.NotNil(t, got.Topics[id], "topic %s", id)
		require.Equal(t, *tw, *got.Topics[id])
	}
	require.Equal(t, len(want.Parts), len(got.Parts))
	for pid, pw := range want.Parts {
		require.NotNil(t, got.Parts[pid], "partition %d", pid)
		require.Equal(t, *pw, *got.Parts[pid], "partition %d", pid)
	}
	require.Equal(t, len(want.Producers), len(got.Producers))
	for k, pw := range want.Producers {
		require.NotNil(t, got.Producers[k], "producer %v", k)
		require.Equal(t, pw.Epoch, got.Producers[k].Epoch, "producer %v", k)
		require.Equal(t, nilIfEmpty(pw.Batches), nilIfEmpty(got.Producers[k].Batches), "producer %v", k)
	}
	require.Equal(t, len(want.Txns), len(got.Txns))
	for id, tw := range want.Txns {
		require.NotNil(t, got.Txns[id], "transaction %q", id)
		// A transaction record does not carry the commit time of the
		// offsets committed in it (the end stamps them): a view replayed
		// has 0 where the leader's has the time of TxnOffsetCommit.
		w, g := normTxn(*tw), normTxn(*got.Txns[id])
		for i := range w.Offsets {
			w.Offsets[i].CommitTime = 0
		}
		require.Equal(t, w, g, "transaction %q", id)
	}
	require.Equal(t, want.Claims, got.Claims)
	require.Equal(t, want.Creds, got.Creds)
	require.Equal(t, want.ACLs, got.ACLs)
	require.Equal(t, want.SecurityVersion, got.SecurityVersion)
	require.Equal(t, want.Quotas, got.Quotas)
	require.Equal(t, want.QuotaVersion, got.QuotaVersion)
}

// ---- The test.

// modelRun is one run of the model test: the model, the rig, and the
// actions' shared helpers.
type modelRun struct {
	m   *model
	r   *rig
	ctx context.Context
	// newProducerID checks a producer ID given and records it.
	newProducerID func(t *rapid.T, id int64)
}

func (s *modelRun) base() BaseOp { return NewBaseOp(s.ctx) }

// decide decides ops as one group.
func (s *modelRun) decide(ops ...Op) []Record { return s.r.decide(s.m, nil, nil, ops...) }

// anyTP draws a partition: mostly of a topic the model has (deleted ones
// too), sometimes of none.
func (s *modelRun) anyTP(t *rapid.T) wal.TopicPartition {
	m := s.m
	if len(m.topics) == 0 || rapid.IntRange(0, 20).Draw(t, "unknownTopic") == 0 {
		return wal.TopicPartition{TopicID: uuid.New(), Partition: 0}
	}
	var live []wal.TopicPartition
	m.liveParts(func(tp *mTopic, i int32, _ *mPart) {
		live = append(live, wal.TopicPartition{TopicID: tp.id, Partition: i})
	})
	if len(live) > 0 && rapid.IntRange(0, 3).Draw(t, "anyPartition") > 0 {
		return rapid.SampledFrom(live).Draw(t, "livePartition")
	}
	tp := rapid.SampledFrom(m.topics).Draw(t, "topic")
	return wal.TopicPartition{TopicID: tp.id, Partition: rapid.Int32Range(0, int32(len(tp.parts))).Draw(t, "partition")}
}

// livePart draws a partition this shard serves, or skips.
func (s *modelRun) livePart(t *rapid.T) (wal.TopicPartition, *mPart) {
	var tps []wal.TopicPartition
	s.m.liveParts(func(tp *mTopic, i int32, _ *mPart) {
		tps = append(tps, wal.TopicPartition{TopicID: tp.id, Partition: i})
	})
	if len(tps) == 0 {
		t.Skip("no partitions")
	}
	tp := rapid.SampledFrom(tps).Draw(t, "livePartition")
	return tp, s.m.part(tp)
}

func errCode(err error) kafkaerr.Code { return kafkaerr.CodeOf(err) }

func TestCoreModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := &modelRun{m: newModel(), r: newRig(), ctx: context.Background()}
		actions := map[string]func(*rapid.T){
			"tick": func(rt *rapid.T) {
				s.m.now += rapid.Int64Range(0, 20000).Draw(rt, "advance")
			},
			"apply": func(rt *rapid.T) {
				if len(s.r.pending) == 0 {
					rt.Skip("nothing pending")
				}
				s.r.applyOne(rt, s.m)
			},
			"applyAll": func(rt *rapid.T) { s.r.flush(rt, s.m) },
		}
		s.topicActions(actions)
		s.dataActions(actions)
		s.objectActions(actions)
		s.groupActions(actions)
		s.securityActions(actions)
		s.quotaActions(actions)
		s.txnActions(actions)
		// Several requests decided in one group, each seeing the
		// others before it.
		var alone []string
		for name := range actions {
			switch name {
			case "tick", "apply", "applyAll", "retention", "compact", "objectsDeleted":
			default:
				alone = append(alone, name)
			}
		}
		slices.Sort(alone)
		actions["together"] = func(rt *rapid.T) {
			s.r.together(s.m, func() {
				for range rapid.IntRange(2, 4).Draw(rt, "requests") {
					actions[rapid.SampledFrom(alone).Draw(rt, "request")](rt)
				}
			})
		}
		s.setup(rt, actions)
		for range 3 {
			rt.Repeat(actions)
		}
		s.r.flush(rt, s.m)
		// Applying every entry again, from its encoding, to a new view
		// gives the same view.
		again := NewView(nil)
		for _, b := range s.r.applied {
			e, err := DecodeEntry(b)
			require.NoError(rt, err)
			ApplyEntry(again, e.Records)
		}
		requireSameView(rt, s.r.root, again)
	})
}

// setup starts a run with topics (a delete topic, a compacted one),
// producers and data, so that the actions that need them are not skipped.
func (s *modelRun) setup(t *rapid.T, actions map[string]func(*rapid.T)) {
	for i, cfg := range []TopicConfig{{Retention: 5 * time.Second, RetentionBytes: 1000}, {Compact: true, LogAppendTime: rapid.Bool().Draw(t, "logAppendTime")}} {
		name := fmt.Sprintf("s%d", i)
		o := &CreateOp{BaseOp: s.base(), Req: CreatePartitionsRequest{Name: name, Partitions: int32(2 - i), Config: cfg}}
		s.decide(o)
		require.NoError(t, <-o.Done)
		mt := &mTopic{id: o.ID, name: name, cfg: normalized(cfg, int32(2-i))}
		for range 2 - i {
			mt.parts = append(mt.parts, &mPart{producers: map[int64]*mProducer{}})
		}
		s.m.topics = append(s.m.topics, mt)
	}
	actions["initProducerID"](t)
	for range 3 {
		actions["commit"](t)
	}
}

// ---- Topics: create, delete, add partitions, alter.

var topicNames = []string{"t0", "t1", "t2", "t3", "t4", "", "bad name", ".", ".."}

func (s *modelRun) drawConfig(t *rapid.T) TopicConfig {
	c := TopicConfig{
		Retention:      time.Duration(rapid.SampledFrom([]int64{0, -1, 5000, 60000}).Draw(t, "retMs")) * time.Millisecond,
		RetentionBytes: rapid.SampledFrom([]int64{0, -1, 300, 1000}).Draw(t, "retBytes"),
		Compact:        rapid.IntRange(0, 4).Draw(t, "compact") == 0,
		Delete:         rapid.Bool().Draw(t, "delete"),
		LogAppendTime:  rapid.IntRange(0, 4).Draw(t, "logAppendTime") == 0,
	}
	switch rapid.IntRange(0, 12).Draw(t, "configFlaw") {
	case 0:
		c.MaxMessageBytes = -1
	case 1:
		c.MinCompactionLag, c.MaxCompactionLag = 2*time.Second, time.Second
	case 2:
		c.MaxMessageBytes = 2000
	}
	if c.Retention < 0 {
		c.Retention = -1
	}
	return c
}

func (s *modelRun) topicActions(actions map[string]func(*rapid.T)) {
	m := s.m
	actions["create"] = func(t *rapid.T) {
		name := rapid.SampledFrom(topicNames).Draw(t, "name")
		parts := rapid.Int32Range(0, 3).Draw(t, "parts")
		cfg := s.drawConfig(t)
		req := CreatePartitionsRequest{Name: name, Partitions: parts, Config: cfg}
		switch rapid.IntRange(0, 8).Draw(t, "topicID") {
		case 0:
			req.TopicID = uuid.New()
		case 1:
			if len(m.topics) > 0 {
				if tp := rapid.SampledFrom(m.topics).Draw(t, "sameID"); !tp.deleted {
					req.TopicID = tp.id
				}
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "assignedSome") == 0 {
			req.Assigned = []int32{}
			for i := range parts + 1 {
				if rapid.Bool().Draw(t, "assigned") {
					req.Assigned = append(req.Assigned, i)
				}
			}
		}
		o := &CreateOp{BaseOp: s.base(), Req: req}
		again := &CreateOp{BaseOp: s.base(), Req: CreatePartitionsRequest{Name: name, Partitions: 1}}
		ops := []Op{o}
		if rapid.IntRange(0, 3).Draw(t, "again") == 0 {
			ops = append(ops, again)
		}
		s.decide(ops...)
		want := kafkaerr.NoError
		legal := name != "" && name != "bad name" && name != "." && name != ".."
		increasing := func() bool {
			for i, p := range req.Assigned {
				if p >= parts || (i > 0 && p <= req.Assigned[i-1]) {
					return false
				}
			}
			return len(req.Assigned) > 0
		}
		switch {
		case !legal:
			want = kafkaerr.InvalidTopicException
		case parts < 1:
			want = kafkaerr.InvalidPartitions
		case configErr(cfg) != kafkaerr.NoError:
			want = configErr(cfg)
		case m.topicNamed(name) != nil:
			want = kafkaerr.TopicAlreadyExists
		case req.Assigned != nil && !increasing():
			want = kafkaerr.InvalidRequest
		case req.TopicID != (uuid.UUID{}) && m.topic(req.TopicID) != nil:
			want = kafkaerr.TopicAlreadyExists
		}
		require.Equal(t, want, errCode(<-o.Done), "create %+v", req)
		if want == kafkaerr.NoError {
			if req.TopicID != (uuid.UUID{}) {
				require.Equal(t, req.TopicID, o.ID)
			}
			require.Nil(t, m.topic(o.ID), "a new topic's ID is new")
			mt := &mTopic{id: o.ID, name: name, cfg: normalized(cfg, parts)}
			for i := range parts {
				var p *mPart
				if req.Assigned == nil || slices.Contains(req.Assigned, i) {
					p = &mPart{producers: map[int64]*mProducer{}}
				}
				mt.parts = append(mt.parts, p)
			}
			m.topics = append(m.topics, mt)
		}
		if len(ops) > 1 {
			want := kafkaerr.NoError
			if !legal {
				want = kafkaerr.InvalidTopicException
			} else if m.topicNamed(name) != nil {
				want = kafkaerr.TopicAlreadyExists
			}
			require.Equal(t, want, errCode(<-again.Done), "a second create of %q in the same group", name)
			if want == kafkaerr.NoError {
				mt := &mTopic{id: again.ID, name: name, cfg: normalized(TopicConfig{}, 1), parts: []*mPart{{producers: map[int64]*mProducer{}}}}
				m.topics = append(m.topics, mt)
			}
		}
	}
	actions["deleteTopic"] = func(t *rapid.T) {
		id := uuid.New()
		if len(m.topics) > 0 && rapid.IntRange(0, 8).Draw(t, "unknown") > 0 {
			id = rapid.SampledFrom(m.topics).Draw(t, "topic").id
		}
		o := &DeleteTopicOp{BaseOp: s.base(), ID: id}
		s.decide(o)
		tp := m.topic(id)
		if tp == nil {
			require.Equal(t, kafkaerr.UnknownTopicID, errCode(<-o.Done))
			return
		}
		require.NoError(t, <-o.Done)
		tp.deleted = true
	}
	actions["addPartitions"] = func(t *rapid.T) {
		id := uuid.New()
		var cur int32 = 1
		if len(m.topics) > 0 && rapid.IntRange(0, 8).Draw(t, "unknown") > 0 {
			tp := rapid.SampledFrom(m.topics).Draw(t, "topic")
			id, cur = tp.id, int32(len(tp.parts))
		}
		req := AddPartitionsRequest{TopicID: id, Partitions: cur + rapid.Int32Range(-1, 2).Draw(t, "more")}
		if rapid.IntRange(0, 2).Draw(t, "assignedSome") == 0 {
			req.Assigned = []int32{}
			for i := range req.Partitions + 1 {
				if rapid.Bool().Draw(t, "assigned") {
					req.Assigned = append(req.Assigned, i)
				}
			}
			if len(req.Assigned) > 1 && rapid.IntRange(0, 5).Draw(t, "unsorted") == 0 {
				slices.Reverse(req.Assigned)
			}
		}
		o := &AddPartitionsOp{BaseOp: s.base(), Req: req}
		s.decide(o)
		tp := m.topic(id)
		want := kafkaerr.NoError
		var newly []int32
		switch {
		case tp == nil:
			want = kafkaerr.UnknownTopicOrPartition
		case req.Partitions < int32(len(tp.parts)):
			want = kafkaerr.InvalidPartitions
		case req.Partitions == int32(len(tp.parts)) && req.Assigned == nil:
			want = kafkaerr.InvalidPartitions
		default:
			for i, p := range req.Assigned {
				if p < 0 || p >= req.Partitions || (i > 0 && p <= req.Assigned[i-1]) {
					want = kafkaerr.InvalidRequest
				}
				if int(p) >= len(tp.parts) || tp.parts[p] == nil {
					newly = append(newly, p)
				}
			}
		}
		require.Equal(t, want, errCode(<-o.Done), "add partitions %+v", req)
		if want != kafkaerr.NoError {
			return
		}
		for int32(len(tp.parts)) < req.Partitions {
			var p *mPart
			if req.Assigned == nil {
				p = &mPart{producers: map[int64]*mProducer{}}
			}
			tp.parts = append(tp.parts, p)
		}
		for _, i := range newly {
			tp.parts[i] = &mPart{producers: map[int64]*mProducer{}}
		}
		tp.cfg.Partitions = int32(len(tp.parts))
	}
	actions["alterTopic"] = func(t *rapid.T) {
		id := uuid.New()
		if len(m.topics) > 0 && rapid.IntRange(0, 8).Draw(t, "unknown") > 0 {
			id = rapid.SampledFrom(m.topics).Draw(t, "topic").id
		}
		cfg := s.drawConfig(t)
		tp := m.topic(id)
		if tp != nil && rapid.IntRange(0, 3).Draw(t, "same") == 0 {
			cfg = tp.cfg
		}
		o := &AlterTopicOp{BaseOp: s.base(), ID: id, Cfg: cfg}
		recs := s.decide(o)
		want := kafkaerr.NoError
		switch {
		case tp == nil:
			want = kafkaerr.UnknownTopicOrPartition
		case configErr(cfg) != kafkaerr.NoError:
			want = configErr(cfg)
		case cfg.LogAppendTime != tp.cfg.LogAppendTime:
			want = kafkaerr.InvalidConfig
		}
		require.Equal(t, want, errCode(<-o.Done), "alter %+v", cfg)
		if want == kafkaerr.NoError {
			n := normalized(cfg, int32(len(tp.parts)))
			require.Equal(t, n != tp.cfg, len(recs) > 0, "an alter that changes nothing logs nothing")
			tp.cfg = n
		}
	}
}

// ---- Data: producer IDs, commits and their retries, DeleteRecords,
// retention.

func (s *modelRun) dataActions(actions map[string]func(*rapid.T)) {
	m := s.m
	newProducerID := func(t *rapid.T, id int64) {
		require.NotContains(t, m.producerIDs, id, "a producer ID given twice, pending or applied")
		if n := len(m.producerIDs); n > 0 {
			require.Greater(t, id, m.producerIDs[n-1], "producer IDs increase")
		}
		m.producerIDs = append(m.producerIDs, id)
	}
	actions["initProducerID"] = func(t *rapid.T) {
		o := &InitProducerIDOp{BaseOp: s.base()}
		s.decide(o)
		require.NoError(t, <-o.Done)
		newProducerID(t, o.ID)
	}
	s.newProducerID = newProducerID
	actions["commit"] = func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "batches")
		var coords []wal.Coordinate
		pos := int64(1)
		for i := range n {
			tp := s.anyTP(t)
			if i > 0 && rapid.Bool().Draw(t, "samePartition") {
				tp = coords[i-1].TopicPartition
			}
			size := rapid.Int32Range(61, 200).Draw(t, "size")
			cnt := rapid.Int32Range(1, 4).Draw(t, "records")
			if rapid.IntRange(0, 30).Draw(t, "invalid") == 0 {
				size, cnt = 40, 0
			}
			ts := m.now - rapid.Int64Range(0, 10000).Draw(t, "age")
			pid, epoch, seq, txn := int64(-1), int16(-1), int32(-1), false
			if len(m.producerIDs) > 0 && rapid.Bool().Draw(t, "idempotent") {
				pid = rapid.SampledFrom(m.producerIDs).Draw(t, "producer")
				epoch = rapid.Int16Range(0, 2).Draw(t, "epoch")
				seq = rapid.Int32Range(0, 12).Draw(t, "seq")
				p := m.part(tp)
				if p != nil {
					if j := p.openOf(pid); j >= 0 && rapid.IntRange(0, 3).Draw(t, "inTxn") > 0 {
						txn, epoch = true, p.open[j].epoch
					}
				}
				if p != nil && p.producers[pid] != nil && rapid.IntRange(0, 3).Draw(t, "inSequence") > 0 {
					st := p.producers[pid]
					epoch = st.epoch
					if len(st.batches) > 0 {
						seq = kbatch.IncrementSequence(st.batches[len(st.batches)-1].lastSeq, 1)
						if rapid.IntRange(0, 4).Draw(t, "retry") == 0 {
							b := rapid.SampledFrom(st.recent()).Draw(t, "dup")
							seq, cnt = b.firstSeq, b.count
						}
					} else {
						seq = 0
					}
				}
				if rapid.IntRange(0, 10).Draw(t, "flipTxn") == 0 {
					txn = !txn
				}
			} else if rapid.IntRange(0, 30).Draw(t, "txnNoProducer") == 0 {
				txn = true
			}
			coords = append(coords, wal.Coordinate{TopicPartition: tp, Offset: pos, Size: size, NumRecords: cnt,
				BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: txn})
			pos += int64(size)
		}
		s.commit(t, coords)
	}
	actions["produce"] = func(t *rapid.T) {
		// An idempotent producer's batches in sequence in one partition,
		// some retried: past the 5 batches its state retains.
		if len(m.producerIDs) == 0 {
			t.Skip("no producer")
		}
		tp, p := s.livePart(t)
		pid := rapid.SampledFrom(m.producerIDs).Draw(t, "producer")
		epoch, seq := int16(0), int32(0)
		if st := p.producers[pid]; st != nil {
			epoch = st.epoch
			if len(st.batches) > 0 {
				seq = kbatch.IncrementSequence(st.batches[len(st.batches)-1].lastSeq, 1)
			}
		}
		var coords []wal.Coordinate
		pos := int64(1)
		var sent [][2]int32
		for range rapid.IntRange(3, 8).Draw(t, "batches") {
			cnt := rapid.Int32Range(1, 3).Draw(t, "records")
			first := seq
			if len(sent) > 0 && rapid.IntRange(0, 5).Draw(t, "dup") == 0 {
				b := rapid.SampledFrom(sent).Draw(t, "sent")
				first, cnt = b[0], b[1]
			} else {
				sent = append(sent, [2]int32{seq, cnt})
				seq = kbatch.IncrementSequence(seq, cnt)
			}
			coords = append(coords, wal.Coordinate{TopicPartition: tp, Offset: pos, Size: 100, NumRecords: cnt, MaxTimestamp: m.now,
				ProducerID: pid, ProducerEpoch: epoch, BaseSequence: first})
			pos += 100
		}
		s.commit(t, coords)
	}
	actions["retryCommit"] = func(t *rapid.T) {
		var cs []*mCommit
		for _, c := range m.commits {
			// Within the window the view keeps recent commits, and of an
			// object still known (the lifecycle forgets dead ones only).
			if m.now-c.time < 20*60*1000 && m.known(c.key) && !m.objects[c.key].received {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			t.Skip("no commit to retry")
		}
		s.retry(t, rapid.SampledFrom(cs).Draw(t, "commit"))
	}
	actions["deleteRecords"] = func(t *rapid.T) {
		tp := s.anyTP(t)
		p := m.part(tp)
		off := rapid.Int64Range(-2, 40).Draw(t, "offset")
		if p != nil && rapid.Bool().Draw(t, "nearHW") {
			off = p.hw - rapid.Int64Range(0, 3).Draw(t, "back")
		}
		o := &DeleteRecordsOp{BaseOp: s.base(), TP: tp, Offset: off}
		s.decide(o)
		err := <-o.Done
		switch {
		case p == nil:
			require.Equal(t, kafkaerr.UnknownTopicOrPartition, errCode(err))
		case off > p.hw || off < -1:
			require.Equal(t, kafkaerr.OffsetOutOfRange, errCode(err))
		default:
			require.NoError(t, err)
			if off == -1 {
				off = p.hw
			}
			m.trim(p, off)
			require.Equal(t, p.logStart, o.LowWM)
		}
	}
	actions["retention"] = func(t *rapid.T) {
		// Retention's cuts are facts of the committed state: decide it
		// with nothing pending, the cuts taken from the model.
		s.r.flush(t, m)
		m.now += rapid.Int64Range(0, 20000).Draw(t, "advance")
		cuts := map[int64]int64{}
		var want []RetentionChange
		m.liveParts(func(tp *mTopic, i int32, p *mPart) {
			if !tp.cfg.Delete {
				return // retention deletes only from delete topics
			}
			if cut := m.retentionCut(tp, p); cut > p.logStart {
				id := wal.TopicPartition{TopicID: tp.id, Partition: i}
				cuts[s.r.root.Partition(id).PID] = cut
				want = append(want, RetentionChange{TopicPartition: id, LogStart: cut})
			}
		})
		o := &RetentionOp{BaseOp: s.base()}
		s.r.decide(m, cuts, nil, o)
		require.NoError(t, <-o.Done)
		require.ElementsMatch(t, want, o.Changes)
		for _, c := range want {
			m.trim(m.part(c.TopicPartition), c.LogStart)
		}
	}
}

// commit commits a new object of coords, mostly with no flaw, and checks
// the answers against the model's.
func (s *modelRun) commit(t *rapid.T, coords []wal.Coordinate) {
	m := s.m
	pos := int64(1)
	for _, c := range coords {
		pos = max(pos, c.Offset+int64(c.Size))
	}
	age := int64(0)
	if rapid.IntRange(0, 10).Draw(t, "old") == 0 {
		age = rapid.SampledFrom([]int64{59000, 61000}).Draw(t, "keyAge")
	}
	key := m.newKey(age)
	var owners []int
	if rapid.IntRange(0, 3).Draw(t, "someOwners") == 0 {
		owners = rapid.SampledFrom([][]int{{0}, {1, 0}, {0, 1}, {1}, {0, 0}}).Draw(t, "owners")
	}
	req := CommitFileRequest{ObjectKey: key, Size: pos, Coordinates: coords, Owners: owners}
	o := &CommitOp{BaseOp: s.base(), Req: req}
	recs := s.decide(o)
	err := <-o.Done
	switch {
	case slices.Equal(owners, []int{1}) || slices.Equal(owners, []int{0, 0}):
		require.Equal(t, kafkaerr.InvalidRequest, errCode(err), "owners %v", owners)
		return
	case age > mDeadline.Milliseconds():
		require.Equal(t, kafkaerr.RequestTimedOut, errCode(err), "an object named %d ms ago", age)
		return
	}
	require.NoError(t, err, "commit refused")
	want, appended := m.commit(key, coords)
	require.Len(t, o.Results, len(want))
	for i := range want {
		require.Equal(t, errCode(want[i].Err), errCode(o.Results[i].Err), "batch %d: %v", i, o.Results[i].Err)
		require.Equal(t, want[i].BaseOffset, o.Results[i].BaseOffset, "batch %d", i)
		require.Equal(t, want[i].LogAppendTime, o.Results[i].LogAppendTime, "batch %d", i)
		require.Equal(t, want[i].LogStartOffset, o.Results[i].LogStartOffset, "batch %d", i)
	}
	require.Len(t, recs, 1)
	obj := &mObject{group: s.r.decided}
	if len(owners) > 1 {
		for _, sh := range owners {
			obj.owners = append(obj.owners, int32(sh))
		}
	}
	m.addObject(key, obj)
	m.commits = append(m.commits, &mCommit{key: key, coords: coords, results: o.Results, appended: appended, time: m.now})
	if rapid.Bool().Draw(t, "retryNow") {
		s.retry(t, m.commits[len(m.commits)-1])
	}
}

// retry commits an object again (its answer was lost), pending or
// committed: the batches it appended get their offsets again, and nothing
// is appended.
func (s *modelRun) retry(t *rapid.T, c *mCommit) {
	o := &CommitOp{BaseOp: s.base(), Req: CommitFileRequest{ObjectKey: c.key, Size: 1 << 20, Coordinates: c.coords}}
	recs := s.decide(o)
	require.NoError(t, <-o.Done, "a retried commit refused")
	require.Empty(t, recs, "a retried commit appended")
	for i := range c.coords {
		if !c.appended[i] {
			continue
		}
		if s.m.part(c.coords[i].TopicPartition) == nil && o.Results[i].Err != nil {
			// Its partition is gone since: a leader that still has the
			// first answers gives them, one that has only the rows says
			// so.
			require.Equal(t, kafkaerr.UnknownTopicOrPartition, errCode(o.Results[i].Err), "retried batch %d of a partition gone", i)
			continue
		}
		require.NoError(t, o.Results[i].Err, "retried batch %d", i)
		require.Equal(t, c.results[i].BaseOffset, o.Results[i].BaseOffset, "retried batch %d", i)
	}
}

// fingerprint is the compactor's and the store's fingerprint of a
// range's rows (any function of them does).
func fingerprint(p *mPart, from, to int64) (uint64, bool) {
	h := fnv.New64a()
	for _, r := range p.runs {
		if r.base < from && r.last >= from {
			return 0, false // a run straddles from
		}
		if r.last >= from && r.base <= to {
			fmt.Fprintf(h, "%d %d %s %d %d;", r.base, r.last, r.key, r.pos, r.size)
		}
	}
	return h.Sum64(), true
}
