package segment

// A model-based test: random sequences of appends, reads, rolls, retention,
// DeleteRecords, compactions, clean and crashed reopens against a small
// in-memory model of Kafka's rules.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// mBatch is a batch of the model: its bytes and records.
type mBatch struct {
	raw  []byte
	recs []ltRec
}

func (b *mBatch) base() int64  { return kbatch.Batch(b.raw).BaseOffset() }
func (b *mBatch) last() int64  { return kbatch.Batch(b.raw).LastOffset() }
func (b *mBatch) maxTs() int64 { return kbatch.Batch(b.raw).MaxTimestamp() }

// mSeg is a segment of the model.
type mSeg struct {
	base    int64
	batches []*mBatch
}

func (s *mSeg) size() int64 {
	var n int64
	for _, b := range s.batches {
		n += int64(len(b.raw))
	}
	return n
}

func (s *mSeg) maxTs() int64 {
	ts := kbatch.NoTimestamp
	for _, b := range s.batches {
		ts = max(ts, b.maxTs())
	}
	return ts
}

// logModel is what the Log must agree with.
type logModel struct {
	cfg      logConfig
	segs     []*mSeg
	logStart int64
	logEnd   int64
}

func (m *logModel) active() *mSeg { return m.segs[len(m.segs)-1] }

func (m *logModel) size() int64 {
	var n int64
	for _, s := range m.segs {
		n += s.size()
	}
	return n
}

// append applies Kafka's roll rules (size and record time: the tests keep
// indexes from filling and offsets within range) and appends.
func (m *logModel) append(bs []*mBatch, size int64) {
	first, maxTs := bs[0].base(), kbatch.NoTimestamp
	for _, b := range bs {
		maxTs = max(maxTs, b.maxTs())
	}
	a := m.active()
	roll := a.size() > m.cfg.segmentBytes-size ||
		(a.size() > 0 && a.batches[0].maxTs() >= 0 && maxTs-a.batches[0].maxTs() > m.cfg.segmentMs)
	if roll {
		m.roll(first)
	}
	m.active().batches = append(m.active().batches, bs...)
	m.logEnd = bs[len(bs)-1].last() + 1
}

func (m *logModel) roll(base int64) {
	if m.active().size() == 0 {
		m.segs[len(m.segs)-1] = &mSeg{base: base}
		return
	}
	m.segs = append(m.segs, &mSeg{base: base})
}

// deleteWhile is UnifiedLog.deletableSegments and deleteSegments.
func (m *logModel) deleteWhile(pred func(s, next *mSeg) bool) int {
	n := 0
	for i, s := range m.segs {
		var next *mSeg
		if i+1 < len(m.segs) {
			next = m.segs[i+1]
		}
		if (next == nil && s.size() == 0) || !pred(s, next) {
			break
		}
		n++
	}
	if n == 0 {
		return 0
	}
	if n == len(m.segs) {
		m.roll(m.logEnd)
	}
	m.segs = m.segs[n:]
	m.logStart = max(m.logStart, m.segs[0].base)
	return n
}

func (m *logModel) deleteOld(now int64) int {
	n := m.deleteWhile(func(_, next *mSeg) bool { return next != nil && next.base <= m.logStart })
	if !m.cfg.policy.Delete() {
		return n
	}
	if rb := m.cfg.retentionBytes; rb > 0 {
		diff := m.size() - rb
		n += m.deleteWhile(func(s, _ *mSeg) bool {
			if diff-s.size() < 0 {
				return false
			}
			diff -= s.size()
			return true
		})
	}
	if m.cfg.retentionMs < 0 {
		return n
	}
	n += m.deleteWhile(func(s, _ *mSeg) bool {
		ts := s.maxTs()
		// No timestamp: the file's modification time, in wall time, is
		// later than any test clock: never old enough.
		return ts >= 0 && now-ts > m.cfg.retentionMs
	})
	return n
}

// read is what Read must return: the batches of the segment holding
// offset from the first whose last offset reaches it, up to maxBytes but
// at least one.
func (m *logModel) read(offset int64, maxBytes int) []byte {
	i := 0
	for i+1 < len(m.segs) && m.segs[i+1].base <= offset {
		i++
	}
	for ; i < len(m.segs); i++ {
		for j, b := range m.segs[i].batches {
			if b.last() < offset {
				continue
			}
			out := slices.Clone(b.raw)
			for _, nb := range m.segs[i].batches[j+1:] {
				if len(out)+len(nb.raw) > maxBytes {
					break
				}
				out = append(out, nb.raw...)
			}
			return out
		}
	}
	return nil
}

// offsetForTimestamp: in the first segment whose greatest timestamp reaches
// ts (then the next such), the first record at or after the log start
// offset whose timestamp does.
func (m *logModel) offsetForTimestamp(ts int64) (ltRec, bool) {
	for _, s := range m.segs {
		if s.maxTs() < ts {
			continue
		}
		for _, b := range s.batches {
			for _, r := range b.recs {
				if r.TS >= ts && r.Offset >= m.logStart {
					return r, true
				}
			}
		}
	}
	return ltRec{}, false
}

// records returns the records at or after the log start offset.
func (m *logModel) records() []ltRec {
	var out []ltRec
	for _, s := range m.segs {
		for _, b := range s.batches {
			for _, r := range b.recs {
				if r.Offset >= m.logStart {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// syncFrom replaces the model's segments with the Log's, after a clean the
// test has checked.
func (m *logModel) syncFrom(t testing.TB, l *Log) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	m.segs = nil
	for _, s := range l.mu.segs {
		data := make([]byte, s.size)
		_, err := s.file.ReadAt(data, 0)
		require.NoError(t, err)
		ms := &mSeg{base: s.base}
		it := kbatch.NewBatchIter(data)
		for it.Next() {
			raw := slices.Clone([]byte(it.Batch()))
			ms.batches = append(ms.batches, &mBatch{raw: raw, recs: ltDecode(t, raw)})
		}
		require.NoError(t, it.Err())
		m.segs = append(m.segs, ms)
	}
}

type logMachine struct {
	t       *testing.T
	dir     string
	opts    *LogOptions
	clock   *fakeclock.Clock
	l       *Log
	m       *logModel
	keys    []string
	reopens int
}

func (lm *logMachine) check(rt *rapid.T) {
	l, m := lm.l, lm.m
	if l.EarliestOffset() != m.logStart || l.LatestOffset() != m.logEnd || l.Size() != m.size() {
		rt.Fatalf("offsets [%d, %d) size %d; model [%d, %d) size %d", l.EarliestOffset(), l.LatestOffset(), l.Size(), m.logStart, m.logEnd, m.size())
	}
	segs := l.Segments()
	if len(segs) != len(m.segs) {
		rt.Fatalf("%d segments, model %d", len(segs), len(m.segs))
	}
	for i, s := range segs {
		if s.BaseOffset != m.segs[i].base || s.Size != m.segs[i].size() || s.LargestTimestamp != m.segs[i].maxTs() {
			rt.Fatalf("segment %d: %+v, model base %d size %d max ts %d", i, s, m.segs[i].base, m.segs[i].size(), m.segs[i].maxTs())
		}
	}
}

func (lm *logMachine) appendBatches(rt *rapid.T) {
	ctx := context.Background()
	n := rapid.IntRange(1, 3).Draw(rt, "batches")
	off := lm.m.logEnd + rapid.Int64Range(0, 3).Draw(rt, "gap")*rapid.Int64Range(0, 1).Draw(rt, "hasGap")
	var raw []byte
	var bs []*mBatch
	now := lm.clock.Now().UnixMilli()
	for range n {
		count := rapid.IntRange(1, 4).Draw(rt, "records")
		var recs []ltRec
		for j := range count {
			r := ltRec{Offset: off + int64(j), TS: now + rapid.Int64Range(-3600_000, 60_000).Draw(rt, "tsDelta"),
				Key: rapid.SampledFrom(lm.keys).Draw(rt, "key")}
			if rapid.IntRange(0, 5).Draw(rt, "tombstone?") != 0 || !lm.opts.CleanupPolicy.Compact() {
				r.Value = []byte(fmt.Sprintf("v%d-%s", r.Offset, bytes.Repeat([]byte{'x'}, rapid.IntRange(0, 120).Draw(rt, "valueSize"))))
			}
			recs = append(recs, r)
		}
		b := ltBatchCodec(lm.t, rapid.SampledFrom(kbatch.Codecs).Draw(rt, "codec"), off, recs...)
		raw = append(raw, b...)
		bs = append(bs, &mBatch{raw: b, recs: recs})
		off += int64(count) + rapid.Int64Range(0, 2).Draw(rt, "innerGap")
	}
	if int64(len(raw)) > lm.m.cfg.segmentBytes {
		_, err := lm.l.Append(ctx, raw)
		if !errors.Is(err, kafkaerr.ErrRecordListTooLarge) {
			rt.Fatalf("append of %d bytes: %v", len(raw), err)
		}
		return
	}
	if _, err := lm.l.Append(ctx, raw); err != nil {
		rt.Fatalf("append: %v", err)
	}
	lm.m.append(bs, int64(len(raw)))
}

func (lm *logMachine) appendBehind(rt *rapid.T) {
	if lm.m.logEnd == 0 {
		rt.Skip("empty log")
	}
	off := rapid.Int64Range(0, lm.m.logEnd-1).Draw(rt, "offset")
	_, err := lm.l.Append(context.Background(), ltBatch(lm.t, off, ltRec{TS: ltT0, Key: "k"}))
	if !errors.Is(err, ErrOffsetsOutOfOrder) {
		rt.Fatalf("append at %d below %d: %v", off, lm.m.logEnd, err)
	}
}

func (lm *logMachine) read(rt *rapid.T) {
	off := rapid.Int64Range(lm.m.logStart-2, lm.m.logEnd+2).Draw(rt, "offset")
	maxBytes := rapid.IntRange(0, 3000).Draw(rt, "maxBytes")
	res, err := lm.l.Read(context.Background(), off, maxBytes)
	switch {
	case off < lm.m.logStart || off > lm.m.logEnd:
		if kafkaerr.CodeOf(err) != kafkaerr.OffsetOutOfRange {
			rt.Fatalf("read %d outside [%d, %d]: %v", off, lm.m.logStart, lm.m.logEnd, err)
		}
	case err != nil:
		rt.Fatalf("read %d: %v", off, err)
	case off == lm.m.logEnd:
		if len(res.Records) != 0 {
			rt.Fatalf("read at the log end offset returned %d bytes", len(res.Records))
		}
	default:
		if want := lm.m.read(off, maxBytes); !bytes.Equal(want, res.Records) {
			rt.Fatalf("read %d max %d: %d bytes, model %d", off, maxBytes, len(res.Records), len(want))
		}
	}
}

func (lm *logMachine) readTimestamp(rt *rapid.T) {
	ts := lm.clock.Now().UnixMilli() + rapid.Int64Range(-5*3600_000, 120_000).Draw(rt, "tsDelta")
	got, found, err := lm.l.OffsetForTimestamp(context.Background(), ts)
	if err != nil {
		rt.Fatalf("OffsetForTimestamp(%d): %v", ts, err)
	}
	want, wantFound := lm.m.offsetForTimestamp(ts)
	if found != wantFound || (found && (got.Offset != want.Offset || got.Timestamp != want.TS)) {
		rt.Fatalf("OffsetForTimestamp(%d) = %+v %v, model %v %v", ts, got, found, want, wantFound)
	}
}

func (lm *logMachine) roll(rt *rapid.T) {
	if err := lm.l.Roll(context.Background()); err != nil {
		rt.Fatalf("roll: %v", err)
	}
	if lm.m.active().size() > 0 {
		lm.m.roll(lm.m.logEnd)
	}
}

func (lm *logMachine) advanceClock(rt *rapid.T) {
	lm.clock.Advance(time.Duration(rapid.Int64Range(1, 2*3600_000).Draw(rt, "ms")) * time.Millisecond)
}

func (lm *logMachine) deleteOld(rt *rapid.T) {
	n, err := lm.l.DeleteOldSegments(context.Background())
	if err != nil {
		rt.Fatalf("DeleteOldSegments: %v", err)
	}
	if want := lm.m.deleteOld(lm.clock.Now().UnixMilli()); n != want {
		rt.Fatalf("DeleteOldSegments deleted %d, model %d", n, want)
	}
}

func (lm *logMachine) deleteRecords(rt *rapid.T) {
	off := rapid.Int64Range(lm.m.logStart-2, lm.m.logEnd+1).Draw(rt, "offset")
	start, err := lm.l.DeleteRecords(context.Background(), off)
	if off == DeleteRecordsHighWatermark {
		off = lm.m.logEnd
	}
	if off > lm.m.logEnd || off < 0 {
		if kafkaerr.CodeOf(err) != kafkaerr.OffsetOutOfRange {
			rt.Fatalf("DeleteRecords(%d) beyond %d: %v", off, lm.m.logEnd, err)
		}
		return
	}
	if err != nil {
		rt.Fatalf("DeleteRecords(%d): %v", off, err)
	}
	lm.m.logStart = max(lm.m.logStart, off)
	lm.m.deleteWhile(func(_, next *mSeg) bool { return next != nil && next.base <= lm.m.logStart })
	if start != lm.m.logStart {
		rt.Fatalf("DeleteRecords(%d) = %d, model %d", off, start, lm.m.logStart)
	}
}

// compact checks what a clean may do, then takes the Log's segments as the
// model's: records only go (never change or move), the latest record of
// each key stays unless it is a tombstone past its horizon, a record goes
// only when a later one has its key or it has no key or it is such a
// tombstone, and the active segment is untouched.
func (lm *logMachine) compact(rt *rapid.T) {
	before := lm.m.records()
	activeBefore := slices.Clone(lm.m.active().batches)
	horizonOf := map[int64]int64{} // offset -> delete horizon of its batch, if set
	for _, s := range lm.m.segs {
		for _, b := range s.batches {
			if h, ok := kbatch.Batch(b.raw).DeleteHorizon(); ok {
				for _, r := range b.recs {
					horizonOf[r.Offset] = h
				}
			}
		}
	}
	if _, err := lm.l.Compact(context.Background()); err != nil {
		rt.Fatalf("compact: %v", err)
	}
	now := lm.clock.Now().UnixMilli()
	lm.m.syncFrom(lm.t, lm.l)
	after := lm.m.records()
	kept := map[int64]ltRec{}
	for _, r := range after {
		kept[r.Offset] = r
	}
	latest := map[string]int64{}
	for _, r := range before {
		latest[r.Key] = r.Offset
	}
	i := 0
	for _, r := range before {
		if k, ok := kept[r.Offset]; ok {
			if k.Key != r.Key || !bytes.Equal(k.Value, r.Value) || k.TS != r.TS {
				rt.Fatalf("record %v became %v", r, k)
			}
			i++
			continue
		}
		if r.Key == "" {
			continue // a record without a key may always go
		}
		h, hasHorizon := horizonOf[r.Offset]
		expired := r.Value == nil && hasHorizon && now >= h
		if latest[r.Key] == r.Offset && !expired {
			rt.Fatalf("the latest record of %q, %v, is gone", r.Key, r)
		}
		if latest[r.Key] == r.Offset && r.Value != nil {
			rt.Fatalf("record %v went without reason", r)
		}
	}
	if i != len(after) {
		rt.Fatalf("compaction added records: %d kept of %d, %d after", i, len(before), len(after))
	}
	for j, b := range lm.m.active().batches {
		if j >= len(activeBefore) || !bytes.Equal(b.raw, activeBefore[j].raw) {
			rt.Fatalf("the active segment changed")
		}
	}
}

func (lm *logMachine) reopen(rt *rapid.T) {
	if err := lm.l.Close(); err != nil {
		rt.Fatalf("close: %v", err)
	}
	l, err := OpenLog(context.Background(), lm.dir, lm.opts)
	if err != nil {
		rt.Fatalf("reopen: %v", err)
	}
	lm.l = l
	lm.reopens++
}

// crashReopen syncs, copies the directory as a crash would leave it and
// opens the copy: recovery must find everything.
func (lm *logMachine) crashReopen(rt *rapid.T) {
	if err := lm.l.Sync(context.Background()); err != nil {
		rt.Fatalf("sync: %v", err)
	}
	dir := ltCopyDir(lm.t, lm.dir)
	if err := lm.l.Close(); err != nil {
		rt.Fatalf("close: %v", err)
	}
	l, err := OpenLog(context.Background(), dir, lm.opts)
	if err != nil {
		rt.Fatalf("open after crash: %v", err)
	}
	lm.l, lm.dir = l, dir
	lm.reopens++
}

func TestLogModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := newLtClock(ltT0)
		policy := rapid.SampledFrom([]CleanupPolicy{CleanupDelete, CleanupCompact, CleanupCompactDelete}).Draw(rt, "policy")
		opts := &LogOptions{
			SegmentBytes:           rapid.SampledFrom([]int{600, 1200, 3000}).Draw(rt, "segmentBytes"),
			SegmentTime:            time.Duration(rapid.SampledFrom([]int64{30, 90, 100000}).Draw(rt, "segmentMinutes")) * time.Minute,
			IndexIntervalBytes:     rapid.SampledFrom([]int{1, 64, 300}).Draw(rt, "indexInterval"),
			RetentionTime:          time.Duration(rapid.SampledFrom([]int64{-1, 1, 3}).Draw(rt, "retentionHours")) * time.Hour,
			RetentionBytes:         rapid.SampledFrom([]int64{0, 2000, 5000}).Draw(rt, "retentionBytes"),
			CleanupPolicy:          policy,
			DeleteRetention:        time.Duration(rapid.SampledFrom([]int64{-1, 1800_000}).Draw(rt, "deleteRetentionMs")) * time.Millisecond,
			MinCleanableDirtyRatio: rapid.SampledFrom([]float64{-1, 0.3, 0.7}).Draw(rt, "dirtyRatio"),
			Clock:                  clock.Now,
		}
		cfg, err := resolveLogOptions(opts)
		require.NoError(t, err)
		dir, err := os.MkdirTemp(t.TempDir(), "model")
		require.NoError(t, err)
		l, err := OpenLog(context.Background(), dir, opts)
		require.NoError(t, err)
		lm := &logMachine{t: t, dir: dir, opts: opts, clock: clock, l: l,
			m:    &logModel{cfg: cfg, segs: []*mSeg{{base: 0}}},
			keys: []string{"a", "b", "c", "d", "e", "f", ""}}
		defer func() { _ = lm.l.Close() }()
		actions := map[string]func(*rapid.T){
			"":              lm.check,
			"append":        lm.appendBatches,
			"appendBehind":  lm.appendBehind,
			"read":          lm.read,
			"readTimestamp": lm.readTimestamp,
			"roll":          lm.roll,
			"advanceClock":  lm.advanceClock,
			"deleteOld":     lm.deleteOld,
			"deleteRecords": lm.deleteRecords,
			"reopen":        lm.reopen,
			"crashReopen":   lm.crashReopen,
		}
		if policy.Compact() {
			actions["compact"] = lm.compact
		}
		rt.Repeat(actions)
		// Finally every record reads back, one batch at a time.
		got := ltReadAll(t, lm.l)
		if want := lm.m.records(); len(want) > 0 || len(got) > 0 {
			require.Equal(t, want, got)
		}
	})
}
