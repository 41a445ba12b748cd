package diskless

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestDecompressionBombs: 40 concurrent produce requests, each a batch
// of a few KB that inflates to 80 MiB (zstd, gzip, lz4, snappy), are
// MESSAGE_TOO_LARGE, and the heap they take together stays under
// Config.ValidationMemoryBytes (plus slack for the runtime), instead of
// 64 MiB each; a legitimate batch that inflates past its first share is
// still accepted.
func TestDecompressionBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 80 MiB batches")
	}
	ctx := t.Context()
	const budget = 256 << 20
	b := openTest(t, &Config{ValidationMemoryBytes: budget})
	_, err := b.CreateTopic(ctx, "t", TopicConfig{MaxMessageBytes: 8 << 20})
	require.NoError(t, err)

	build := func(c kbatch.Codec, size int) []byte {
		bld := kbatch.NewBuilder(c)
		bld.Append(time.Now().UnixMilli(), []byte("k"), make([]byte, size))
		out, err := bld.Build(nil)
		require.NoError(t, err)
		return out
	}
	var bombs [][]byte
	for _, c := range []kbatch.Codec{kbatch.CodecZstd, kbatch.CodecGzip, kbatch.CodecLZ4, kbatch.CodecSnappy} {
		bomb := build(c, 80<<20)
		t.Logf("%s bomb: %d bytes", c, len(bomb))
		bombs = append(bombs, bomb)
	}
	legit := build(kbatch.CodecZstd, 20<<20)

	defer debug.SetGCPercent(debug.SetGCPercent(10)) // the heap close to what is live
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse

	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	n := 40
	if raceEnabled {
		n = 12 // still more than the budget lets in at once
	}
	codes := make([]kafkaerr.Code, n)
	for i := range codes {
		wg.Go(func() {
			resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: bombs[i%len(bombs)]}}})
			require.NoError(t, err)
			codes[i] = resp.Partitions[0].ErrorCode
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	for i, c := range codes {
		require.Equal(t, kafkaerr.MessageTooLarge, c, "bomb %d", i)
	}
	grew := int64(peak) - int64(base)
	t.Logf("heap in use: %d MiB before, peak %d MiB (+%d MiB); budget %d MiB", base>>20, peak>>20, grew>>20, budget>>20)
	require.Less(t, grew, int64(budget+64<<20), "the bombs together stay under the budget")
	// zstd and snappy bombs go past their first share and are validated
	// again at the bound; gzip and lz4 ones, whose validation costs no
	// more at the bound, are validated once, at the bound.
	require.Equal(t, int64(n/2), b.Stats().Revalidations, "the zstd and snappy bombs went past their first share")

	resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: legit}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err, "20 MiB of records are under the bound")
}

// TestValidationBudgetWaits: with the validation budget spent, a
// compressed batch waits for its share with the request's context, and is
// REQUEST_TIMED_OUT when that ends; an uncompressed one does not wait.
func TestValidationBudgetWaits(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, nil)
	_, err := b.CreateTopic(ctx, "t", TopicConfig{})
	require.NoError(t, err)
	require.NoError(t, b.validation.Acquire(ctx, b.cfg.ValidationMemoryBytes)) // spent
	short, cancel := context.WithCancel(ctx)
	cancel()
	resp, err := b.Produce(short, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecZstd, 0, 2, -1, -1)}}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.RequestTimedOut, resp.Partitions[0].ErrorCode)
	resp, err = b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 2, -1, -1)}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err)
	b.validation.Release(b.cfg.ValidationMemoryBytes)
	resp, err = b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecZstd, 0, 2, -1, -1)}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err)
	require.True(t, b.validation.TryAcquire(b.cfg.ValidationMemoryBytes), "every share given back")
	b.validation.Release(b.cfg.ValidationMemoryBytes)
}
