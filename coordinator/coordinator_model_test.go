package coordinator

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// newTestClock returns the tests' manual clock: the coordinator's timers
// (its lifecycle, catalog and orphan loops) fire as a test advances it.
func newTestClock() *fakeclock.Clock { return fakeclock.New(time.UnixMilli(1_764_500_000_000)) }

// The model: what the coordinator must do, written as plainly as possible.

type mRun struct {
	base, last int64
	key        string
	pos, size  int64
	maxTs      int64
}

type mBatch struct {
	firstSeq, lastSeq int32
	base              int64
	count             int32
}

type mProducer struct {
	epoch   int16
	batches []mBatch // all accepted, newest last; only the last 5 count
}

type mPart struct {
	hw, logStart int64
	runs         []mRun
	producers    map[int64]*mProducer
	// disklessStart and the live remote segments, oldest first.
	disklessStart int64
	segs          []mSeg
}

// mSeg is a remote segment.
type mSeg struct {
	base, end   int64
	key         string
	maxTs, size int64
}

type mTopic struct {
	id         uuid.UUID
	name       string
	retMs      int64
	retBytes   int64
	parts      []*mPart
	deleted    bool
	partitions int32
}

type model struct {
	topics  []*mTopic
	objects map[string]int // key -> live runs
	clock   *fakeclock.Clock
}

func (m *model) topic(id uuid.UUID) *mTopic {
	for _, t := range m.topics {
		if t.id == id && !t.deleted {
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

// commit is the model's CommitFile.
func (m *model) commit(key string, coords []wal.Coordinate) []wal.Result {
	out := make([]wal.Result, len(coords))
	var prev *mRun
	var prevPart *mPart
	live := 0
	for i, c := range coords {
		res := wal.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		p := m.part(c.TopicPartition)
		if p == nil {
			res.Err = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "")
			out[i], prev = res, nil
			continue
		}
		res.LogStartOffset = p.logStart
		lastSeq := kbatch.IncrementSequence(c.BaseSequence, c.NumRecords-1)
		if c.ProducerID >= 0 {
			st := p.producers[c.ProducerID]
			if st != nil && st.epoch == c.ProducerEpoch {
				recent := st.batches[max(0, len(st.batches)-5):]
				dup := slices.IndexFunc(recent, func(b mBatch) bool { return b.firstSeq == c.BaseSequence && b.lastSeq == lastSeq })
				if dup >= 0 {
					res.BaseOffset = recent[dup].base
					out[i], prev = res, nil
					continue
				}
			}
			if st != nil {
				switch {
				case c.ProducerEpoch < st.epoch:
					res.Err = kafkaerr.New(kafkaerr.InvalidProducerEpoch, "")
				case c.ProducerEpoch != st.epoch:
					if c.BaseSequence != 0 {
						res.Err = kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "")
					}
				case len(st.batches) > 0 && c.BaseSequence != kbatch.IncrementSequence(st.batches[len(st.batches)-1].lastSeq, 1):
					res.Err = kafkaerr.New(kafkaerr.OutOfOrderSequenceNumber, "")
				}
			}
			if res.Err != nil {
				out[i], prev = res, nil
				continue
			}
			if st == nil || st.epoch != c.ProducerEpoch {
				st = &mProducer{epoch: c.ProducerEpoch}
				p.producers[c.ProducerID] = st
			}
			st.batches = append(st.batches, mBatch{firstSeq: c.BaseSequence, lastSeq: lastSeq, base: p.hw, count: c.NumRecords})
		}
		res.BaseOffset = p.hw
		last := p.hw + int64(c.NumRecords) - 1
		if prev != nil && prevPart == p && prev.last+1 == p.hw && prev.pos+prev.size == c.Offset {
			prev.last = last
			prev.size += int64(c.Size)
			prev.maxTs = max(prev.maxTs, c.MaxTimestamp)
		} else {
			p.runs = append(p.runs, mRun{base: p.hw, last: last, key: key, pos: c.Offset, size: int64(c.Size), maxTs: c.MaxTimestamp})
			prev, prevPart = &p.runs[len(p.runs)-1], p
			live++
		}
		p.hw = last + 1
		out[i] = res
	}
	m.objects[key] = live
	return out
}

// trim is the model's DeleteRecords and retention: runs and remote
// segments wholly before logStart go.
func (m *model) trim(p *mPart, logStart int64) {
	if logStart <= p.logStart {
		return
	}
	p.logStart = logStart
	p.disklessStart = max(p.disklessStart, logStart)
	for len(p.runs) > 0 && p.runs[0].last < logStart {
		m.objects[p.runs[0].key]--
		p.runs = p.runs[1:]
	}
	for len(p.segs) > 0 && p.segs[0].end < logStart {
		m.objects[p.segs[0].key]--
		p.segs = p.segs[1:]
	}
}

// register is the model's RegisterRemoteSegment of a valid segment: the
// runs wholly at or below its end go.
func (m *model) register(p *mPart, s mSeg) {
	p.segs = append(p.segs, s)
	m.objects[s.key] = 1
	p.disklessStart = s.end + 1
	for len(p.runs) > 0 && p.runs[0].last <= s.end {
		m.objects[p.runs[0].key]--
		p.runs = p.runs[1:]
	}
}

func (m *model) retention() {
	now := m.clock.Now().UnixMilli()
	for _, t := range m.topics {
		if t.deleted {
			continue
		}
		for _, p := range t.parts {
			// Remote segments, then runs, oldest first, as one list.
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
			if t.retBytes >= 0 {
				excess = bytes - t.retBytes
			}
			start := p.logStart
			for _, r := range all {
				if !(r.maxTs < now-t.retMs) && !(excess >= 0 && excess-r.size >= 0) {
					break
				}
				excess -= r.size
				start = r.last + 1
			}
			m.trim(p, start)
		}
	}
}

func (m *model) deleteTopic(t *mTopic) {
	t.deleted = true
	for _, p := range t.parts {
		for _, r := range p.runs {
			m.objects[r.key]--
		}
		for _, s := range p.segs {
			m.objects[s.key]--
		}
	}
}

// TestModel runs random operations against a coordinator and the model,
// with restarts and rebuilds from the log, and requires that they agree.
func TestModel(t *testing.T) { runModel(t, false, -1) }

// TestModelBehind is TestModel with the database written behind the loop
// (store's applier, the default's way) and committed only when a read
// needs it: every answer must still be what the model says, and every
// read must see every write answered before it.
func TestModelBehind(t *testing.T) { runModel(t, false, time.Hour) }

// TestModelRemote is TestModel with remote segments registered as well
// (TestModel keeps its actions, so that its saved failures replay).
func TestModelRemote(t *testing.T) { runModel(t, true, -1) }

func runModel(t *testing.T, remote bool, applyInterval time.Duration) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := newTestClock()
		log := newTestLog()
		dir, err := os.MkdirTemp("", "model-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		open := func() *leader {
			c, err := openLeader(ctx, log, &leaderOptions{Dir: dir, Clock: clock, SnapshotEvery: -1, ApplyInterval: applyInterval})
			if err != nil {
				rt.Fatal(err)
			}
			return c
		}
		c := open()
		defer func() { c.Close() }()
		m := &model{objects: map[string]int{}, clock: clock}
		objects := 0
		producers := []int64{}

		anyTP := func(rt *rapid.T) wal.TopicPartition {
			if len(m.topics) == 0 || rapid.IntRange(0, 20).Draw(rt, "unknownTopic") == 0 {
				return wal.TopicPartition{TopicID: uuid.New(), Partition: 0}
			}
			t := rapid.SampledFrom(m.topics).Draw(rt, "topic")
			return wal.TopicPartition{TopicID: t.id, Partition: rapid.Int32Range(0, t.partitions).Draw(rt, "partition")}
		}

		actions := map[string]func(*rapid.T){
			"create": func(rt *rapid.T) {
				name := fmt.Sprintf("t%d", len(m.topics))
				parts := rapid.Int32Range(1, 3).Draw(rt, "parts")
				retBytes := rapid.SampledFrom([]int64{-1, 300, 1000}).Draw(rt, "retBytes")
				retMs := rapid.SampledFrom([]int64{-1, 5000, 60000}).Draw(rt, "retMs")
				id, err := c.CreatePartitions(ctx, CreatePartitionsRequest{Name: name, Partitions: parts, Config: TopicConfig{RetentionBytes: retBytes, Retention: time.Duration(retMs) * time.Millisecond}})
				require.NoError(rt, err)
				t := &mTopic{id: id, name: name, retMs: retMs, retBytes: retBytes, partitions: parts}
				if retMs == -1 {
					t.retMs = 1 << 62
				}
				for i := int32(0); i < parts; i++ {
					t.parts = append(t.parts, &mPart{producers: map[int64]*mProducer{}})
				}
				m.topics = append(m.topics, t)
				_, err = c.CreatePartitions(ctx, CreatePartitionsRequest{Name: name, Partitions: 1})
				require.Equal(rt, kafkaerr.TopicAlreadyExists, code(err))
			},
			"initProducerID": func(rt *rapid.T) {
				id, epoch, err := c.InitProducerID(ctx)
				require.NoError(rt, err)
				require.Zero(rt, epoch)
				require.NotContains(rt, producers, id)
				producers = append(producers, id)
			},
			"commit": func(rt *rapid.T) {
				objects++
				key := fmt.Sprintf("wal/%04d", objects)
				n := rapid.IntRange(1, 6).Draw(rt, "batches")
				var coords []wal.Coordinate
				pos := int64(1)
				for i := 0; i < n; i++ {
					tp := anyTP(rt)
					if i > 0 && rapid.Bool().Draw(rt, "samePartition") {
						tp = coords[i-1].TopicPartition
					}
					size := rapid.Int32Range(61, 200).Draw(rt, "size")
					cnt := rapid.Int32Range(1, 4).Draw(rt, "records")
					ts := clock.Now().UnixMilli() - rapid.Int64Range(0, 10000).Draw(rt, "age")
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
				got, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Size: pos, Coordinates: coords})
				require.NoError(rt, err)
				want := m.commit(key, coords)
				require.Equal(rt, len(want), len(got))
				for i := range want {
					require.Equal(rt, kafkaerr.CodeOf(want[i].Err), kafkaerr.CodeOf(got[i].Err), "batch %d: %v", i, got[i].Err)
					require.Equal(rt, want[i].BaseOffset, got[i].BaseOffset, "batch %d", i)
				}
			},
			"deleteRecords": func(rt *rapid.T) {
				tp := anyTP(rt)
				p := m.part(tp)
				off := rapid.Int64Range(-1, 40).Draw(rt, "offset")
				low, err := c.DeleteRecords(ctx, tp, off)
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
					require.Equal(rt, p.logStart, low)
				}
			},
			"retention": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.Int64Range(0, 20000).Draw(rt, "advance")) * time.Millisecond)
				_, err := c.EnforceRetention(ctx)
				require.NoError(rt, err)
				m.retention()
			},
			"deleteTopic": func(rt *rapid.T) {
				if len(m.topics) == 0 {
					rt.Skip("no topics")
				}
				t := rapid.SampledFrom(m.topics).Draw(rt, "topic")
				err := c.DeleteTopic(ctx, t.id)
				if t.deleted {
					require.Equal(rt, kafkaerr.UnknownTopicID, code(err))
					return
				}
				require.NoError(rt, err)
				m.deleteTopic(t)
			},
			"restart": func(rt *rapid.T) {
				require.NoError(rt, c.Close())
				if rapid.Bool().Draw(rt, "rebuild") {
					// The database is a cache: delete it, rebuild from the log.
					require.NoError(rt, os.RemoveAll(dir))
				}
				c = open()
			},
			"": func(rt *rapid.T) {
				// Check every partition against the model.
				for _, t := range m.topics {
					for i, p := range t.parts {
						tp := wal.TopicPartition{TopicID: t.id, Partition: int32(i)}
						res, err := c.FindBatches(ctx, tp, max(p.logStart, 0), 1<<40)
						if t.deleted {
							require.Equal(rt, kafkaerr.UnknownTopicOrPartition, code(err))
							continue
						}
						require.NoError(rt, err)
						require.Equal(rt, p.hw, res.HighWatermark)
						require.Equal(rt, p.logStart, res.LogStart)
						require.Equal(rt, p.disklessStart, res.DisklessStart)
						segs, err := c.RemoteSegments(ctx, tp)
						require.NoError(rt, err)
						var gotSegs []mSeg
						for _, s := range segs {
							gotSegs = append(gotSegs, mSeg{base: s.BaseOffset, end: s.EndOffset, key: s.Key, maxTs: s.MaxTimestamp, size: s.Size})
						}
						wantSegs := p.segs
						if len(wantSegs) == 0 {
							wantSegs = nil
						}
						require.Equal(rt, wantSegs, gotSegs, "partition %s", tp)
						if p.logStart < p.disklessStart {
							require.Empty(rt, res.Batches)
							require.NotNil(rt, res.Remote)
							require.Equal(rt, p.segs[0].key, res.Remote.Key)
							res, err = c.FindBatches(ctx, tp, p.disklessStart, 1<<40)
							require.NoError(rt, err)
						}
						require.Nil(rt, res.Remote)
						var got []mRun
						for _, l := range res.Batches {
							got = append(got, mRun{base: l.BaseOffset, last: l.LastOffset, key: l.ObjectKey, pos: l.BytePos, size: l.ByteSize, maxTs: l.MaxTimestamp})
						}
						want := p.runs
						if len(want) == 0 {
							want = nil
						}
						require.Equal(rt, want, got, "partition %s", tp)
					}
				}
				dead, err := c.DeadObjects(ctx, 1<<20)
				require.NoError(rt, err)
				var gotDead, wantDead []string
				for _, d := range dead {
					gotDead = append(gotDead, d.Key)
				}
				for k, n := range m.objects {
					if n <= 0 {
						wantDead = append(wantDead, k)
					}
				}
				require.ElementsMatch(rt, wantDead, gotDead)
			},
		}
		if remote {
			actions["registerRemote"] = func(rt *rapid.T) {
				tp := anyTP(rt)
				p := m.part(tp)
				var base, end int64
				valid := p != nil && p.hw > p.disklessStart
				if p != nil {
					// Mostly valid: from the diskless start (or below it,
					// when no remote segment is live) to below the high
					// watermark.
					base = p.disklessStart
					if len(p.segs) == 0 {
						base -= rapid.Int64Range(0, min(p.disklessStart, 5)).Draw(rt, "below")
					}
					end = p.disklessStart + rapid.Int64Range(0, max(p.hw-p.disklessStart-1, 0)).Draw(rt, "length")
					switch rapid.IntRange(0, 8).Draw(rt, "invalid") {
					case 0: // above the diskless start
						base, end, valid = p.disklessStart+1, max(end, p.disklessStart+1), false
					case 1: // wholly below it
						if p.disklessStart > 0 {
							base, end, valid = base-1, p.disklessStart-1, false
							base = max(base, 0)
						}
					case 2: // up to the high watermark
						end, valid = p.hw, false
					}
				}
				size := rapid.Int64Range(1, 2000).Draw(rt, "remoteSize")
				ts := clock.Now().UnixMilli() - rapid.Int64Range(0, 10000).Draw(rt, "remoteAge")
				s := remoteSeg("", tp, base, end, clock.Now(), ts)
				s.Size = size
				err := c.RegisterRemoteSegment(ctx, s)
				switch {
				case p == nil:
					require.Equal(rt, kafkaerr.UnknownTopicOrPartition, code(err))
				case !valid:
					require.Equal(rt, kafkaerr.OffsetOutOfRange, code(err), "[%d, %d] with diskless start %d, high watermark %d, %d live: %v",
						base, end, p.disklessStart, p.hw, len(p.segs), err)
				default:
					require.NoError(rt, err)
					m.register(p, mSeg{base: base, end: end, key: s.Key, maxTs: ts, size: size})
					require.NoError(rt, c.RegisterRemoteSegment(ctx, s), "again")
				}
			}
		}
		rt.Repeat(actions)
	})
}
