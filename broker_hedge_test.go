package diskless

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// slowCall is a latency that holds call number n (from 1) for an hour and
// lets the others through at once.
type slowCall struct {
	n     int64
	calls atomic.Int64
}

func (f *slowCall) Sample(*rand.Rand) time.Duration {
	if f.calls.Add(1) == f.n {
		return time.Hour
	}
	return 0
}
func (f *slowCall) Quantile(float64) time.Duration { return 0 }
func (f *slowCall) String() string                 { return fmt.Sprintf("call %d an hour, the others none", f.n) }

// TestHedgedUpload delays one WAL PUT, once the hedge delay is learned:
// the upload sends a second PUT of the same object after the hedge
// delay, takes it, and cancels the first. One object is in the bucket
// under that key, committed once: every record is read back once, at the
// offset its producer was given.
func TestHedgedUpload(t *testing.T) {
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	var mu sync.Mutex
	puts := map[string][]faultbucket.Call{}
	slow := &slowCall{n: hedgeMinSamples + 1} // the first upload that may be hedged
	bucket, _, err := faultbucket.Wrap(inner, &faultbucket.Options{
		Profile: faultbucket.Profile{Name: "one PUT slow", Ops: [faultbucket.NumOps]faultbucket.OpFaults{faultbucket.Put: {Latency: slow}}},
		Observe: func(c faultbucket.Call) {
			if c.Op == faultbucket.Put && strings.HasPrefix(c.Key, "wal/") {
				mu.Lock()
				defer mu.Unlock()
				puts[c.Key] = append(puts[c.Key], c)
			}
		},
	})
	require.NoError(t, err)
	defer bucket.Close()
	b, err := Open(context.Background(), &Config{
		Bucket: bucket, MetadataLog: MetadataInMemory, Linger: 5 * time.Millisecond,
		HedgeMinDelay: 10 * time.Millisecond, HedgeMaxDelay: time.Minute,
	})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	const objects = hedgeMinSamples + 1
	for i := range objects { // one request at a time: an object each
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{
			{Topic: "t", Partition: 0, Records: batch(t, kbatch.CodecNone, i*10, 10, -1, 0)},
		}})
		require.NoError(t, err, "answered, although one PUT never finishes")
		require.NoError(t, resp.Partitions[0].Err)
		require.Equal(t, int64(i*10), resp.Partitions[0].BaseOffset)
	}

	s := b.Stats()
	require.Equal(t, int64(1), s.Hedges)
	require.Equal(t, int64(1), s.HedgeWins)
	require.Equal(t, int64(objects), s.Objects, "each object committed once")
	require.Equal(t, int64(objects), s.ShardCommits)
	f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 0, Offset: 0}}, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Equal(t, int64(objects*10), f.Partitions[0].HighWatermark)
	got := records(t, f.Partitions[0].Records)
	require.Len(t, got, objects*10, "every record once")
	for i := range int64(objects * 10) {
		require.Equal(t, fmt.Sprintf("value-%d", i), got[i])
	}
	require.NoError(t, b.Close()) // waits for the cancelled PUT
	// A PUT is counted when it returns: the cancelled one, once Close has
	// waited for it.
	require.Equal(t, int64(objects+1), b.Stats().Store["PUT"].Calls, "the hedge is a PUT")

	mu.Lock()
	defer mu.Unlock()
	var hedged string
	for key, calls := range puts {
		if len(calls) == 2 {
			require.Empty(t, hedged, "one object hedged")
			hedged = key
		} else {
			require.Len(t, calls, 1, key)
			require.NoError(t, calls[0].Err)
		}
	}
	require.NotEmpty(t, hedged)
	var won, cancelled int
	for _, c := range puts[hedged] {
		switch {
		case c.Err == nil:
			won++
		case errors.Is(c.Err, context.Canceled):
			cancelled++
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, 1, cancelled, "the loser cancelled")
	it := inner.List(&blob.ListOptions{Prefix: "wal/"})
	var keys []string
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	require.Len(t, keys, objects, "one object per key in the bucket")
	require.Contains(t, keys, hedged)
	data, err := inner.ReadAll(ctx, hedged)
	require.NoError(t, err)
	require.Equal(t, wal.Version0, data[0])
}

// TestHedgeDelay: the broker's hedge delay is the Config's quantile of
// the last hedgeSamples PUTs, once hedgeMinSamples are known, within the
// Config's bounds (how it is learned: package internal/hedge).
func TestHedgeDelay(t *testing.T) {
	h := newHedger(&Config{HedgeMinDelay: 5 * time.Millisecond, HedgeMaxDelay: time.Second, HedgeQuantile: 0.9})
	for i := range hedgeMinSamples + hedgeSamples { // the last 128: 16 ms up to 143
		if _, ok := h.Delay(); i < hedgeMinSamples {
			require.False(t, ok, "too few PUTs known: no hedging yet")
		}
		h.Record(time.Duration(i) * time.Millisecond)
	}
	d, ok := h.Delay()
	require.True(t, ok)
	require.Equal(t, 131*time.Millisecond, d, "the p90 of the last 128")
	_, ok = newHedger(&Config{HedgeMaxDelay: -1}).Delay()
	require.False(t, ok)
	_, err := (&Config{HedgeQuantile: 1}).resolved()
	require.Error(t, err)
	_, err = (&Config{HedgeMinDelay: time.Second, HedgeMaxDelay: time.Millisecond}).resolved()
	require.Error(t, err)
}
