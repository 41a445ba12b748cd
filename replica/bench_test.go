package replica

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// benchBatches returns size bytes of batches of about batchBytes each
// (records of 1 KiB, uncompressed), with base offsets 0 as produced, and
// their run's location.
func benchBatches(b *testing.B, size, batchBytes int) ([]byte, coordinator.Location) {
	var out []byte
	n := int64(0)
	value := make([]byte, 1000)
	for len(out) < size {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		for range batchBytes / 1024 {
			bld.Append(1_764_500_000_000, nil, value)
			n++
		}
		raw, err := bld.Build(nil)
		require.NoError(b, err)
		out = append(out, raw...)
	}
	return out, coordinator.Location{BaseOffset: 1000, LastOffset: 1000 + n - 1, ByteSize: int64(len(out)), LogAppendTime: -1}
}

// BenchmarkInject measures offset injection (Inject: base offset and
// leader epoch written into each batch header) over 4 MiB of batches,
// against memmove of the same bytes in the same run. "lat" adds
// LogAppendTime, which rewrites the max timestamp and so the CRC.
func BenchmarkInject(b *testing.B) {
	for _, batch := range []int{16 << 10, 256 << 10} {
		data, loc := benchBatches(b, 4<<20, batch)
		b.Run(fmt.Sprintf("memmove/batch=%dKiB", batch>>10), func(b *testing.B) {
			dst := make([]byte, len(data))
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				copy(dst, data)
			}
		})
		b.Run(fmt.Sprintf("inject/batch=%dKiB", batch>>10), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Inject(data, loc, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("inject-lat/batch=%dKiB", batch>>10), func(b *testing.B) {
			l := loc
			b.SetBytes(int64(len(data)))
			i := int64(0)
			for b.Loop() {
				i++
				l.LogAppendTime = 1_764_500_000_500 + i // a new time each pass: every CRC is recomputed
				if _, err := Inject(data, l, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMaterialize measures a new replica's catch-up: 32 MiB of one
// partition's batches, in 8 objects already in the object cache (memory),
// read, injected and appended to a new local log (StartEarliest), against
// writing the same bytes to a file in the same run.
func BenchmarkMaterialize(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	id, err := e.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "bench", Partitions: 1, Config: coordinator.TopicConfig{Retention: -1}})
	require.NoError(b, err)
	tp := wal.TopicPartition{TopicID: id}
	batch, _ := benchBatches(b, 1, 64<<10) // one batch of 64 records
	const perObject = 64
	total := 0
	for range 8 {
		bs := make([][]byte, perObject)
		for i := range bs {
			bs[i] = slices.Clone(batch)
		}
		e.commit(b, map[wal.TopicPartition][][]byte{tp: bs})
		total += perObject * len(batch)
	}
	// Warm the cache: materialise once.
	warm, err := NewMaterializer(e.coord, e.cache, b.TempDir(), &MaterializerOptions{Start: StartEarliest, Poll: time.Hour})
	require.NoError(b, err)
	require.NoError(b, warm.Add(ctx, tp, nil))
	_, err = warm.Sync(ctx, tp)
	require.NoError(b, err)
	require.NoError(b, warm.Close())

	b.Run("write-file", func(b *testing.B) {
		all := make([]byte, total)
		b.SetBytes(int64(total))
		for b.Loop() {
			f, err := os.Create(filepath.Join(b.TempDir(), "x"))
			require.NoError(b, err)
			for off := 0; off < total; off += 1 << 20 {
				_, err = f.Write(all[off:min(off+1<<20, total)])
				require.NoError(b, err)
			}
			require.NoError(b, f.Close())
		}
	})
	b.Run("materialize", func(b *testing.B) {
		b.SetBytes(int64(total))
		for b.Loop() {
			m, err := NewMaterializer(e.coord, e.cache, b.TempDir(), &MaterializerOptions{Start: StartEarliest, Poll: time.Hour})
			require.NoError(b, err)
			require.NoError(b, m.Add(ctx, tp, nil))
			end, err := m.Sync(ctx, tp)
			require.NoError(b, err)
			require.Equal(b, int64(8*perObject*64), end, "every batch materialised")
			require.NoError(b, m.Close())
		}
	})
}
