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

	"github.com/diskless-go/diskless/internal/faultbucket"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// firstSlow is a latency that holds the first call for an hour and lets
// the others through at once.
type firstSlow struct{ calls atomic.Int64 }

func (f *firstSlow) Sample(*rand.Rand) time.Duration {
	if f.calls.Add(1) == 1 {
		return time.Hour
	}
	return 0
}
func (f *firstSlow) Quantile(float64) time.Duration { return 0 }
func (f *firstSlow) String() string                 { return "the first call an hour, then none" }

// TestHedgedUpload delays the first WAL PUT: the upload sends a second
// PUT of the same object after the hedge delay, takes it, and cancels the
// first. One object is in the bucket, committed once: its records are
// read back once each, at the offsets the producer was given.
func TestHedgedUpload(t *testing.T) {
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	var mu sync.Mutex
	var puts []faultbucket.Call
	slow := &firstSlow{}
	bucket, _, err := faultbucket.Wrap(inner, &faultbucket.Options{
		Profile: faultbucket.Profile{Name: "first PUT slow", Ops: [faultbucket.NumOps]faultbucket.OpFaults{faultbucket.Put: {Latency: slow}}},
		Observe: func(c faultbucket.Call) {
			if c.Op == faultbucket.Put && strings.HasPrefix(c.Key, "wal/") {
				mu.Lock()
				defer mu.Unlock()
				puts = append(puts, c)
			}
		},
	})
	require.NoError(t, err)
	defer bucket.Close()
	b, err := Open(context.Background(), &Config{
		Bucket: bucket, MetadataLog: MetadataInMemory, Linger: 5 * time.Millisecond,
		HedgeMinDelay: 10 * time.Millisecond, HedgeMaxDelay: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{
		{Topic: "t", Partition: 0, Records: batch(t, segment.CodecNone, 0, 10, -1, 0)},
	}})
	require.NoError(t, err, "answered, although the first PUT never finishes")
	require.NoError(t, resp.Partitions[0].Err)
	require.Equal(t, int64(0), resp.Partitions[0].BaseOffset)

	s := b.Stats()
	require.Equal(t, int64(1), s.Hedges)
	require.Equal(t, int64(1), s.HedgeWins)
	require.Equal(t, int64(1), s.Objects, "the winner's result committed once")
	require.Equal(t, int64(1), s.ShardCommits)
	require.Equal(t, int64(2), s.Store["PUT"].Calls, "the hedge is a PUT")
	f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 0, Offset: 0}}})
	require.NoError(t, err)
	require.Equal(t, int64(10), f.Partitions[0].HighWatermark)
	got := records(t, f.Partitions[0].Records)
	require.Len(t, got, 10)
	for i := range int64(10) {
		require.Equal(t, fmt.Sprintf("value-%d", i), got[i])
	}
	require.NoError(t, b.Close()) // waits for the cancelled PUT

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, puts, 2, "the first PUT and its hedge")
	require.Equal(t, puts[0].Key, puts[1].Key, "the same key")
	var won, cancelled int
	for _, c := range puts {
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
	require.Equal(t, []string{puts[0].Key}, keys, "one object in the bucket")
	data, err := inner.ReadAll(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, wal.Version0, data[0])
}

// TestHedgeDelay: the delay is the quantile of the recent PUTs, within
// its bounds; the maximum until enough are known; off with a negative
// maximum.
func TestHedgeDelay(t *testing.T) {
	h := newHedger(&Config{HedgeMinDelay: 5 * time.Millisecond, HedgeMaxDelay: time.Second, HedgeQuantile: 0.9})
	for i := 1; i < hedgeMinSamples; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	d, ok := h.delay()
	require.True(t, ok)
	require.Equal(t, time.Second, d, "too few PUTs known")
	for i := 1000; i > 0; i-- {
		h.record(time.Duration(i) * time.Millisecond) // the last 128: 128 ms down to 1
	}
	d, _ = h.delay()
	require.Equal(t, 116*time.Millisecond, d, "the p90 of the last 128")
	for range hedgeSamples {
		h.record(time.Millisecond)
	}
	d, _ = h.delay()
	require.Equal(t, 5*time.Millisecond, d, "no less than the minimum")
	for range hedgeSamples {
		h.record(time.Minute)
	}
	d, _ = h.delay()
	require.Equal(t, time.Second, d, "no more than the maximum")
	_, ok = newHedger(&Config{HedgeMaxDelay: -1}).delay()
	require.False(t, ok)
	_, err := (&Config{HedgeQuantile: 1}).resolved()
	require.Error(t, err)
	_, err = (&Config{HedgeMinDelay: time.Second, HedgeMaxDelay: time.Millisecond}).resolved()
	require.Error(t, err)
}
