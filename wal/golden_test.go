package wal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	goldenObject = "testdata/object-v0.wal"
	goldenCoords = "testdata/object-v0.coords.json"
)

// goldenRequests are the requests of the golden object: three topics, every
// codec, idempotent and transactional producers, a LogAppendTime batch,
// arriving out of partition order.
func goldenRequests(t *testing.T) []*Request {
	topics := []uuid.UUID{
		uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		uuid.MustParse("00000000-0000-4000-8000-000000000001"),
		uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479"),
	}
	mk := func(codec kbatch.Codec, n int, set func(*kbatch.Builder)) kbatch.Batch {
		b := kbatch.NewBuilder(codec)
		if set != nil {
			set(b)
		}
		for i := 0; i < n; i++ {
			b.Append(1_764_500_000_000+int64(i), []byte{'k', byte('0' + i)}, bytes.Repeat([]byte{'v'}, 10*i),
				kbatch.Header{Key: "h", Value: []byte{byte(i)}})
		}
		raw, err := b.Build(nil)
		require.NoError(t, err)
		return kbatch.Batch(raw)
	}
	tp := func(topic int, p int32) TopicPartition { return TopicPartition{TopicID: topics[topic], Partition: p} }
	return []*Request{
		{Batches: []Batch{
			{tp(2, 0), mk(kbatch.CodecNone, 3, nil)},
			{tp(0, 5), mk(kbatch.CodecGzip, 2, func(b *kbatch.Builder) { b.SetProducer(1000, 2, 0) })},
		}},
		{Batches: []Batch{
			{tp(1, 1), mk(kbatch.CodecSnappy, 4, func(b *kbatch.Builder) { b.SetProducer(2000, 0, 7); b.SetTransactional(true) })},
			{tp(0, 5), mk(kbatch.CodecLZ4, 1, func(b *kbatch.Builder) { b.SetProducer(1000, 2, 2) })},
			{tp(0, 1), mk(kbatch.CodecZstd, 5, nil)},
		}},
		{Batches: []Batch{
			{tp(2, 0), mk(kbatch.CodecNone, 1, func(b *kbatch.Builder) { b.SetLogAppendTime(1_764_500_009_999) })},
		}},
	}
}

// TestGoldenObject reads back the committed v0 object: it must pass
// CheckObject with its committed coordinates, decode, and re-encode from
// its own batches to the same bytes. Run with -update to rewrite it.
func TestGoldenObject(t *testing.T) {
	if *update {
		obj := NewObject("wal/golden")
		for _, r := range goldenRequests(t) {
			obj.Add(r)
		}
		var buf bytes.Buffer
		coords, err := obj.Encode(&buf, nil)
		require.NoError(t, err)
		js, err := json.MarshalIndent(coords, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenObject), 0o755))
		require.NoError(t, os.WriteFile(goldenObject, buf.Bytes(), 0o644))
		require.NoError(t, os.WriteFile(goldenCoords, append(js, '\n'), 0o644))
	}
	data, err := os.ReadFile(goldenObject)
	require.NoError(t, err)
	js, err := os.ReadFile(goldenCoords)
	require.NoError(t, err)
	var coords []Coordinate
	require.NoError(t, json.Unmarshal(js, &coords))

	require.NoError(t, CheckObject(data, coords))
	require.Len(t, coords, 6)
	require.Equal(t, 4, countPartitions(coords))

	// Rebuild the object from its own batches, partitions arriving in
	// reverse order (each partition's batches in their order): the bytes
	// are the same, because regions go in partition order.
	obj := NewObject("wal/again")
	for p := countPartitions(coords) - 1; p >= 0; p-- {
		for i := range coords {
			if partitionIndex(coords, i) == p {
				b, err := ReadBatch(data, 0, &coords[i])
				require.NoError(t, err)
				obj.Add(&Request{Batches: []Batch{{coords[i].TopicPartition, b}}})
			}
		}
	}
	var buf bytes.Buffer
	again, err := obj.Encode(&buf, nil)
	require.NoError(t, err)
	require.Equal(t, data, buf.Bytes())
	require.Equal(t, coords, again)
	appended, again := obj.AppendEncode([]byte("kept"), nil)
	require.Equal(t, append([]byte("kept"), data...), appended, "AppendEncode: the same bytes")
	require.Equal(t, coords, again)

	// Every record decodes.
	for i := range coords {
		b, _ := ReadBatch(data, 0, &coords[i])
		var rr kbatch.RecordReader
		require.NoError(t, rr.Reset(b))
		n := 0
		for rr.Next() {
			require.Equal(t, []byte{'k', byte('0' + n)}, rr.Record().Key)
			n++
		}
		require.NoError(t, rr.Err())
		require.Equal(t, int(coords[i].NumRecords), n)
	}
}

func countPartitions(coords []Coordinate) int {
	n := 0
	for i := range coords {
		if i == 0 || coords[i].TopicPartition != coords[i-1].TopicPartition {
			n++
		}
	}
	return n
}

// partitionIndex returns which region (0, 1, ...) coordinate i is in.
func partitionIndex(coords []Coordinate, i int) int {
	p := 0
	for j := 1; j <= i; j++ {
		if coords[j].TopicPartition != coords[j-1].TopicPartition {
			p++
		}
	}
	return p
}

const goldenMany = "testdata/object-v0-many.sha256"

// manyPartitionsObject is an object of 12,000 regions as a busy broker
// would pack them: 7 topics, partition numbers from 0 to past 65,536 (so
// every radix pass of the region sort is used) and a few negative ones,
// one to three batches a region, arriving interleaved and out of order.
func manyPartitionsObject(t *testing.T) *Object {
	t.Helper()
	var variants []kbatch.Batch
	for i := range 5 {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.SetProducer(int64(100+i), 0, int32(i))
		for j := 0; j <= i; j++ {
			b.Append(1_764_500_000_000+int64(j), []byte{'k', byte('0' + j)}, bytes.Repeat([]byte{byte('a' + i)}, 7*i+j))
		}
		raw, err := b.Build(nil)
		require.NoError(t, err)
		variants = append(variants, kbatch.Batch(raw))
	}
	rng := rand.New(rand.NewPCG(24, 10000))
	type part struct {
		tp TopicPartition
		n  int
	}
	var parts []part
	for i := range 12000 {
		p := int32(i*7 + rng.IntN(7))
		if i%1000 == 0 {
			p = -p - 1
		}
		parts = append(parts, part{TopicPartition{TopicID: topicID(i % 7), Partition: p}, 1 + rng.IntN(3)})
	}
	obj := NewObject("wal/many")
	for len(parts) > 0 {
		i := rng.IntN(len(parts))
		p := &parts[i]
		var req Request
		for k := 0; k < 1+rng.IntN(3) && p.n > 0; k++ {
			req.Batches = append(req.Batches, Batch{p.tp, variants[rng.IntN(len(variants))]})
			p.n--
		}
		obj.Add(&req)
		if p.n == 0 {
			parts[i] = parts[len(parts)-1]
			parts = parts[:len(parts)-1]
		}
	}
	return obj
}

// TestGoldenManyPartitions pins the bytes and the coordinates of an object
// of 12,000 regions by their SHA-256 (the object itself would be a large
// file): a faster encoder must write exactly these. Run with -update to
// rewrite the hashes.
func TestGoldenManyPartitions(t *testing.T) {
	obj := manyPartitionsObject(t)
	var buf bytes.Buffer
	coords, err := obj.Encode(&buf, nil)
	require.NoError(t, err)
	require.NoError(t, CheckObject(buf.Bytes(), coords))
	js, err := json.Marshal(coords)
	require.NoError(t, err)
	got := fmt.Sprintf("object %x\ncoordinates %x\nregions %d\nbatches %d\n", sha256.Sum256(buf.Bytes()), sha256.Sum256(js), obj.NumPartitions(), len(coords))
	if *update {
		require.NoError(t, os.WriteFile(goldenMany, []byte(got), 0o644))
	}
	want, err := os.ReadFile(goldenMany)
	require.NoError(t, err)
	require.Equal(t, string(want), got)

	// Encoding again (an upload retried) writes the same, and so does
	// AppendEncode.
	var again bytes.Buffer
	coords2, err := obj.Encode(&again, nil)
	require.NoError(t, err)
	require.Equal(t, buf.Bytes(), again.Bytes())
	require.Equal(t, coords, coords2)
	appended, coords3 := obj.AppendEncode(nil, nil)
	require.Equal(t, buf.Bytes(), appended)
	require.Equal(t, coords, coords3)
}
