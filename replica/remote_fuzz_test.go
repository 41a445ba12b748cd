package replica

// Fuzz targets for what the replica package decodes from the bucket: a
// tiered segment's .log, .index and .timeindex as ReadRemote and
// RemoteOffsetForTimestamp read them, and a run of WAL batches as Inject
// rewrites it. Their seeds run under plain `go test`; `make fuzz` fuzzes
// them.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// fzObjects is an ObjectReader over files in memory that counts its reads
// and fails the test past a bound: a reader that never ends is a bug.
type fzObjects struct {
	t     *testing.T
	files map[string][]byte
	reads int
}

var errFzRange = errors.New("range outside the object")

func (o *fzObjects) ReadRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	o.reads++
	if o.reads > 10_000 {
		o.t.Fatalf("more than %d range reads: a read loop does not end", o.reads-1)
	}
	d, ok := o.files[key]
	if !ok || off < 0 || n < 0 || off > int64(len(d)) || n > int64(len(d))-off {
		return nil, fmt.Errorf("%w: %s [%d, +%d) of %d bytes", errFzRange, key, off, n, len(d))
	}
	return bytes.Clone(d[off : off+n]), nil
}

const fzT0 = int64(1_764_500_000_000)

// fzSegmentFiles builds a tiered segment as the offloader uploads one:
// batches of 1 to 3 records with ascending offsets (and a gap, as
// compaction leaves), an offset index entry every other batch (the batch's
// last offset, its position) and a time index entry beside each.
func fzSegmentFiles(t testing.TB, base int64, n int) (log, index, timeindex []byte) {
	off, maxTs := base, int64(-1)
	for i := range n {
		b := kbatch.NewBuilder(kbatch.Codecs[i%len(kbatch.Codecs)])
		b.SetBaseOffset(off)
		recs := i%3 + 1
		for r := range recs {
			b.Append(fzT0+int64(10*i-r), []byte("k"), bytes.Repeat([]byte{byte(i)}, 30*i))
		}
		raw, err := b.Build(nil)
		require.NoError(t, err)
		batch := kbatch.Batch(raw)
		if i%2 == 1 {
			index = binary.BigEndian.AppendUint32(index, uint32(batch.LastOffset()-base))
			index = binary.BigEndian.AppendUint32(index, uint32(len(log)))
			maxTs = max(maxTs, batch.MaxTimestamp())
			timeindex = binary.BigEndian.AppendUint64(timeindex, uint64(maxTs))
			timeindex = binary.BigEndian.AppendUint32(timeindex, uint32(batch.LastOffset()-base))
		}
		maxTs = max(maxTs, batch.MaxTimestamp())
		log = append(log, raw...)
		off = batch.NextOffset() + int64(i%4/3) // a gap now and then
	}
	return log, index, timeindex
}

// fzBatches walks log as a reader of the whole file would: the batches,
// their positions, and whether the file is batches and nothing else.
func fzBatches(log []byte) (batches []kbatch.Batch, pos []int64, whole bool) {
	it := kbatch.NewBatchIter(log)
	for it.Next() {
		batches = append(batches, it.Batch())
		pos = append(pos, int64(it.Pos()))
	}
	return batches, pos, it.Err() == nil && !it.Partial()
}

// fzIndexConsistent reports whether every entry of the offset index names
// the start of a batch whose last offset is the entry's offset, above the
// last offset of every batch before it: what a lookup needs to skip
// nothing.
func fzIndexConsistent(index []byte, base int64, batches []kbatch.Batch, pos []int64) bool {
	for i := 0; i+8 <= len(index); i += 8 {
		off := base + int64(int32(binary.BigEndian.Uint32(index[i:])))
		p := int64(int32(binary.BigEndian.Uint32(index[i+4:])))
		k, found := slices.BinarySearch(pos, p)
		if !found || batches[k].LastOffset() != off {
			return false
		}
		for _, b := range batches[:k] {
			if b.LastOffset() >= off {
				return false
			}
		}
	}
	return true
}

// FuzzReadRemote: ReadRemote and RemoteOffsetForTimestamp never panic nor
// loop over any .log, .index and .timeindex bytes, fail only with a
// *kafkaerr.Error, and what ReadRemote returns is whole batches of the
// .log, in order, from one at or after offset, within limit (one batch at
// least). When the .log is batches and nothing else and the index is
// consistent with it, ReadRemote returns what a scan of the whole .log
// returns; and a record RemoteOffsetForTimestamp finds is in the .log, at
// or after offset, with a timestamp at or after the one asked for.
func FuzzReadRemote(f *testing.F) {
	log, index, timeindex := fzSegmentFiles(f, 100, 12)
	f.Add(log, index, timeindex, int64(100), int64(0), int64(1), fzT0)
	f.Add(log, index, timeindex, int64(100), int64(117), int64(500), fzT0+55)
	f.Add(log, index, timeindex, int64(100), int64(1000), int64(1<<20), int64(math.MaxInt64))
	f.Add(log, []byte{}, []byte{}, int64(100), int64(110), int64(100), fzT0+200)
	f.Add(log[:len(log)-5], index, timeindex, int64(100), int64(130), int64(1<<20), int64(-1))
	f.Add(log, index[:len(index)-3], timeindex[:len(timeindex)-5], int64(100), int64(120), int64(64<<10), fzT0)
	bad := slices.Clone(index)
	bad[7] ^= 0x10 // a position past the batch
	f.Add(log, bad, timeindex, int64(100), int64(125), int64(1<<20), fzT0+30)
	f.Add(fzMaxOffsetBatch(f), []byte{}, []byte{}, int64(0), int64(0), int64(1<<20), fzT0+1_000_000)
	big, _, _ := fzSegmentFiles(f, 0, 40) // more than one 64 KiB chunk
	f.Add(big, []byte{}, []byte{}, int64(0), int64(30), int64(100<<10), fzT0+300)
	f.Fuzz(func(t *testing.T, log, index, timeindex []byte, base, offset, limit, ts int64) {
		ctx := t.Context()
		batches, pos, whole := fzBatches(log)
		end := base
		for _, b := range batches {
			end = max(end, b.LastOffset())
		}
		seg := &coordinator.RemoteSegment{
			Key: "tiered/seg", BaseOffset: base, EndOffset: end, MaxTimestamp: fzT0 + 1000,
			Size: int64(len(log)), IndexSize: int64(len(index)), TimeIndexSize: int64(len(timeindex)),
		}
		objs := &fzObjects{t: t, files: map[string][]byte{
			seg.Key + ".log": log, seg.Key + ".index": index, seg.Key + ".timeindex": timeindex,
		}}
		limit = max(limit%(1<<21), 1)

		out, err := ReadRemote(ctx, objs, seg, offset, limit, nil)
		if err != nil {
			var se *kafkaerr.Error
			require.True(t, errors.As(err, &se), "not a *kafkaerr.Error: %v", err)
			require.Equal(t, kafkaerr.CorruptMessage, se.Code)
		}
		got, _, gotWhole := fzBatches(out)
		require.True(t, gotWhole, "ReadRemote returned a partial batch")
		if len(got) > 1 {
			require.LessOrEqual(t, int64(len(out)), limit, "past the limit")
		}
		for i, b := range got {
			require.GreaterOrEqual(t, b.LastOffset(), offset, "batch %d ends before offset %d", i, offset)
			require.True(t, bytes.Contains(log, b), "batch %d is not in the .log", i)
		}
		if whole && fzIndexConsistent(index, base, batches, pos) {
			require.NoError(t, err)
			var want []byte
			for _, b := range batches {
				if b.LastOffset() < offset {
					continue
				}
				if len(want) > 0 && int64(len(want)+len(b)) > limit {
					break
				}
				want = append(want, b...)
			}
			require.Equal(t, want, out)
		}

		objs.reads = 0
		off, fts, found, err := RemoteOffsetForTimestamp(ctx, objs, seg, offset, ts)
		if err != nil {
			var se *kafkaerr.Error
			require.True(t, errors.As(err, &se), "not a *kafkaerr.Error: %v", err)
			return
		}
		if !found {
			require.Equal(t, int64(-1), off)
			return
		}
		target := ts
		if ts == coordinator.MaxTimestamp {
			target = seg.MaxTimestamp
		}
		require.GreaterOrEqual(t, off, offset)
		require.GreaterOrEqual(t, fts, target)
		in := false
		var rr kbatch.RecordReader
		for _, b := range batches {
			if rr.Reset(b) != nil {
				continue
			}
			for rr.Next() {
				in = in || (rr.Record().Offset == off && rr.Record().Timestamp == fts)
			}
		}
		require.True(t, in, "record (%d, %d) is not in the .log", off, fts)
	})
}

// FuzzInject: Inject never panics on any run of bytes; on success the
// batches take offsets from the location's base on, one after another,
// with the leader epoch, ending at its last offset; it fails only with
// CORRUPT_MESSAGE. A CreateTime batch's CRC does not cover what Inject
// writes, so it holds after Inject exactly when it held before. A
// LogAppendTime batch's CRC is recomputed, so Inject refuses one whose CRC
// fails rather than write a valid CRC over damage.
func FuzzInject(f *testing.F) {
	log, _, _ := fzSegmentFiles(f, 0, 5)
	batches, _, _ := fzBatches(log)
	last := batches[len(batches)-1].LastOffset()
	span := int64(0)
	for _, b := range batches {
		span += int64(b.LastOffsetDelta()) + 1
	}
	f.Add(log, int64(1000), span, int64(-1), int32(0))
	f.Add(log, int64(0), span, fzT0+5, int32(3))
	f.Add(log, int64(0), last, int64(-1), int32(0)) // the gap: not the run the coordinator placed
	f.Add(log[:len(log)-1], int64(0), span, int64(-1), int32(0))
	f.Add([]byte{}, int64(5), int64(0), int64(-1), int32(0))
	f.Fuzz(func(t *testing.T, data []byte, base, span, lat int64, epoch int32) {
		before, _, _ := fzBatches(data)
		crcOK := make([]bool, len(before))
		deltas := make([]int32, len(before))
		for i, b := range before {
			crcOK[i] = b.CheckCRC() == nil
			deltas[i] = b.LastOffsetDelta()
		}
		loc := coordinator.Location{ObjectKey: "wal/x", BaseOffset: base, LastOffset: base + span - 1, LogAppendTime: lat}
		buf := slices.Clone(data)
		next, err := Inject(buf, loc, epoch)
		if err != nil {
			var se *kafkaerr.Error
			require.True(t, errors.As(err, &se), "not a *kafkaerr.Error: %v", err)
			require.Equal(t, kafkaerr.CorruptMessage, se.Code)
			return
		}
		require.Equal(t, loc.LastOffset+1, next)
		after, _, whole := fzBatches(buf)
		require.True(t, whole)
		require.Len(t, after, len(before))
		off := base
		for i, b := range after {
			require.Equal(t, off, b.BaseOffset(), "batch %d", i)
			require.Equal(t, epoch, b.PartitionLeaderEpoch())
			require.Equal(t, deltas[i], b.LastOffsetDelta())
			if lat >= 0 {
				require.Equal(t, kbatch.LogAppendTime, b.TimestampType())
				require.Equal(t, lat, b.MaxTimestamp())
				require.True(t, crcOK[i], "batch %d: Inject gave a damaged batch a valid CRC", i)
				require.NoError(t, b.CheckCRC())
			} else {
				require.Equal(t, crcOK[i], b.CheckCRC() == nil, "batch %d: Inject changed whether its CRC holds", i)
			}
			off += int64(b.LastOffsetDelta()) + 1
		}
	})
}

// fzMaxOffsetBatch is a .log of one batch whose last offset is MaxInt64:
// RemoteOffsetForTimestamp, looking past it for a later timestamp, once
// wrapped to MinInt64 and read the segment again for ever.
func fzMaxOffsetBatch(t testing.TB) []byte {
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetBaseOffset(math.MaxInt64 - 1)
	b.Append(fzT0, nil, []byte("a"))
	b.Append(fzT0, nil, []byte("b"))
	raw, err := b.Build(nil)
	require.NoError(t, err)
	return raw
}
