package cache

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
)

const mib = 1 << 20

// tailRead is what a broker and its consumers at the tail do with one new
// object: the broker uploads it and Puts it (write-through), then
// consumers read it from start to end, readSize bytes at a time (the
// bucket is not written: a GET would fail the read). It returns the bytes
// read.
func tailRead(tb testing.TB, c *Cache, key string, data, dst []byte) int64 {
	ctx := tb.Context()
	if err := c.Put(ctx, key, data); err != nil {
		tb.Fatal(err)
	}
	return readThrough(tb, c, key, int64(len(data)), dst, ClassHot)
}

// readThrough reads key from start to end, len(dst) bytes at a time.
func readThrough(tb testing.TB, c *Cache, key string, size int64, dst []byte, class Class) int64 {
	ctx := tb.Context()
	ro := &ReadOptions{Class: class}
	for off := int64(0); off < size; off += int64(len(dst)) {
		n := min(int64(len(dst)), size-off)
		if err := c.ReadRangeInto(ctx, key, off, dst[:n], ro); err != nil {
			tb.Fatal(err)
		}
	}
	return size
}

// laggingObjects writes n objects of size bytes to the bucket (uploaded
// long ago, by any broker) and returns their keys.
func laggingObjects(tb testing.TB, b *blob.Bucket, n int, size int64) []string {
	var keys []string
	for i := range n {
		key := fmt.Sprintf("wal/old-%04d", i)
		putObject(tb, b, key, size)
		keys = append(keys, key)
	}
	return keys
}

func getsPerMiB(gets, bytes int64) float64 { return float64(gets) / (float64(bytes) / mib) }

// A tail reader with write-through never GETs.
func TestTailReaderGets(t *testing.T) {
	b, fb := newMemBucket(t)
	c := newCache(t, b, &Options{BlockSize: 64 << 10, MemoryBytes: 4 * mib})
	data := content("tail", mib)
	dst := make([]byte, 10_000) // not a divisor of the block size
	var read int64
	for i := range 8 {
		read += tailRead(t, c, fmt.Sprintf("wal/tail-%04d", i), data, dst)
	}
	require.Zero(t, fb.gets.Load())
	require.Zero(t, getsPerMiB(c.Stats().GETs, read))
}

// A lagging reader, reading old objects from start to end in reads that
// straddle blocks, GETs each block once: at most one GET per block, over
// each of bucketKinds.
func TestLaggingReaderGets(t *testing.T) {
	for _, kind := range bucketKinds {
		t.Run(kind.name, func(t *testing.T) { testLaggingReaderGets(t, kind.start(t)) })
	}
}

func testLaggingReaderGets(t *testing.T, open openBucket) {
	b, fb := open(t)
	const blockSize, size = 64 << 10, mib + 1000 // the last block is short
	c := newCache(t, b, &Options{BlockSize: blockSize, MemoryBytes: 4 * mib})
	keys := laggingObjects(t, b, 4, size)
	dst := make([]byte, 10_000)
	var read int64
	for _, key := range keys {
		read += readThrough(t, c, key, size, dst, ClassCold)
	}
	blocks := int64(len(keys)) * ((size + blockSize - 1) / blockSize)
	st := c.Stats()
	require.Equal(t, fb.gets.Load(), st.GETs)
	require.LessOrEqual(t, st.GETs, blocks)
	require.Equal(t, int64(len(keys))*size, st.BytesFetched)
	t.Logf("%d GETs for %d blocks, %.2f GETs/MiB", st.GETs, blocks, getsPerMiB(st.GETs, read))
}
