package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// sfOptions give small segments with several index entries each.
func sfOptions() *LogOptions {
	return &LogOptions{SegmentBytes: 1024, IndexIntervalBytes: 100, RetentionTime: -1, Clock: newLtClock(ltT0).Now}
}

// sfBuild appends 40 one-batch appends (timestamps going back now and
// then, offsets skipping now and then) and returns the log.
func sfBuild(t testing.TB, dir string) *Log {
	l := ltOpen(t, dir, sfOptions())
	for i := int64(0); i < 40; i++ {
		off := l.LatestOffset() + i%3/2
		ltAppend(t, l, ltBatch(t, off, ltKV(off, int(1+i%3), ltT0+off*10-(i%4)*7, ltKey)...))
	}
	require.Greater(t, len(l.Segments()), 3)
	return l
}

// sfCheck checks a SegmentFiles against the log it came from: the .log
// holds the log's batches of [BaseOffset, EndOffset], and the indexes
// point where Kafka's lookups need them to.
func sfCheck(t testing.TB, sf SegmentFiles, next int64) {
	t.Helper()
	require.Equal(t, next-1, sf.EndOffset)
	require.Zero(t, len(sf.Index)%8)
	require.Zero(t, len(sf.TimeIndex)%12)
	starts := map[int64]kbatch.Batch{}
	maxTs := int64(kbatch.NoTimestamp)
	it := kbatch.NewBatchIter(sf.Log)
	for it.Next() {
		b := it.Batch()
		require.NoError(t, b.CheckCRC())
		require.GreaterOrEqual(t, b.BaseOffset(), sf.BaseOffset)
		require.LessOrEqual(t, b.LastOffset(), sf.EndOffset)
		starts[int64(it.Pos())] = b
		maxTs = max(maxTs, b.MaxTimestamp())
	}
	require.NoError(t, it.Err())
	require.False(t, it.Partial())
	require.Equal(t, maxTs, sf.MaxTimestamp)
	_, err := checkOffsetIndex(sf.Index, sf.BaseOffset, int64(len(sf.Log)))
	require.NoError(t, err)
	lastTim, err := checkTimeIndex(sf.TimeIndex, sf.BaseOffset, sf.EndOffset)
	require.NoError(t, err)
	if len(sf.Log) > 0 {
		require.Equal(t, maxTs, lastTim.timestamp, "the last time index entry holds the segment's max timestamp")
	}
	for i := 0; i < len(sf.Index); i += 8 {
		e := decodeOffsetEntry(sf.Index[i:], sf.BaseOffset)
		b, ok := starts[e.position]
		require.True(t, ok, "offset index entry %d points at %d, not a batch", i/8, e.position)
		require.LessOrEqual(t, b.LastOffset(), e.offset)
	}
	// Every offset is found by Kafka's lookup and scan.
	for pos, b := range starts {
		for o := b.BaseOffset(); o <= b.LastOffset(); o++ {
			_, p := LookupOffsetIndex(sf.Index, sf.BaseOffset, o)
			require.LessOrEqual(t, p, pos)
			_, ok := starts[p]
			require.True(t, ok || p == 0)
		}
	}
}

func TestSegmentFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := sfBuild(t, dir)
	segs := l.Segments()

	for i, s := range segs[:len(segs)-1] {
		sf, err := l.SegmentFiles(ctx, s.BaseOffset)
		require.NoError(t, err)
		require.Equal(t, s.BaseOffset, sf.BaseOffset)
		require.Equal(t, s.LargestTimestamp, sf.MaxTimestamp)
		require.Equal(t, ltReadFile(t, ltSegPath(dir, s.BaseOffset, logFileExt)), sf.Log)
		require.Equal(t, ltReadFile(t, ltSegPath(dir, s.BaseOffset, indexFileExt)), sf.Index)
		require.Equal(t, ltReadFile(t, ltSegPath(dir, s.BaseOffset, timeIndexFileExt)), sf.TimeIndex)
		require.Nil(t, sf.TxnIndex)
		require.NotEmpty(t, sf.Index)
		sfCheck(t, sf, segs[i+1].BaseOffset)
	}
	_, err := l.SegmentFiles(ctx, segs[len(segs)-1].BaseOffset)
	require.ErrorIs(t, err, ErrActiveSegment)
	_, err = l.SegmentFiles(ctx, segs[1].BaseOffset+1)
	require.ErrorIs(t, err, ErrNoSuchSegment)
	_, err = l.SegmentFiles(ctx, segs[len(segs)-1].BaseOffset+1000)
	require.ErrorIs(t, err, ErrNoSuchSegment)
	_, err = l.SegmentFiles(ctx, -1)
	require.ErrorIs(t, err, ErrNoSuchSegment)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.SegmentFiles(canceled, segs[0].BaseOffset)
	require.ErrorIs(t, err, context.Canceled)

	// Kafka's .txnindex beside segment 0: its whole entries within the
	// segment come back; a Log reads it only from the files it loads.
	end0 := segs[1].BaseOffset - 1
	var txn []byte
	for _, last := range []int64{end0 - 1, end0, end0 + 5} {
		txn = binary.BigEndian.AppendUint16(txn, 0)
		txn = binary.BigEndian.AppendUint64(txn, 77)
		txn = binary.BigEndian.AppendUint64(txn, 0)
		txn = binary.BigEndian.AppendUint64(txn, uint64(last))
		txn = binary.BigEndian.AppendUint64(txn, uint64(last+1))
	}
	txn = append(txn, 0, 0, 1) // a torn entry
	require.NoError(t, l.Close())
	_, err = l.SegmentFiles(ctx, segs[0].BaseOffset)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, os.WriteFile(ltSegPath(dir, segs[0].BaseOffset, txnIndexFileExt), txn, 0o644))

	// Reopened, the indexes are loaded, not written by this Log: they are
	// rebuilt from the .log, and match what the appends wrote.
	l = ltOpen(t, dir, sfOptions())
	for i, s := range segs[:len(segs)-1] {
		sf, err := l.SegmentFiles(ctx, s.BaseOffset)
		require.NoError(t, err)
		require.Equal(t, ltReadFile(t, ltSegPath(dir, s.BaseOffset, indexFileExt)), sf.Index)
		require.Equal(t, ltReadFile(t, ltSegPath(dir, s.BaseOffset, timeIndexFileExt)), sf.TimeIndex)
		sfCheck(t, sf, segs[i+1].BaseOffset)
		if i == 0 {
			require.Equal(t, txn[:2*txnIndexEntrySize], sf.TxnIndex)
		} else {
			require.Nil(t, sf.TxnIndex)
		}
	}

	// A wrong index on disk is not handed out: it is rebuilt.
	require.NoError(t, l.Close())
	require.NoError(t, os.WriteFile(ltSegPath(dir, segs[1].BaseOffset, indexFileExt), []byte{0, 0, 0, 0, 0, 0, 0, 0}, 0o644))
	l = ltOpen(t, dir, sfOptions())
	sf, err := l.SegmentFiles(ctx, segs[1].BaseOffset)
	require.NoError(t, err)
	sfCheck(t, sf, segs[2].BaseOffset)
	require.NotEqual(t, []byte{0, 0, 0, 0, 0, 0, 0, 0}, sf.Index)

	// The .txnindex is read through the file the Log opened: a reader
	// that holds the segment reads it after the segment is deleted.
	l.mu.RLock()
	s0 := l.mu.segs[0]
	require.Equal(t, segs[0].BaseOffset, s0.base)
	s0.acquire()
	l.mu.RUnlock()
	_, err = l.DeleteRecords(ctx, segs[1].BaseOffset)
	require.NoError(t, err)
	_, err = os.Stat(ltSegPath(dir, segs[0].BaseOffset, txnIndexFileExt))
	require.ErrorIs(t, err, os.ErrNotExist)
	held, err := readWhole(s0.txn, int64(len(txn)))
	require.NoError(t, err)
	require.Equal(t, txn, held)
	s0.release()
	_, err = l.SegmentFiles(ctx, segs[0].BaseOffset)
	require.ErrorIs(t, err, ErrNoSuchSegment)
}

// A corrupt .log is refused rather than handed out.
func TestSegmentFilesCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := sfBuild(t, dir)
	segs := l.Segments()
	require.NoError(t, l.Close())
	path := ltSegPath(dir, segs[0].BaseOffset, logFileExt)
	data := ltReadFile(t, path)
	data[len(data)-3] ^= 0xff // inside the last record: the CRC no longer matches
	require.NoError(t, os.WriteFile(path, data, 0o644))
	l = ltOpen(t, dir, sfOptions()) // a clean shutdown: the log is trusted as it is
	_, err := l.SegmentFiles(ctx, segs[0].BaseOffset)
	require.ErrorIs(t, err, ErrCorruptSegment)
}

// The lookups over raw index bytes find what the Log finds, and what a
// scan of the records finds, as LogSegment.findOffsetByTimestamp does.
func TestLookupIndexesOverSegmentFiles(t *testing.T) {
	ctx := context.Background()
	l := sfBuild(t, t.TempDir())
	segs := l.Segments()
	var rr kbatch.RecordReader
	for _, s := range segs[:len(segs)-1] {
		sf, err := l.SegmentFiles(ctx, s.BaseOffset)
		require.NoError(t, err)
		off := indexView{mem: sf.Index, n: len(sf.Index) / 8, entrySize: 8}
		tim := indexView{mem: sf.TimeIndex, n: len(sf.TimeIndex) / 12, entrySize: 12}
		for target := s.BaseOffset - 2; target <= sf.EndOffset+2; target++ {
			want, err := off.lookupOffset(s.BaseOffset, target)
			require.NoError(t, err)
			o, p := LookupOffsetIndex(sf.Index, s.BaseOffset, target)
			require.Equal(t, want.offset, o)
			require.Equal(t, want.position, p)
		}
		for ts := ltT0 - 100; ts <= s.LargestTimestamp+20; ts++ {
			want, err := tim.lookupTime(s.BaseOffset, ts)
			require.NoError(t, err)
			gotTs, gotOff, found := LookupTimeIndex(sf.TimeIndex, s.BaseOffset, ts)
			require.Equal(t, want.timestamp, gotTs)
			require.Equal(t, want.offset, gotOff)
			require.Equal(t, want.found, found)

			// findOffsetByTimestamp over the remote files: from the time
			// index entry, the offset index, then a scan.
			_, pos := LookupOffsetIndex(sf.Index, s.BaseOffset, gotOff)
			var foundOff, scanOff int64 = -1, -1
			it := kbatch.NewBatchIter(sf.Log[pos:])
			for foundOff < 0 && it.Next() {
				require.NoError(t, rr.Reset(it.Batch()))
				for rr.Next() {
					if rr.Record().Timestamp >= ts {
						foundOff = rr.Record().Offset
						break
					}
				}
			}
			it = kbatch.NewBatchIter(sf.Log)
			for scanOff < 0 && it.Next() {
				require.NoError(t, rr.Reset(it.Batch()))
				for rr.Next() {
					if rr.Record().Timestamp >= ts {
						scanOff = rr.Record().Offset
						break
					}
				}
			}
			require.Equal(t, scanOff, foundOff, "ts %d", ts)
		}
	}
}

// The lookups over bytes of any shape: Kafka's answers where the entries
// ascend, and no panic where they do not.
func TestLookupIndexBytes(t *testing.T) {
	idx := append(encodeOffsetEntry(encodeOffsetEntry(nil, 5, 100), 9, 300), 1, 2, 3) // a torn tail is ignored
	for _, c := range []struct{ target, off, pos int64 }{
		{0, 1000, 0}, {1004, 1000, 0}, {1005, 1005, 100}, {1008, 1005, 100}, {1009, 1009, 300}, {5000, 1009, 300},
	} {
		o, p := LookupOffsetIndex(idx, 1000, c.target)
		require.Equal(t, c.off, o, "target %d", c.target)
		require.Equal(t, c.pos, p, "target %d", c.target)
	}
	o, p := LookupOffsetIndex(nil, 7, 100)
	require.Equal(t, int64(7), o)
	require.Zero(t, p)

	tim := append(encodeTimeEntry(encodeTimeEntry(nil, 50, 3), 80, 7), 9)
	for _, c := range []struct {
		ts, wantTs, wantOff int64
		found               bool
	}{
		{49, kbatch.NoTimestamp, 1000, false}, {50, 50, 1003, true}, {79, 50, 1003, true}, {80, 80, 1007, true}, {1 << 60, 80, 1007, true},
	} {
		ts, off, found := LookupTimeIndex(tim, 1000, c.ts)
		require.Equal(t, c.wantTs, ts, "ts %d", c.ts)
		require.Equal(t, c.wantOff, off, "ts %d", c.ts)
		require.Equal(t, c.found, found, "ts %d", c.ts)
	}
	ts, off, found := LookupTimeIndex(nil, 7, 100)
	require.Equal(t, kbatch.NoTimestamp, ts)
	require.Equal(t, int64(7), off)
	require.False(t, found)
}

// SegmentFiles while the log appends, rolls, compacts, deletes by
// retention and DeleteRecords, and syncs: every call either finds the
// segment gone or returns its files whole and consistent, with the
// records the writer appended.
func TestSegmentFilesConcurrent(t *testing.T) {
	clock := newLtClock(ltT0)
	opts := &LogOptions{
		SegmentBytes:           2048,
		IndexIntervalBytes:     128,
		CleanupPolicy:          CleanupCompactDelete,
		MinCleanableDirtyRatio: -1,
		RetentionBytes:         16 << 10,
		RetentionTime:          -1,
		DeleteRetention:        -1,
		Clock:                  clock.Now,
	}
	l := ltOpen(t, t.TempDir(), opts)
	ctx := context.Background()
	value := func(off int64) []byte { return fmt.Appendf(nil, "value-%d", off) }

	var stop atomic.Bool
	var got, gone atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for r := range 4 {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 2))
			var rr kbatch.RecordReader
			for !stop.Load() {
				segs := l.Segments()
				if len(segs) < 2 {
					continue
				}
				i := rng.IntN(len(segs) - 1)
				sf, err := l.SegmentFiles(ctx, segs[i].BaseOffset)
				if errors.Is(err, ErrNoSuchSegment) {
					gone.Add(1)
					continue // deleted or cleaned into another meanwhile
				}
				if err != nil {
					fail(fmt.Errorf("segment %d: %w", segs[i].BaseOffset, err))
					return
				}
				got.Add(1)
				if err := sfConsistent(sf); err != nil {
					fail(fmt.Errorf("segment %d: %w", sf.BaseOffset, err))
					return
				}
				it := kbatch.NewBatchIter(sf.Log)
				for it.Next() {
					if err := rr.Reset(it.Batch()); err != nil {
						fail(err)
						return
					}
					for rr.Next() {
						if r := rr.Record(); r.Value != nil && !bytes.Equal(r.Value, value(r.Offset)) {
							fail(fmt.Errorf("offset %d holds %q", r.Offset, r.Value))
							return
						}
					}
				}
			}
		}(uint64(r))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		for i := 0; !stop.Load(); i++ {
			var err error
			switch i % 4 {
			case 0:
				_, err = l.Compact(ctx)
			case 1:
				_, err = l.DeleteOldSegments(ctx)
			case 2:
				if start, end := l.EarliestOffset(), l.LatestOffset(); end-start > 200 {
					_, err = l.DeleteRecords(ctx, start+rng.Int64N(50))
				}
			case 3:
				err = l.Sync(ctx)
			}
			if err != nil {
				fail(fmt.Errorf("maintenance %d: %w", i%4, err))
				return
			}
		}
	}()

	for i := int64(0); i < 1500; i++ {
		off := l.LatestOffset()
		var recs []ltRec
		for j := range int64(3) {
			o := off + j
			r := ltRec{TS: ltT0 + o, Key: fmt.Sprint("k", rand.IntN(40)), Value: value(o)}
			if o%13 == 0 {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		ltAppend(t, l, ltBatchCodec(t, kbatch.Codecs[i%5], off, recs...))
		if i%97 == 0 {
			require.NoError(t, l.Roll(ctx))
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Positive(t, got.Load())
	t.Logf("%d segment reads, %d found gone", got.Load(), gone.Load())
}

// sfConsistent is sfCheck's checks, as an error for other goroutines.
func sfConsistent(sf SegmentFiles) error {
	starts := map[int64]kbatch.Batch{}
	maxTs := int64(kbatch.NoTimestamp)
	it := kbatch.NewBatchIter(sf.Log)
	for it.Next() {
		b := it.Batch()
		if err := b.CheckCRC(); err != nil {
			return err
		}
		if b.BaseOffset() < sf.BaseOffset || b.LastOffset() > sf.EndOffset {
			return fmt.Errorf("batch %d..%d outside [%d, %d]", b.BaseOffset(), b.LastOffset(), sf.BaseOffset, sf.EndOffset)
		}
		starts[int64(it.Pos())] = b
		maxTs = max(maxTs, b.MaxTimestamp())
	}
	if it.Err() != nil || it.Partial() {
		return fmt.Errorf("bad framing: %v", it.Err())
	}
	if maxTs != sf.MaxTimestamp {
		return fmt.Errorf("max timestamp %d, the batches say %d", sf.MaxTimestamp, maxTs)
	}
	if _, err := checkOffsetIndex(sf.Index, sf.BaseOffset, int64(len(sf.Log))); err != nil {
		return err
	}
	last, err := checkTimeIndex(sf.TimeIndex, sf.BaseOffset, sf.EndOffset)
	if err != nil {
		return err
	}
	if len(sf.Log) > 0 && last.timestamp != maxTs {
		return fmt.Errorf("last time index entry %d, max timestamp %d", last.timestamp, maxTs)
	}
	for i := 0; i < len(sf.Index); i += offsetIndexEntrySize {
		e := decodeOffsetEntry(sf.Index[i:], sf.BaseOffset)
		if b, ok := starts[e.position]; !ok || b.LastOffset() > e.offset {
			return fmt.Errorf("offset index entry (%d, %d) does not point at its batch", e.offset, e.position)
		}
	}
	return nil
}
