package wal

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal/walmeta"
)

// Version0 is the version byte of the format this package writes and
// reads. It is part of the format.
const Version0 byte = 0

// version0 is what Encode writes first (io.Writer may not change it).
var version0 = [1]byte{Version0}

// TopicPartition names a partition by its topic's ID: see
// [walmeta.TopicPartition].
type TopicPartition = walmeta.TopicPartition

// Result is the outcome of one batch: see [walmeta.Result].
type Result = walmeta.Result

// Coordinate locates one batch in an object: see [walmeta.Coordinate].
type Coordinate = walmeta.Coordinate

// Batch is one producer batch for one partition. Data must be a batch that
// kbatch.Validate has accepted; the object keeps its bytes as they are.
type Batch struct {
	TopicPartition
	Data kbatch.Batch
}

// Request is the batches of one produce call and the function that answers
// it.
type Request struct {
	// Batches are the call's batches, for any number of partitions.
	Batches []Batch
	// Done answers the call, once: with one Result per batch, in the order
	// of Batches, or with an error for the whole request. It may be nil
	// (acks=0: the call was answered when it was buffered). It must not
	// block for long: it runs on the committer's goroutine.
	Done func(results []Result, err error)
	// Added is when Buffer.Add took the request (by the Buffer's clock);
	// Add sets it.
	Added time.Time
}

// Size returns the bytes the request's batches take in an object.
func (r *Request) Size() int64 {
	var n int64
	for i := range r.Batches {
		n += int64(len(r.Batches[i].Data))
	}
	return n
}

// coordinateOf fills a coordinate from a batch's header.
func coordinateOf(tp TopicPartition, off int64, b kbatch.Batch) Coordinate {
	attrs := b.Attributes()
	return Coordinate{
		TopicPartition: tp,
		Offset:         off,
		Size:           int32(len(b)),
		NumRecords:     b.NumRecords(),
		BaseTimestamp:  b.BaseTimestamp(),
		MaxTimestamp:   b.MaxTimestamp(),
		TimestampType:  attrs.TimestampType(),
		ProducerID:     b.ProducerID(),
		ProducerEpoch:  b.ProducerEpoch(),
		BaseSequence:   b.BaseSequence(),
		Transactional:  attrs.Transactional(),
		Control:        attrs.Control(),
	}
}

// Object is one WAL object being built: the requests in it, their batches
// grouped by partition. Encode writes it; Answer or Fail answers its
// requests. An Object is safe for concurrent use once closed (Buffer.Next
// returns it closed); while it is being filled, only its owner touches it.
type Object struct {
	key      string
	requests []*Request
	parts    map[TopicPartition]int32
	regions  []region
	batches  []batchRef          // every batch, in arrival order
	topics   map[uuid.UUID]int32 // topic ID -> index in topicIDs
	topicIDs []uuid.UUID
	size     int64
	owner    *Buffer // to release the object's bytes, if any

	mu struct {
		sync.Mutex
		order    []int32 // the batches (indexes in batches) in object order, as the last Encode wrote them
		answered bool
	}
}

// region is one partition's batches.
type region struct {
	tp      TopicPartition
	topic   int32 // index in topicIDs
	batches int32 // how many
}

// batchRef is a batch, the coordinate its header gives (read by Add, while
// the batch is fresh in the cache, with Offset left for Encode), its region
// and where it came from: request req, batch idx.
type batchRef struct {
	data   kbatch.Batch
	coord  Coordinate
	region int32
	req    int32
	idx    int32
}

// NewObject returns an empty object that will be stored under key.
func NewObject(key string) *Object {
	return &Object{key: key, parts: make(map[TopicPartition]int32), topics: make(map[uuid.UUID]int32), size: 1}
}

// Key returns the object's key.
func (o *Object) Key() string { return o.key }

// Size returns the object's size in bytes: the version byte and every
// batch.
func (o *Object) Size() int64 { return o.size }

// NumBatches returns how many batches the object holds.
func (o *Object) NumBatches() int { return len(o.batches) }

// NumPartitions returns how many partitions the object has batches for.
func (o *Object) NumPartitions() int { return len(o.regions) }

// Requests returns the requests in the object, in arrival order.
func (o *Object) Requests() []*Request { return o.requests }

// Add puts a request's batches into the object. It must not be called
// once the object is encoded.
func (o *Object) Add(req *Request) {
	r := int32(len(o.requests))
	o.requests = append(o.requests, req)
	for i := range req.Batches {
		b := &req.Batches[i]
		ri, ok := o.parts[b.TopicPartition]
		if !ok {
			ri = int32(len(o.regions))
			o.parts[b.TopicPartition] = ri
			ti, ok := o.topics[b.TopicID]
			if !ok {
				ti = int32(len(o.topicIDs))
				o.topics[b.TopicID] = ti
				o.topicIDs = append(o.topicIDs, b.TopicID)
			}
			o.regions = append(o.regions, region{tp: b.TopicPartition, topic: ti})
		}
		o.regions[ri].batches++
		o.batches = append(o.batches, batchRef{data: b.Data, coord: coordinateOf(b.TopicPartition, 0, b.Data), region: ri, req: r, idx: int32(i)})
		o.size += int64(len(b.Data))
	}
}

// Encode writes the object to w: the version byte, then each partition's
// batches, partitions in order. It appends the coordinate of every batch,
// in object order, to coords and returns the result. Each byte is written
// once, so w can be a blob.Writer; Encode may be called again (to retry an
// upload) and writes the same bytes. Batches that follow each other in
// the object and in memory (a request's batches for consecutive
// partitions, say) go to w in one Write. If a Write fails, the coordinates
// returned are those of the batches written before it.
func (o *Object) Encode(w io.Writer, coords []Coordinate) ([]Coordinate, error) {
	o.mu.Lock()
	order := o.objectOrder(o.mu.order[:0])
	o.mu.order = order
	o.mu.Unlock()

	coords = slices.Grow(coords, len(order))
	if _, err := w.Write(version0[:]); err != nil {
		return coords, fmt.Errorf("wal: writing object %s: %w", o.key, err)
	}
	written := len(coords) // coords[:written] are of batches written
	var run []byte         // batches not yet written, contiguous in memory
	off := int64(1)
	for _, i := range order {
		ref := &o.batches[i]
		d := ref.data
		if len(run) > 0 && !(cap(run)-len(run) >= len(d) && len(d) > 0 && &run[:len(run)+1][len(run)] == &d[0]) {
			if _, err := w.Write(run); err != nil {
				return coords[:written], fmt.Errorf("wal: writing object %s: %w", o.key, err)
			}
			written, run = len(coords), nil
		}
		if len(run) == 0 {
			run = d
		} else {
			run = run[:len(run)+len(d)]
		}
		c := ref.coord
		c.Offset = off
		coords = append(coords, c)
		off += int64(len(d))
	}
	if len(run) > 0 {
		if _, err := w.Write(run); err != nil {
			return coords[:written], fmt.Errorf("wal: writing object %s: %w", o.key, err)
		}
	}
	return coords, nil
}

// AppendEncode appends the object to dst, the same bytes Encode writes,
// and the coordinate of every batch, in object order, to coords, and
// returns both. Each batch is copied once, in the order the batches came
// (mostly the order they lie in memory) to its place in the object: with
// many partitions that is much faster than Encode's copies in object
// order, which jump about the heap. dst's contents before its length are
// kept.
func (o *Object) AppendEncode(dst []byte, coords []Coordinate) ([]byte, []Coordinate) {
	o.mu.Lock()
	order := o.objectOrder(o.mu.order[:0])
	o.mu.order = order
	o.mu.Unlock()

	base := len(dst)
	dst = slices.Grow(dst, int(o.size))[:base+int(o.size)]
	dst[base] = Version0
	at := make([]int64, len(o.batches)) // each batch's offset in the object
	coords = slices.Grow(coords, len(order))
	off := int64(1)
	for _, i := range order {
		ref := &o.batches[i]
		at[i] = off
		c := ref.coord
		c.Offset = off
		coords = append(coords, c)
		off += int64(len(ref.data))
	}
	obj := dst[base:]
	for i := range o.batches {
		copy(obj[at[i]:], o.batches[i].data)
	}
	return dst, coords
}

// objectOrder appends to dst the batches (indexes in o.batches) in object
// order, and returns it: regions in order (sortRegions), each region's
// batches in arrival order. A counting sort of the batches by their
// region's place: one pass over the batches, in the order they lie in.
func (o *Object) objectOrder(dst []int32) []int32 {
	keys := o.sortRegions(nil)
	next := make([]int32, len(o.regions)) // where region r's next batch goes
	n := int32(0)
	for _, k := range keys {
		r := uint32(k)
		next[r] = n
		n += o.regions[r].batches
	}
	dst = slices.Grow(dst[:0], len(o.batches))[:len(o.batches)]
	for i := range o.batches {
		r := o.batches[i].region
		dst[next[r]] = int32(i)
		next[r]++
	}
	return dst
}

// sortRegions appends the regions to dst in object order (topic ID, then
// partition) and returns it. Each element is a sort key whose low 32 bits
// are the region's index. Regions are bucketed by topic first (topics are
// few), then each topic's are sorted as plain integers: the partition
// (sign bit flipped, so negative numbers sort first) above the index.
// That keeps sorting 10,000 regions cheap next to copying 8 MiB.
func (o *Object) sortRegions(dst []uint64) []uint64 {
	// Rank the topics by ID.
	ranks := make([]int32, len(o.topicIDs))
	for i := range ranks {
		ranks[i] = int32(i)
	}
	slices.SortFunc(ranks, func(a, b int32) int { return bytes.Compare(o.topicIDs[a][:], o.topicIDs[b][:]) })
	start := make([]int, len(o.topicIDs)+1) // start[rank]: where the topic's regions begin
	rankOf := make([]int32, len(o.topicIDs))
	for r, ti := range ranks {
		rankOf[ti] = int32(r)
	}
	for i := range o.regions {
		start[rankOf[o.regions[i].topic]+1]++
	}
	for r := 1; r < len(start); r++ {
		start[r] += start[r-1]
	}
	dst = slices.Grow(dst[:0], len(o.regions))[:len(o.regions)]
	next := slices.Clone(start[:len(start)-1])
	for i := range o.regions {
		r := rankOf[o.regions[i].topic]
		dst[next[r]] = uint64(uint32(o.regions[i].tp.Partition)^0x80000000)<<32 | uint64(i)
		next[r]++
	}
	var scratch []uint64
	for r := 0; r+1 < len(start); r++ {
		scratch = radixSortHigh(dst[start[r]:start[r+1]], scratch)
	}
	return dst
}

// radixSortHigh sorts keys by their high 32 bits (which are distinct), with
// an LSD radix sort of one byte a pass that skips the bytes all keys share:
// for partition numbers below 65,536 that is two passes over the keys.
// scratch is reused between calls and returned.
func radixSortHigh(keys, scratch []uint64) []uint64 {
	if len(keys) < 64 {
		slices.Sort(keys)
		return scratch
	}
	scratch = slices.Grow(scratch[:0], len(keys))[:len(keys)]
	src, dst := keys, scratch
	for shift := uint(32); shift < 64; shift += 8 {
		var count [256]int
		for _, k := range src {
			count[byte(k>>shift)]++
		}
		if count[byte(src[0]>>shift)] == len(src) {
			continue // every key has this byte
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for _, k := range src {
			b := byte(k >> shift)
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	return scratch
}

// Answer answers every request in the object: results holds one Result per
// coordinate that Encode returned, in the same order. Each request's Done
// gets its batches' results in the request's order. Answer (or Fail) must
// be called once, after Encode; it frees the object's bytes in its Buffer.
func (o *Object) Answer(results []Result) error {
	o.mu.Lock()
	order, answered := o.mu.order, o.mu.answered
	if order == nil && len(o.regions) > 0 {
		o.mu.Unlock()
		return ErrNotEncoded
	}
	if answered {
		o.mu.Unlock()
		return fmt.Errorf("wal: object %s answered twice", o.key)
	}
	if n := o.NumBatches(); len(results) != n {
		o.mu.Unlock()
		return fmt.Errorf("wal: object %s has %d batches, got %d results", o.key, n, len(results))
	}
	o.mu.answered = true
	o.mu.Unlock()

	per := make([][]Result, len(o.requests))
	for i, req := range o.requests {
		per[i] = make([]Result, len(req.Batches))
	}
	for i, b := range order {
		ref := &o.batches[b]
		per[ref.req][ref.idx] = results[i]
	}
	for r, req := range o.requests {
		if req.Done != nil {
			req.Done(per[r], nil)
		}
	}
	o.release()
	return nil
}

// Fail answers every request in the object with err (the upload or the
// commit failed) and frees the object's bytes in its Buffer. It does
// nothing if the object is already answered.
func (o *Object) Fail(err error) {
	o.mu.Lock()
	if o.mu.answered {
		o.mu.Unlock()
		return
	}
	o.mu.answered = true
	o.mu.Unlock()
	for _, req := range o.requests {
		if req.Done != nil {
			req.Done(nil, err)
		}
	}
	o.release()
}

func (o *Object) release() {
	if o.owner != nil {
		o.owner.release(o.size - 1) // the batches; the version byte was never counted
	}
}
