package wal

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// fzObjectInput turns fuzz input into the requests of an object: records
// of 7 bytes, a topic byte (its nibbles go to the first and last bytes of
// the topic ID, so that the byte order matters), a partition (any int32,
// negative ones too, which the region sort must order first), which of
// the batches to add, and whether a new request starts there.
func fzObjectInput(data []byte, batches []kbatch.Batch) []*Request {
	var reqs []*Request
	req := &Request{}
	for len(data) >= 7 && len(reqs) < 200 {
		var id uuid.UUID
		id[0], id[15], id[7] = data[0]&0xf0, data[0]&0x0f, data[0]>>2
		tp := TopicPartition{TopicID: id, Partition: int32(binary.BigEndian.Uint32(data[1:]))}
		b := batches[int(data[5])%len(batches)]
		req.Batches = append(req.Batches, Batch{TopicPartition: tp, Data: b})
		if data[6]&1 == 1 {
			reqs = append(reqs, req)
			req = &Request{}
		}
		data = data[7:]
	}
	if len(req.Batches) > 0 {
		reqs = append(reqs, req)
	}
	return reqs
}

// FuzzObjectEncode: any requests, over any partitions, encode to an object
// that CheckObject accepts with the coordinates Encode returns and that
// Scan reads the same batches from; the regions are in partition order
// (topic ID bytewise, then partition), each partition's batches in the
// order they were added, each byte for byte the batch added; and encoding
// again writes the same bytes.
func FuzzObjectEncode(f *testing.F) {
	var batches []kbatch.Batch
	for i, codec := range kbatch.Codecs {
		batches = append(batches, makeBatch(f, codec, i%3+1, 20*i, uint64(i)))
	}
	batches = append(batches, kbatch.Batch(kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: true, ProducerID: 3, Timestamp: 1_700_000_000_000})))
	rec := func(topic byte, part int32, batch byte, end bool) []byte {
		b := []byte{topic}
		b = binary.BigEndian.AppendUint32(b, uint32(part))
		b = append(b, batch, 0)
		if end {
			b[6] = 1
		}
		return b
	}
	var seed []byte
	for i := range 24 {
		seed = append(seed, rec(byte(i*37), int32(i%5)-2, byte(i), i%4 == 3)...)
	}
	f.Add(seed)
	f.Add(slices.Concat(rec(1, 1<<31-1, 0, false), rec(1, -1<<31, 1, false), rec(0x10, 0, 2, true), rec(1, 0, 3, false)))
	f.Add(rec(0, 0, 0, true))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs := fzObjectInput(data, batches)
		obj := NewObject("wal/fuzz")
		type added struct {
			tp   TopicPartition
			data []byte
		}
		var in []added
		parts := map[TopicPartition]bool{}
		for _, r := range reqs {
			obj.Add(r)
			for _, b := range r.Batches {
				in = append(in, added{b.TopicPartition, b.Data})
				parts[b.TopicPartition] = true
			}
		}
		require.Equal(t, len(in), obj.NumBatches())
		require.Equal(t, len(parts), obj.NumPartitions())

		var buf bytes.Buffer
		coords, err := obj.Encode(&buf, nil)
		require.NoError(t, err)
		out := buf.Bytes()
		require.Equal(t, obj.Size(), int64(len(out)))
		require.Len(t, coords, len(in))
		require.NoError(t, CheckObject(out, coords))

		var scanned []Coordinate
		require.NoError(t, Scan(out, func(off int64, b kbatch.Batch) error {
			scanned = append(scanned, coordinateOf(coords[len(scanned)].TopicPartition, off, b))
			return nil
		}))
		require.Equal(t, coords, scanned)

		// Partition order, and each partition's batches in the order added.
		want := slices.Clone(in)
		slices.SortStableFunc(want, func(a, b added) int { return a.tp.Compare(b.tp) })
		for i, c := range coords {
			require.Equal(t, want[i].tp, c.TopicPartition, "coordinate %d", i)
			b, err := ReadBatch(out, 0, &c)
			require.NoError(t, err)
			require.Equal(t, want[i].data, []byte(b), "coordinate %d", i)
		}
		for start := int64(0); start < int64(len(out)); start += max(int64(len(out))/3, 1) {
			var inRange []Coordinate
			for _, c := range coords {
				if c.Offset >= start {
					inRange = append(inRange, c)
				}
			}
			require.NoError(t, CheckRange(out[start:], start, inRange))
		}

		var again bytes.Buffer
		coords2, err := obj.Encode(&again, nil)
		require.NoError(t, err)
		require.Equal(t, out, again.Bytes())
		require.Equal(t, coords, coords2)
	})
}

// FuzzObjectKey: ParseObjectKey never panics, and accepts a key only under
// prefix+"wal/" and ending in a version 7 UUID, whose time it returns;
// the canonical key of that UUID parses the same, and a key NewObjectKey
// makes parses back to its time (to the millisecond).
func FuzzObjectKey(f *testing.F) {
	now := time.UnixMilli(1_764_500_000_123)
	k := NewObjectKey("p/", now)
	f.Add("p/", k, int64(0))
	f.Add("", strings.TrimPrefix(k, "p/"), int64(1))
	f.Add("p/", strings.ToUpper(k), int64(-1))
	f.Add("p/", "p/wal/{"+strings.TrimPrefix(k, "p/wal/")+"}", int64(253402300799999))
	f.Add("p/", "p/wal/urn:uuid:"+strings.TrimPrefix(k, "p/wal/"), int64(1<<47))
	f.Add("p/", "p/wal/"+strings.ReplaceAll(strings.TrimPrefix(k, "p/wal/"), "-", ""), int64(0))
	f.Add("p/", "p/wal/6ba7b810-9dad-11d1-80b4-00c04fd430c8", int64(0))
	f.Add("p/", "p/tiered/x", int64(0))
	f.Fuzz(func(t *testing.T, prefix, key string, ms int64) {
		id, ts, err := ParseObjectKey(prefix, key)
		if err != nil {
			require.Equal(t, uuid.UUID{}, id)
			require.True(t, ts.IsZero())
			require.True(t, strings.HasPrefix(err.Error(), "wal: "), "%v", err)
		} else {
			require.True(t, strings.HasPrefix(key, prefix+keyDir))
			require.Equal(t, uuid.Version(7), id.Version())
			require.Equal(t, int64(binary.BigEndian.Uint64(id[:8])>>16), ts.UnixMilli())
			id2, ts2, err := ParseObjectKey(prefix, prefix+keyDir+id.String())
			require.NoError(t, err)
			require.Equal(t, id, id2)
			require.Equal(t, ts, ts2)
		}

		// Keys made for any time from 1970 to 10889 (48 bits of
		// milliseconds) parse back to it.
		ms = ms & (1<<48 - 1)
		made := NewObjectKey(prefix, time.UnixMilli(ms))
		id, ts, err = ParseObjectKey(prefix, made)
		require.NoError(t, err)
		require.Equal(t, ms, ts.UnixMilli())
		require.Equal(t, uuid.RFC4122, id.Variant())
		require.Equal(t, made, prefix+keyDir+id.String())
	})
}
