package segment

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// One writer, a maintenance goroutine (compaction, retention,
// DeleteRecords, Sync) and many readers at once: a read never fails
// because the segment it reads was rolled, deleted or compacted under it,
// and what it returns is whole, valid batches of the records appended.
func TestLogConcurrentReadersWriterMaintenance(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
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
	l := ltOpen(t, dir, opts)
	ctx := context.Background()
	value := func(off int64) []byte { return fmt.Appendf(nil, "value-%d", off) }

	var stop atomic.Bool
	var reads, outOfRange atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			var rr kbatch.RecordReader
			for !stop.Load() {
				start, end := l.EarliestOffset(), l.LatestOffset()
				off := start + rng.Int64N(end-start+1)
				res, err := l.Read(ctx, off, rng.IntN(4096))
				if kafkaerr.CodeOf(err) == kafkaerr.OffsetOutOfRange && off < l.EarliestOffset() {
					outOfRange.Add(1)
					continue // the log start offset rose meanwhile
				}
				if err != nil {
					fail(fmt.Errorf("read %d in [%d, %d]: %w", off, start, end, err))
					return
				}
				reads.Add(1)
				it := kbatch.NewBatchIter(res.Records)
				first := true
				for it.Next() {
					b := it.Batch()
					if err := b.CheckCRC(); err != nil {
						fail(err)
						return
					}
					if first && b.LastOffset() < off {
						fail(fmt.Errorf("read %d returned a batch ending at %d", off, b.LastOffset()))
						return
					}
					first = false
					if err := rr.Reset(b); err != nil {
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
				if it.Err() != nil || it.Partial() {
					fail(fmt.Errorf("read %d: bad framing %v", off, it.Err()))
					return
				}
				if rng.IntN(20) == 0 {
					if _, _, err := l.OffsetForTimestamp(ctx, ltT0+rng.Int64N(2000)); err != nil {
						fail(err)
						return
					}
					_ = l.Segments()
					_ = l.Size()
				}
			}
		}(uint64(r))
	}
	maintDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(maintDone)
		rng := rand.New(rand.NewPCG(9, 9))
		for i := 0; !stop.Load(); i++ {
			var err error
			switch i % 4 {
			case 0:
				_, err = l.Compact(ctx)
			case 1:
				_, err = l.DeleteOldSegments(ctx)
			case 2:
				start, end := l.EarliestOffset(), l.LatestOffset()
				if end-start > 200 {
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

	const appends = 1500
	for i := int64(0); i < appends; i++ {
		off := l.LatestOffset()
		var recs []ltRec
		for j := int64(0); j < 3; j++ {
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
	<-maintDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Positive(t, reads.Load())
	t.Logf("%d reads, %d out of range while the log start offset rose, %d segments", reads.Load(), outOfRange.Load(), len(l.Segments()))

	want := ltReadAll(t, l)
	require.NoError(t, l.Close())
	l2 := ltOpen(t, dir, opts)
	require.Equal(t, want, ltReadAll(t, l2))
}
