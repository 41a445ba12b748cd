package wal

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kbatch"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// sizedRequest makes a request of one batch of size bytes (at least 70)
// for partition p; id is its record's key.
func sizedRequest(t testing.TB, p int32, size int, id byte) *Request {
	var raw []byte
	for v := max(size-kbatch.HeaderSize-9, 1); ; v-- {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.Append(0, []byte{id}, make([]byte, v))
		var err error
		raw, err = b.Build(nil)
		require.NoError(t, err)
		if len(raw) <= size || v == 1 {
			break
		}
	}
	return &Request{Batches: []Batch{{TopicPartition{TopicID: topicID(0), Partition: p}, kbatch.Batch(raw)}}}
}

func newTestBuffer(t *testing.T, opts Options) (*Buffer, *fakeclock.Clock) {
	clk := fakeclock.New(epoch)
	opts.Clock = clk
	b, err := NewBuffer(&opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		require.Zero(t, clk.Pending(), "Close stops the linger timer")
	})
	return b, clk
}

// ready returns the objects that Next can give without waiting.
func ready(t *testing.T, b *Buffer) []*Object {
	t.Helper()
	var objs []*Object
	for {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		b.mu.Lock()
		n := len(b.mu.queue)
		b.mu.Unlock()
		if n == 0 {
			return objs
		}
		o, err := b.Next(ctx)
		require.NoError(t, err)
		objs = append(objs, o)
	}
}

// ids returns the ids of an object's requests, in arrival order.
func ids(o *Object) []byte {
	var out []byte
	for _, r := range o.Requests() {
		var rr kbatch.RecordReader
		_ = rr.Reset(r.Batches[0].Data)
		rr.Next()
		out = append(out, rr.Record().Key[0])
	}
	return out
}

// TestBufferLinger: with no committer waiting in Next, an object closes
// Linger after its first request, and no timer runs while the buffer is
// empty.
func TestBufferLinger(t *testing.T) {
	b, clk := newTestBuffer(t, Options{MaxBytes: 10 << 10, Linger: 250 * time.Millisecond})
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 1000, 1)))
	clk.Advance(100 * time.Millisecond)
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 1, 1000, 2)))
	clk.Advance(149 * time.Millisecond)
	require.Empty(t, ready(t, b), "Linger from the first request")
	clk.Advance(time.Millisecond)
	objs := ready(t, b)
	require.Len(t, objs, 1)
	require.Equal(t, []byte{1, 2}, ids(objs[0]))
	_, at, err := ParseObjectKey("", objs[0].Key())
	require.NoError(t, err)
	require.Equal(t, epoch.Add(250*time.Millisecond).UnixMilli(), at.UnixMilli(), "the key carries the close time")

	clk.Advance(100 * time.Millisecond)
	require.Zero(t, clk.Pending(), "no timer while the buffer is empty")
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 1000, 3)))
	clk.Advance(249 * time.Millisecond)
	require.Empty(t, ready(t, b))
	clk.Advance(time.Millisecond)
	require.Len(t, ready(t, b), 1)
}

func TestBufferSize(t *testing.T) {
	b, clk := newTestBuffer(t, Options{MaxBytes: 4001, Linger: time.Second}) // 4 requests and the version byte
	for i := byte(1); i <= 4; i++ {
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, int32(i), 1000, i)))
	}
	objs := ready(t, b)
	require.Len(t, objs, 1, "closed when it reached MaxBytes, without waiting")
	require.Equal(t, []byte{1, 2, 3, 4}, ids(objs[0]))
	require.Equal(t, int64(4001), objs[0].Size())
	require.Zero(t, clk.Pending(), "its linger timer is stopped")
}

func TestBufferEarlyClose(t *testing.T) {
	b, _ := newTestBuffer(t, Options{MaxBytes: 4000, Linger: time.Second})
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 2500, 1)))
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 2000, 2)))
	objs := ready(t, b)
	require.Len(t, objs, 1, "the first object closes early: the second request would not fit")
	require.Equal(t, []byte{1}, ids(objs[0]))
	b.Flush()
	objs = ready(t, b)
	require.Len(t, objs, 1)
	require.Equal(t, []byte{2}, ids(objs[0]), "a request is never split")
}

func TestBufferOversizedRequest(t *testing.T) {
	b, _ := newTestBuffer(t, Options{MaxBytes: 4000, Linger: time.Second, MaxBufferedBytes: 8000})
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 1000, 1)))
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 1, 6000, 2)))
	objs := ready(t, b)
	require.Len(t, objs, 2)
	require.Equal(t, []byte{1}, ids(objs[0]))
	require.Equal(t, []byte{2}, ids(objs[1]), "the oversized request has an object of its own")
	for _, o := range objs {
		_, err := o.Encode(&bytes.Buffer{}, nil)
		require.NoError(t, err)
		require.NoError(t, o.Answer(make([]Result, o.NumBatches())))
	}
	require.Zero(t, b.Buffered())

	// A request larger than the whole bound is let in alone.
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 9000, 3)))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, b.Add(ctx, sizedRequest(t, 0, 100, 4)), ErrTimeout)
}

func TestBufferBackPressure(t *testing.T) {
	b, clk := newTestBuffer(t, Options{MaxBytes: 4000, Linger: 10 * time.Millisecond, MaxBufferedBytes: 8000})
	for i := byte(1); i <= 3; i++ {
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 2500, i)))
	}
	require.Equal(t, int64(7500), b.Buffered())

	// No room for another 2500: a cancelled Add fails at once, retriable,
	// and buffers nothing.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := b.Add(ctx, sizedRequest(t, 0, 2500, 9))
	require.ErrorIs(t, err, ErrTimeout)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int64(7500), b.Buffered())

	// A waiting Add proceeds once an object is answered.
	added := make(chan error, 1)
	go func() { added <- b.Add(context.Background(), sizedRequest(t, 0, 2500, 4)) }()
	objs := ready(t, b)
	require.Len(t, objs, 2)
	_, err = objs[0].Encode(&bytes.Buffer{}, nil)
	require.NoError(t, err)
	require.NoError(t, objs[0].Answer(make([]Result, objs[0].NumBatches())))
	require.NoError(t, <-added)

	// Objects taken but not answered still count; Fail frees them too.
	objs[1].Fail(errors.New("upload failed"))
	clk.Advance(10 * time.Millisecond)
	objs = ready(t, b)
	require.Len(t, objs, 2)
	require.Equal(t, []byte{3}, ids(objs[0]))
	require.Equal(t, []byte{4}, ids(objs[1]))
}

func TestBufferOrderAndAnswers(t *testing.T) {
	b, clk := newTestBuffer(t, Options{MaxBytes: 3000, Linger: 5 * time.Millisecond, MaxBufferedBytes: 1 << 20})
	var mu sync.Mutex
	answered := map[byte]int{}
	for i := byte(0); i < 100; i++ {
		req := sizedRequest(t, int32(i%7), 200+int(i)*13, i)
		req.Done = func(res []Result, err error) {
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.Equal(t, int64(i), res[0].BaseOffset)
			mu.Lock()
			answered[i]++
			mu.Unlock()
		}
		require.NoError(t, b.Add(t.Context(), req))
		if i%10 == 0 {
			clk.Advance(5 * time.Millisecond)
		}
	}
	b.Flush()
	var order []byte
	for _, o := range ready(t, b) {
		order = append(order, ids(o)...)
		coords, err := o.Encode(&bytes.Buffer{}, nil)
		require.NoError(t, err)
		res := make([]Result, len(coords))
		// Map each coordinate back to its request id to check Answer's
		// routing.
		for i, c := range coords {
			data := &bytes.Buffer{}
			_, _ = o.Encode(data, nil)
			var rr kbatch.RecordReader
			bt, err := ReadBatch(data.Bytes(), 0, &c)
			require.NoError(t, err)
			require.NoError(t, rr.Reset(bt))
			rr.Next()
			res[i].BaseOffset = int64(rr.Record().Key[0])
		}
		require.NoError(t, o.Answer(res))
	}
	for i := byte(0); i < 100; i++ {
		require.Equal(t, i, order[i], "objects come out in the order they closed, requests in arrival order")
		require.Equal(t, 1, answered[i])
	}
}

func TestBufferClose(t *testing.T) {
	b, clk := newTestBuffer(t, Options{MaxBytes: 4000, Linger: time.Second, MaxBufferedBytes: 4000})
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 3000, 1)))
	waiting := make(chan error, 1)
	go func() { waiting <- b.Add(context.Background(), sizedRequest(t, 0, 3000, 2)) }()

	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close twice")
	require.ErrorIs(t, <-waiting, ErrClosed, "a waiting Add is woken")
	require.ErrorIs(t, b.Add(t.Context(), sizedRequest(t, 0, 10, 3)), ErrClosed)
	require.Zero(t, clk.Pending())

	o, err := b.Next(t.Context())
	require.NoError(t, err, "the open object is handed on")
	require.Equal(t, []byte{1}, ids(o))
	_, err = b.Next(t.Context())
	require.ErrorIs(t, err, ErrClosed)
	o.Fail(ErrClosed)
}

func TestBufferNextWaits(t *testing.T) {
	b, clk := newTestBuffer(t, Options{Linger: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)

	got := make(chan *Object)
	go func() {
		o, err := b.Next(context.Background())
		require.NoError(t, err)
		got <- o
	}()
	require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 100, 7)))
	clk.Advance(100 * time.Millisecond)
	require.Equal(t, []byte{7}, ids(<-got))
}

func TestBufferOptions(t *testing.T) {
	for _, o := range []Options{{MaxBytes: -1}, {Linger: -1}, {MaxBytes: 100, MaxBufferedBytes: 50},
		{ObjectsPerSecond: -1}, {Linger: time.Second, ObjectsPerSecond: 0.5},
		{FullBytes: -1}, {MaxBytes: 100, FullBytes: 101}} {
		_, err := NewBuffer(&o)
		require.Error(t, err)
	}
	b, err := NewBuffer(nil)
	require.NoError(t, err)
	require.Equal(t, int64(DefaultMaxBytes), b.maxBytes)
	require.Equal(t, DefaultLinger, b.linger)
	require.Equal(t, DefaultLinger, b.period, "one object per Linger: 4 a second")
	require.Equal(t, int64(DefaultMaxBufferedBytes), b.maxBuffered)
	require.Equal(t, int64(DefaultFullBytes), b.fullBytes)
	require.NoError(t, b.Close())
	b, err = NewBuffer(&Options{MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), b.fullBytes, "never past MaxBytes")
	require.NoError(t, b.Close())
}

// TestBufferConcurrent runs producers and a committer together under -race,
// on the system clock: every request is answered once.
func TestBufferConcurrent(t *testing.T) {
	b, err := NewBuffer(&Options{MaxBytes: 16 << 10, Linger: time.Millisecond, MaxBufferedBytes: 64 << 10})
	require.NoError(t, err)
	const producers, each = 4, 200
	var wg sync.WaitGroup
	var answered sync.WaitGroup
	answered.Add(producers * each)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req := sizedRequest(t, int32(p), 500+i, byte(i))
				req.Done = func([]Result, error) { answered.Done() }
				require.NoError(t, b.Add(context.Background(), req))
			}
		}()
	}
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		var buf bytes.Buffer
		for {
			o, err := b.Next(context.Background())
			if errors.Is(err, ErrClosed) {
				return
			}
			buf.Reset()
			coords, err := o.Encode(&buf, nil)
			require.NoError(t, err)
			require.NoError(t, CheckObject(buf.Bytes(), coords))
			require.NoError(t, o.Answer(make([]Result, len(coords))))
		}
	}()
	wg.Wait()
	require.NoError(t, b.Close())
	<-committed
	answered.Wait()
	require.Zero(t, b.Buffered())
}
