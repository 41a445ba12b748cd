package cache

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// memory is the memory tier: blocks in shards, each an LRU bounded in
// bytes. A block's shard is chosen by a hash of its key and index, so the
// blocks of one object (the tail that every consumer reads) spread over all
// shards. Blocks are immutable once inserted: a reader may copy from a
// block's bytes after releasing the shard lock, and eviction only drops the
// reference.
type memory struct {
	seed   maphash.Seed
	shards []memShard
	// begin registers the disk write of a block that leaves the memory
	// tier unwritten (dirty), under the shard's lock so that a Forget
	// after it cancels the write; nil without a disk tier.
	begin func(key string) *diskWrite
}

// spill is a dirty block that left the memory tier, for the disk tier:
// its write is registered (w), and whoever writes it ends w.
type spill struct {
	key          string
	idx, objSize int64
	data         []byte
	w            *diskWrite
}

// memEntry is one cached block, linked into its shard's LRU list.
type memEntry struct {
	key     string
	idx     int64
	data    []byte
	objSize int64
	dirty   bool // Put, not yet on disk: written when evicted
	lruLinks[memEntry]
}

type memShard struct {
	capacity int64

	hits      atomic.Int64
	evictions atomic.Int64
	bytes     atomic.Int64 // written under mu, read by Stats
	blocks    atomic.Int64 // written under mu, read by Stats

	mu struct {
		sync.Mutex
		keys map[string]map[int64]*memEntry
		lru  memEntry // sentinel: lru.next is the most recently used
	}
	_ [64]byte // keep shards' locks on separate cache lines
}

func newMemory(capacity int64, shards int) *memory {
	m := &memory{seed: maphash.MakeSeed(), shards: make([]memShard, shards)}
	for i := range m.shards {
		s := &m.shards[i]
		s.capacity = capacity / int64(shards)
		s.mu.keys = make(map[string]map[int64]*memEntry)
		lruInit(&s.mu.lru)
	}
	return m
}

// shardOf hashes key and idx to pick a shard: maphash of the key (seeded
// per cache), mixed with the index, reduced by multiply-shift rather than
// a division.
func (m *memory) shardOf(key string, idx int64) *memShard {
	if len(m.shards) == 1 {
		return &m.shards[0]
	}
	h := maphash.String(m.seed, key) ^ uint64(idx)*0x9e3779b97f4a7c15
	h ^= h >> 29
	hi, _ := bits.Mul64(h, uint64(len(m.shards)))
	return &m.shards[hi]
}

// get returns block idx of key and the object's size, and marks the block
// most recently used. It counts a hit when the block is there.
func (m *memory) get(key string, idx int64) (data []byte, objSize int64, ok bool) {
	s := m.shardOf(key, idx)
	s.mu.Lock()
	e := s.mu.keys[key][idx]
	if e == nil {
		s.mu.Unlock()
		return nil, 0, false
	}
	if s.mu.lru.next != e {
		lruUnlink(e)
		lruPushFront(&s.mu.lru, e)
	}
	data, objSize = e.data, e.objSize
	s.mu.Unlock()
	s.hits.Add(1)
	return data, objSize, true
}

// insert caches block idx of key, replacing a copy already there, and
// evicts least recently used blocks of the shard until it fits. A block
// larger than a shard is not cached (a dirty one is returned to spill).
// dirty marks a block the disk tier does not have yet: it is returned,
// with the other dirty blocks evicted to make room, for the caller to
// write to disk.
func (m *memory) insert(key string, idx int64, data []byte, objSize int64, dirty bool) (spills []spill) {
	s := m.shardOf(key, idx)
	n := int64(len(data))
	dirty = dirty && m.begin != nil
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.capacity {
		if dirty {
			spills = append(spills, spill{key, idx, objSize, data, m.begin(key)})
		}
		return spills
	}
	blocks := s.mu.keys[key]
	if blocks == nil {
		blocks = make(map[int64]*memEntry)
		s.mu.keys[key] = blocks
	}
	if e := blocks[idx]; e != nil {
		s.removeLocked(e)
	}
	for s.bytes.Load()+n > s.capacity {
		victim := s.mu.lru.prev
		s.removeLocked(victim)
		s.evictions.Add(1)
		if victim.dirty {
			spills = append(spills, spill{victim.key, victim.idx, victim.objSize, victim.data, m.begin(victim.key)})
		}
	}
	e := &memEntry{key: key, idx: idx, data: data, objSize: objSize, dirty: dirty}
	// removeLocked may have deleted the key's map if it emptied it.
	if blocks = s.mu.keys[key]; blocks == nil {
		blocks = make(map[int64]*memEntry)
		s.mu.keys[key] = blocks
	}
	blocks[idx] = e
	lruPushFront(&s.mu.lru, e)
	s.bytes.Add(n)
	s.blocks.Add(1)
	return spills
}

// forget drops every block of key.
func (m *memory) forget(key string) {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for _, e := range s.mu.keys[key] {
			s.removeLocked(e)
		}
		s.mu.Unlock()
	}
}

// clear drops every block (Close) and returns the dirty ones, to be
// written to disk.
func (m *memory) clear() (spills []spill) {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for e := s.mu.lru.next; e != &s.mu.lru; {
			next := e.next
			s.removeLocked(e)
			if e.dirty {
				spills = append(spills, spill{e.key, e.idx, e.objSize, e.data, m.begin(e.key)})
			}
			e = next
		}
		s.mu.Unlock()
	}
	return spills
}

func (s *memShard) removeLocked(e *memEntry) {
	lruUnlink(e)
	deleteBlock(s.mu.keys, e.key, e.idx)
	s.bytes.Add(-int64(len(e.data)))
	s.blocks.Add(-1)
}

// totals sums the shards' counters.
func (m *memory) totals() (hits, evictions, bytes, blocks int64) {
	for i := range m.shards {
		s := &m.shards[i]
		hits += s.hits.Load()
		evictions += s.evictions.Load()
		bytes += s.bytes.Load()
		blocks += s.blocks.Load()
	}
	return hits, evictions, bytes, blocks
}
