package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// makeBatch builds a producer batch of n records with values of size
// bytes.
func makeBatch(t testing.TB, codec kbatch.Codec, n, size int, seed uint64) kbatch.Batch {
	t.Helper()
	b := kbatch.NewBuilder(codec)
	if seed%3 == 0 {
		b.SetProducer(int64(seed), int16(seed%7), int32(seed%1000))
	}
	if seed%5 == 0 {
		b.SetTransactional(true)
		b.SetProducer(int64(seed)+1, 0, 0)
	}
	value := bytes.Repeat([]byte{byte(seed)}, size)
	for i := 0; i < n; i++ {
		b.Append(1_700_000_000_000+int64(seed)+int64(i), []byte(fmt.Sprintf("key-%d", i)), value)
	}
	raw, err := b.Build(nil)
	require.NoError(t, err)
	batch, err := kbatch.ParseBatch(raw)
	require.NoError(t, err)
	return batch
}

func topicID(i int) uuid.UUID {
	var id uuid.UUID
	id[0] = byte(i * 37)
	id[15] = byte(i)
	return id
}

// randomRequests makes n requests of batches spread over the partitions of
// topics topics with parts partitions each.
func randomRequests(t testing.TB, rng *rand.Rand, n, topics, parts int) []*Request {
	var reqs []*Request
	codecs := kbatch.Codecs
	seed := uint64(0)
	for i := 0; i < n; i++ {
		req := &Request{}
		for j := rng.IntN(5) + 1; j > 0; j-- {
			seed++
			tp := TopicPartition{TopicID: topicID(rng.IntN(topics)), Partition: int32(rng.IntN(parts))}
			req.Batches = append(req.Batches, Batch{TopicPartition: tp, Data: makeBatch(t, codecs[rng.IntN(len(codecs))], rng.IntN(4)+1, rng.IntN(300), seed)})
		}
		reqs = append(reqs, req)
	}
	return reqs
}

func TestObjectRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := randomRequests(t, rng, 60, 4, 7)
	obj := NewObject("wal/x")
	var wantSize int64 = 1
	for _, r := range reqs {
		obj.Add(r)
		wantSize += r.Size()
	}
	require.Equal(t, wantSize, obj.Size())

	var buf bytes.Buffer
	coords, err := obj.Encode(&buf, nil)
	require.NoError(t, err)
	data := buf.Bytes()
	require.Equal(t, int(obj.Size()), len(data))
	require.Equal(t, Version0, data[0])
	require.Len(t, coords, obj.NumBatches())
	require.NoError(t, CheckObject(data, coords))

	// Regions in partition order, each contiguous, batches in arrival order.
	want := map[TopicPartition][]kbatch.Batch{}
	for _, r := range reqs {
		for _, b := range r.Batches {
			want[b.TopicPartition] = append(want[b.TopicPartition], b.Data)
		}
	}
	got := map[TopicPartition][]kbatch.Batch{}
	var seen []TopicPartition
	for i, c := range coords {
		if i == 0 || coords[i-1].TopicPartition != c.TopicPartition {
			require.NotContains(t, seen, c.TopicPartition, "a partition's region is contiguous")
			if i > 0 {
				require.Negative(t, coords[i-1].TopicPartition.Compare(c.TopicPartition), "regions in partition order")
			}
			seen = append(seen, c.TopicPartition)
		}
		b, err := ReadBatch(data, 0, &coords[i])
		require.NoError(t, err)
		got[c.TopicPartition] = append(got[c.TopicPartition], b)
	}
	require.Equal(t, len(want), obj.NumPartitions())
	require.Equal(t, want, got, "batches keep the producer's bytes")

	// Each partition's region reads on its own, as after a ranged GET.
	for _, tp := range seen {
		var pc []Coordinate
		for _, c := range coords {
			if c.TopicPartition == tp {
				pc = append(pc, c)
			}
		}
		start, end := pc[0].Offset, pc[len(pc)-1].End()
		region := data[start:end]
		require.NoError(t, CheckRange(region, start, pc))
		it := NewRegionIter(region, start, pc)
		var n int
		for it.Next() {
			require.Equal(t, want[tp][n], it.Batch())
			require.Equal(t, tp, it.Coordinate().TopicPartition)
			n++
		}
		require.NoError(t, it.Err())
		require.Equal(t, len(want[tp]), n)
	}

	// Encoding again writes the same bytes.
	var again bytes.Buffer
	coords2, err := obj.Encode(&again, nil)
	require.NoError(t, err)
	require.Equal(t, data, again.Bytes())
	require.Equal(t, coords, coords2)

	// Scan finds the same batches without coordinates.
	var offs []int64
	require.NoError(t, Scan(data, func(off int64, b kbatch.Batch) error {
		offs = append(offs, off)
		return nil
	}))
	var coordOffs []int64
	for _, c := range coords {
		coordOffs = append(coordOffs, c.Offset)
	}
	require.Equal(t, coordOffs, offs)
}

func TestCoordinateFields(t *testing.T) {
	b := kbatch.NewBuilder(kbatch.CodecLZ4)
	b.SetProducer(42, 3, 17)
	b.SetTransactional(true)
	b.Append(100, nil, []byte("a"))
	b.Append(90, nil, []byte("b"))
	b.Append(120, nil, []byte("c"))
	raw, err := b.Build(nil)
	require.NoError(t, err)
	tp := TopicPartition{TopicID: topicID(1), Partition: 9}
	obj := NewObject("k")
	obj.Add(&Request{Batches: []Batch{{tp, kbatch.Batch(raw)}}})
	coords, err := obj.Encode(&bytes.Buffer{}, nil)
	require.NoError(t, err)
	require.Equal(t, []Coordinate{{
		TopicPartition: tp, Offset: 1, Size: int32(len(raw)), NumRecords: 3,
		BaseTimestamp: 100, MaxTimestamp: 120, TimestampType: kbatch.CreateTime,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 17, Transactional: true,
	}}, coords)
	require.Equal(t, int64(1+len(raw)), coords[0].End())
}

func TestAnswerMapsResultsToRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := randomRequests(t, rng, 20, 3, 5)
	got := make([][]Result, len(reqs))
	obj := NewObject("k")
	for i, r := range reqs {
		r.Done = func(res []Result, err error) {
			require.NoError(t, err)
			got[i] = res
		}
		obj.Add(r)
	}
	require.ErrorIs(t, obj.Answer(nil), ErrNotEncoded)
	coords, err := obj.Encode(&bytes.Buffer{}, nil)
	require.NoError(t, err)

	// Give every batch a result that names its coordinate.
	results := make([]Result, len(coords))
	for i := range coords {
		results[i] = Result{BaseOffset: coords[i].Offset, LogAppendTime: -1, LogStartOffset: 0}
	}
	require.Error(t, obj.Answer(results[:len(results)-1]))
	require.NoError(t, obj.Answer(results))
	require.Error(t, obj.Answer(results), "answering twice")

	// Each request's results follow its batches: the result's BaseOffset is
	// where that very batch sits in the object.
	data := &bytes.Buffer{}
	_, err = obj.Encode(data, nil)
	require.NoError(t, err)
	for i, r := range reqs {
		require.Len(t, got[i], len(r.Batches))
		for j, b := range r.Batches {
			off := got[i][j].BaseOffset
			require.Equal(t, []byte(b.Data), data.Bytes()[off:off+int64(len(b.Data))])
		}
	}
	obj.Fail(errors.New("late")) // no effect once answered
}

func TestFail(t *testing.T) {
	obj := NewObject("k")
	var errs []error
	for i := 0; i < 3; i++ {
		obj.Add(&Request{Batches: []Batch{{TopicPartition{TopicID: topicID(0), Partition: 0}, makeBatch(t, kbatch.CodecNone, 1, 1, 1)}}, Done: func(res []Result, err error) {
			require.Nil(t, res)
			errs = append(errs, err)
		}})
	}
	obj.Add(&Request{}) // a request with no Done (acks=0)
	boom := errors.New("upload failed")
	obj.Fail(boom)
	obj.Fail(errors.New("again"))
	require.Equal(t, []error{boom, boom, boom}, errs)
}

func TestCheckObjectRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	obj := NewObject("k")
	for _, r := range randomRequests(t, rng, 5, 2, 2) {
		obj.Add(r)
	}
	var buf bytes.Buffer
	coords, err := obj.Encode(&buf, nil)
	require.NoError(t, err)
	data := buf.Bytes()
	require.GreaterOrEqual(t, len(coords), 3)

	type edit func(d []byte, c []Coordinate) ([]byte, []Coordinate)
	cases := []struct {
		name string
		edit edit
		want error
	}{
		{"empty", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { return nil, nil }, ErrTruncated},
		{"unknown version", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { d[0] = 1; return d, c }, ErrUnknownVersion},
		{"truncated", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { return d[:len(d)-1], c }, ErrTruncated},
		{"bad CRC", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { d[c[1].End()-1] ^= 1; return d, c }, ErrCorrupt},
		{"bytes after the last batch", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { return append(d, 0), c }, ErrCorrupt},
		{"missing coordinate: gap", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { return d, append(c[:1], c[2:]...) }, ErrMismatch},
		{"wrong size", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { c[0].Size--; return d, c }, ErrMismatch},
		{"wrong record count", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { c[1].NumRecords++; return d, c }, ErrMismatch},
		{"wrong producer id", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { c[2].ProducerID = 99; return d, c }, ErrMismatch},
		{"coordinate before byte 1", func(d []byte, c []Coordinate) ([]byte, []Coordinate) { c[0].Offset = 0; return d, c }, ErrMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, cs := c.edit(bytes.Clone(data), slices.Clone(coords))
			before := bytes.Clone(d)
			err := CheckObject(d, cs)
			require.ErrorIs(t, err, c.want)
			var oe *ObjectError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, before, d)
		})
	}
	// A bad CRC also carries the segment error and its Kafka code.
	d := bytes.Clone(data)
	d[coords[0].End()-1] ^= 1
	err = CheckObject(d, coords)
	require.ErrorIs(t, err, kafkaerr.ErrCorruptMessage)

	// A range that does not hold a coordinate's batch.
	require.ErrorIs(t, CheckRange(data[10:], 10, coords[:1]), ErrMismatch)
	it := NewRegionIter(data[:coords[1].End()-1], 0, coords)
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), ErrTruncated)
	require.False(t, it.Next())
}

func TestScanRejects(t *testing.T) {
	data := append([]byte{Version0}, makeBatch(t, kbatch.CodecNone, 2, 10, 1)...)
	require.ErrorIs(t, Scan(data[:len(data)-3], func(int64, kbatch.Batch) error { return nil }), ErrTruncated)
	require.ErrorIs(t, Scan(append([]byte{7}, data[1:]...), func(int64, kbatch.Batch) error { return nil }), ErrUnknownVersion)
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	require.ErrorIs(t, Scan(bad, func(int64, kbatch.Batch) error { return nil }), ErrCorrupt)
	stop := errors.New("stop")
	require.ErrorIs(t, Scan(data, func(int64, kbatch.Batch) error { return stop }), stop)
	require.NoError(t, Scan([]byte{Version0}, func(int64, kbatch.Batch) error { return nil }), "an empty object")
}

func TestObjectKeys(t *testing.T) {
	now := mustTime("2026-11-30T12:00:00.123Z")
	k1 := NewObjectKey("tenant/", now)
	k2 := NewObjectKey("tenant/", now.Add(1))
	require.NotEqual(t, k1, k2)
	require.Regexp(t, `^tenant/wal/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, k1)
	id, at, err := ParseObjectKey("tenant/", k1)
	require.NoError(t, err)
	require.Equal(t, uuid.Version(7), id.Version())
	require.Equal(t, now.UnixMilli(), at.UnixMilli())
	later := NewObjectKey("tenant/", now.Add(2e6))
	require.Less(t, k1, later, "keys sort by time")
	_, _, err = ParseObjectKey("other/", k1)
	require.Error(t, err)
	_, _, err = ParseObjectKey("tenant/", "tenant/wal/"+uuid.New().String())
	require.Error(t, err, "a v4 UUID is not an object key")
}

func TestRadixSortHigh(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{0, 1, 63, 64, 65, 1000, 20000} {
		for _, spread := range []int{100, 70000, 1 << 31} {
			if spread < 2*n {
				continue // not enough distinct partitions
			}
			perm := rng.Perm(n)
			keys := make([]uint64, n)
			seen := map[int32]bool{}
			for i := range keys {
				var p int32
				for {
					p = int32(rng.IntN(spread)) - int32(spread/4)
					if !seen[p] {
						break
					}
				}
				seen[p] = true
				keys[i] = uint64(uint32(p)^0x80000000)<<32 | uint64(perm[i])
			}
			want := slices.Clone(keys)
			slices.Sort(want)
			radixSortHigh(keys, nil)
			require.Equal(t, want, keys, "n=%d spread=%d", n, spread)
		}
	}
}
