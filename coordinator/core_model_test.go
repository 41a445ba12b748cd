package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// The model test of the pure core (core.go), with no SQLite and no log:
// random requests are decided in groups against the speculative view,
// several groups may be decided before the first is applied (as the loop
// pipelines them), and every decision and the committed view must agree
// with the model of coordinator_model_test.go. The facts a decision reads
// from the store come from the rig's own record of what was applied (the
// committed object keys) or from the model (retention's cuts, decided
// with nothing pending). Applying every entry again, decoded from its log
// encoding, to a new view must give the same view: applying is a function
// of the view and the records.

// coreRig drives the core as the loop does, with its I/O replaced by
// memory.
type coreRig struct {
	opts    leaderOptions
	root    *state.View
	spec    *state.View
	pending [][]state.Record // decided, not yet applied
	applied [][]byte         // every entry applied, encoded
	keys    map[string]state.ObjectState
}

func newCoreRig() *coreRig {
	r := &coreRig{root: state.NewView(nil), keys: map[string]state.ObjectState{}}
	r.spec = state.NewView(r.root)
	return r
}

// decide decides one group of ops at now; the facts are what the store
// would hold: the committed rows of the keys, and cuts when given.
func (r *coreRig) decide(now int64, cuts map[int64]int64, ops ...state.Op) {
	n := state.Needs{}
	for _, o := range ops {
		o.Need(&n)
	}
	f := &state.Facts{Objects: map[string]state.ObjectState{}, Cuts: cuts}
	for _, k := range n.Keys {
		if st, ok := r.keys[k]; ok {
			f.Objects[k] = st
		}
	}
	g := &state.Group{Shard: r.opts.Shard, Prefix: r.opts.Prefix, CommitDeadline: r.opts.CommitDeadline, Spec: r.spec, Now: now, Facts: f}
	for _, o := range ops {
		o.Check(g)
	}
	r.pending = append(r.pending, g.Records)
}

// applyOne applies the oldest pending group, as its entry became durable.
func (r *coreRig) applyOne(t *rapid.T) {
	recs := r.pending[0]
	r.pending = r.pending[1:]
	if len(recs) > 0 {
		e := state.ApplyEntry(r.root, recs)
		require.Len(t, e.Skip, len(recs))
		r.applied = append(r.applied, state.AppendEntry(nil, state.Entry{Records: recs}))
		for _, rec := range recs {
			if c, ok := rec.(state.CommitFileRecord); ok {
				r.keys[c.Key] = state.ObjectState{ID: c.ObjectID, Live: int64(len(c.Rows))}
			}
		}
	}
	r.spec = state.NewView(r.root)
	for _, g := range r.pending {
		for _, rec := range g {
			r.spec.Apply(rec)
		}
	}
}

// flush applies every pending group.
func (r *coreRig) flush(t *rapid.T) {
	for len(r.pending) > 0 {
		r.applyOne(t)
	}
}

func TestCoreModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := newTestClock()
		r := newCoreRig()
		m := &model{objects: map[string]int{}, clock: clock}
		objects := 0
		var producers []int64
		ctx := context.Background()

		anyTP := func(rt *rapid.T) wal.TopicPartition {
			if len(m.topics) == 0 || rapid.IntRange(0, 20).Draw(rt, "unknownTopic") == 0 {
				return wal.TopicPartition{TopicID: uuid.New(), Partition: 0}
			}
			t := rapid.SampledFrom(m.topics).Draw(rt, "topic")
			return wal.TopicPartition{TopicID: t.id, Partition: rapid.Int32Range(0, t.partitions).Draw(rt, "partition")}
		}
		now := func() int64 { return clock.Now().UnixMilli() }

		rt.Repeat(map[string]func(*rapid.T){
			"create": func(rt *rapid.T) {
				name := fmt.Sprintf("t%d", len(m.topics))
				parts := rapid.Int32Range(1, 3).Draw(rt, "parts")
				retBytes := rapid.SampledFrom([]int64{-1, 300, 1000}).Draw(rt, "retBytes")
				retMs := rapid.SampledFrom([]int64{-1, 5000, 60000}).Draw(rt, "retMs")
				o := &state.CreateOp{BaseOp: state.NewBaseOp(ctx), Req: CreatePartitionsRequest{Name: name, Partitions: parts, Config: TopicConfig{RetentionBytes: retBytes, Retention: time.Duration(retMs) * time.Millisecond}}}
				again := &state.CreateOp{BaseOp: state.NewBaseOp(ctx), Req: CreatePartitionsRequest{Name: name, Partitions: 1}}
				r.decide(now(), nil, o, again)
				require.False(rt, o.Finished, "create refused")
				require.Equal(rt, kafkaerr.TopicAlreadyExists, code(<-again.Done), "a second create of the same name, in the same group")
				mt := &mTopic{id: o.ID, name: name, retMs: retMs, retBytes: retBytes, partitions: parts}
				if retMs == -1 {
					mt.retMs = 1 << 62
				}
				for range parts {
					mt.parts = append(mt.parts, &mPart{producers: map[int64]*mProducer{}})
				}
				m.topics = append(m.topics, mt)
			},
			"initProducerID": func(rt *rapid.T) {
				o := &state.InitProducerIDOp{BaseOp: state.NewBaseOp(ctx)}
				r.decide(now(), nil, o)
				require.NotContains(rt, producers, o.ID, "a producer ID given twice, pending or applied")
				producers = append(producers, o.ID)
			},
			"commit": func(rt *rapid.T) {
				objects++
				key := fmt.Sprintf("wal/%04d", objects)
				n := rapid.IntRange(1, 6).Draw(rt, "batches")
				var coords []wal.Coordinate
				pos := int64(1)
				for i := range n {
					tp := anyTP(rt)
					if i > 0 && rapid.Bool().Draw(rt, "samePartition") {
						tp = coords[i-1].TopicPartition
					}
					size := rapid.Int32Range(61, 200).Draw(rt, "size")
					cnt := rapid.Int32Range(1, 4).Draw(rt, "records")
					ts := now() - rapid.Int64Range(0, 10000).Draw(rt, "age")
					pid, epoch, seq := int64(-1), int16(-1), int32(-1)
					if len(producers) > 0 && rapid.Bool().Draw(rt, "idempotent") {
						pid = rapid.SampledFrom(producers).Draw(rt, "producer")
						epoch = rapid.Int16Range(0, 2).Draw(rt, "epoch")
						seq = rapid.Int32Range(0, 12).Draw(rt, "seq")
						if p := m.part(tp); p != nil && p.producers[pid] != nil && rapid.IntRange(0, 3).Draw(rt, "inSequence") > 0 {
							st := p.producers[pid]
							epoch = st.epoch
							if len(st.batches) > 0 {
								seq = kbatch.IncrementSequence(st.batches[len(st.batches)-1].lastSeq, 1)
								if rapid.IntRange(0, 4).Draw(rt, "retry") == 0 {
									b := rapid.SampledFrom(st.batches).Draw(rt, "dup")
									seq, cnt = b.firstSeq, b.count
								}
							}
						}
					}
					coords = append(coords, wal.Coordinate{TopicPartition: tp, Offset: pos, Size: size, NumRecords: cnt,
						BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
					pos += int64(size)
				}
				o := &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: CommitFileRequest{ObjectKey: key, Size: pos, Coordinates: coords}}
				again := &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: CommitFileRequest{ObjectKey: key, Size: pos, Coordinates: coords}}
				r.decide(now(), nil, o)
				require.False(rt, o.Finished, "commit refused")
				want := m.commit(key, coords)
				require.Len(rt, o.Results, len(want))
				for i := range want {
					require.Equal(rt, kafkaerr.CodeOf(want[i].Err), kafkaerr.CodeOf(o.Results[i].Err), "batch %d: %v", i, o.Results[i].Err)
					require.Equal(rt, want[i].BaseOffset, o.Results[i].BaseOffset, "batch %d", i)
				}
				// The same object again (its answer was lost), pending or
				// committed: answered as the first time, nothing appended.
				pending := len(r.pending)
				r.decide(now(), nil, again)
				require.False(rt, again.Finished, "a retried commit refused")
				require.Empty(rt, r.pending[pending], "a retried commit appended")
				for i := range want {
					require.Equal(rt, o.Results[i].BaseOffset, again.Results[i].BaseOffset, "retried batch %d", i)
					if o.Results[i].Err == nil {
						require.NoError(rt, again.Results[i].Err, "retried batch %d", i)
					}
				}
			},
			"deleteRecords": func(rt *rapid.T) {
				tp := anyTP(rt)
				p := m.part(tp)
				off := rapid.Int64Range(-1, 40).Draw(rt, "offset")
				o := &state.DeleteRecordsOp{BaseOp: state.NewBaseOp(ctx), TP: tp, Offset: off}
				r.decide(now(), nil, o)
				var err error
				if o.Finished {
					err = <-o.Done
				}
				switch {
				case p == nil:
					require.Equal(rt, kafkaerr.UnknownTopicOrPartition, code(err))
				case off > p.hw || off < -1:
					require.Equal(rt, kafkaerr.OffsetOutOfRange, code(err))
				default:
					require.NoError(rt, err)
					if off == -1 {
						off = p.hw
					}
					m.trim(p, off)
					require.Equal(rt, p.logStart, o.LowWM)
				}
			},
			"retention": func(rt *rapid.T) {
				// Retention's cuts are facts of the committed state: decide
				// it with nothing pending, the cuts taken from the model.
				r.flush(rt)
				clock.Advance(time.Duration(rapid.Int64Range(0, 20000).Draw(rt, "advance")) * time.Millisecond)
				before := map[*mPart]int64{}
				for _, t := range m.topics {
					for _, p := range t.parts {
						before[p] = p.logStart
					}
				}
				m.retention()
				cuts := map[int64]int64{}
				for _, t := range m.topics {
					if t.deleted {
						continue
					}
					for i, p := range t.parts {
						if p.logStart > before[p] {
							cuts[r.root.Partition(wal.TopicPartition{TopicID: t.id, Partition: int32(i)}).PID] = p.logStart
						}
					}
				}
				o := &state.RetentionOp{BaseOp: state.NewBaseOp(ctx)}
				r.decide(now(), cuts, o)
				require.False(rt, o.Finished)
				require.Len(rt, o.Changes, len(cuts))
			},
			"deleteTopic": func(rt *rapid.T) {
				if len(m.topics) == 0 {
					rt.Skip("no topics")
				}
				t := rapid.SampledFrom(m.topics).Draw(rt, "topic")
				o := &state.DeleteTopicOp{BaseOp: state.NewBaseOp(ctx), ID: t.id}
				r.decide(now(), nil, o)
				if t.deleted {
					require.Equal(rt, kafkaerr.UnknownTopicID, code(<-o.Done))
					return
				}
				require.False(rt, o.Finished)
				m.deleteTopic(t)
			},
			"apply": func(rt *rapid.T) {
				if len(r.pending) == 0 {
					rt.Skip("nothing pending")
				}
				r.applyOne(rt)
			},
			"": func(rt *rapid.T) {
				// With everything applied, the committed view is the model.
				r.flush(rt)
				for _, t := range m.topics {
					for i, p := range t.parts {
						got := r.root.Partition(wal.TopicPartition{TopicID: t.id, Partition: int32(i)})
						if t.deleted {
							require.Nil(rt, got)
							continue
						}
						require.NotNil(rt, got)
						require.Equal(rt, [3]int64{p.logStart, p.disklessStart, p.hw}, [3]int64{got.LogStart, got.DisklessStart, got.HW}, "log start, diskless start, high watermark of %s/%d", t.name, i)
					}
				}
				// Applying every entry again, from its encoding, to a new
				// view gives the same view.
				again := state.NewView(nil)
				for _, b := range r.applied {
					e, err := state.DecodeEntry(b)
					require.NoError(rt, err)
					state.ApplyEntry(again, e.Records)
				}
				requireSameView(rt, r.root, again)
			},
		})
	})
}

// requireSameView checks that two committed views hold the same state.
func requireSameView(t require.TestingT, want, got *state.View) {
	require.Equal(t, want.Epoch, got.Epoch)
	require.Equal(t, [3]int64{want.NextPID, want.NextObjectID, want.NextProducerID}, [3]int64{got.NextPID, got.NextObjectID, got.NextProducerID})
	require.Equal(t, len(want.Topics), len(got.Topics))
	for id, tw := range want.Topics {
		require.NotNil(t, got.Topics[id], "topic %s", id)
		require.Equal(t, *tw, *got.Topics[id])
	}
	require.Equal(t, len(want.Parts), len(got.Parts))
	for pid, pw := range want.Parts {
		require.Equal(t, *pw, *got.Parts[pid], "partition %d", pid)
	}
	require.Equal(t, len(want.Producers), len(got.Producers))
	for k, pw := range want.Producers {
		require.Equal(t, *pw, *got.Producers[k], "producer %v", k)
	}
}
