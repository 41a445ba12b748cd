// Package cache is a byte-range cache for immutable objects over a
// *blob.Bucket: the WAL objects that fetches read. A GET costs money and
// 50 to 200 ms; most consumers read the tail of the log, which the broker
// that uploaded it still holds, and lagging consumers read old data and
// must not starve the tail. An object never changes once written, so
// nothing cached is ever invalidated: it is only evicted, or forgotten
// when the object is deleted.
//
// # Reads
//
// ReadRange and ReadRangeInto return exactly the bytes asked for, or an
// error, never part of them. A range that ends past the object's end fails
// with ErrOutOfRange. The cache learns an object's size from every range
// GET (the bucket reports it), from Put, and from the caller
// (ReadOptions.ObjectSize); it remembers sizes (the last 16384 objects) so
// that later fills stop at the end and a range past it fails without a
// GET. A read whose blocks are all in memory takes a shard lock per block,
// copies, and does not allocate (ReadRangeInto).
//
// # Blocks and fills
//
// Objects are cached in blocks (Options.BlockSize, 4 MiB by default; the
// last block of an object is shorter). A read that misses plans under one
// lock where each block comes from: memory, disk, a fill already in flight
// (single flight: however many readers want a block at once, one fetch),
// or nowhere; each run of adjacent blocks that are nowhere becomes one
// fill, one range GET. A fill runs in its own goroutine under the cache's
// lifetime context, not under the context of the read that started it: a
// reader whose context ends returns at once and the fill goes on for the
// others; Close cancels it. A fill's result is shared by all its readers.
// A failed fill is not cached: the next read tries again.
//
// # Tiers
//
// The memory tier is bounded in bytes (Options.MemoryBytes) and split into
// shards, each an LRU under its own lock; a block's shard is chosen by a
// hash of its key and index, so the blocks of one hot object spread over
// all shards.
//
// The disk tier (Options.Dir, bounded by Options.DiskBytes) holds one file
// per block and survives a restart: New scans the folder and rebuilds the
// index from the files' headers, most recently modified kept longest. Every
// fill writes its blocks there too, and Put's blocks go there as the
// memory tier evicts them (see Write-back); a block found on disk is
// copied into memory. Files are written under a temporary name and
// renamed; nothing is fsynced. A file that fails a check (either CRC, its
// size, its name, its header against the block it should hold) is deleted
// and its block fetched again, whether the scan or a read finds it.
//
// # Write-back
//
// The broker Puts each object it has just uploaded: its blocks go to the
// memory tier at once, so reads of the tail never GET, and to the disk
// tier only when the memory tier evicts them (a spill writer writes them
// in the background; a block evicted while it is behind is written by the
// caller that evicted it), or at Close. So the produce path writes
// nothing to disk, and an object forgotten while its blocks are still in
// memory (deleted, as WAL objects are once merged or offloaded) is never
// written there at all. A crash loses only the blocks that were in
// memory: they are fetched again when read. Stats.Spilled counts the
// blocks written this way.
//
// # Hot and cold
//
// Every read has a class. ClassHot (a consumer at the tail) and ClassCold
// (a lagging consumer) are the caller's word; ClassAuto (the zero value)
// is hot when the key is among the Options.HotKeys keys most recently Put
// or read hot, cold otherwise. The class matters only to fills: cold fills
// wait for one of Options.ColdConcurrency slots, hot fills never wait. So a
// lagging consumer's GETs queue behind each other, never in front of the
// tail's. A hot read that needs a block whose cold fill is still waiting
// for a slot promotes that fill: it starts at once.
//
// # The block file, format version 1
//
// One file per block, named
//
//	<first 16 bytes of SHA-256(key), hex>-<block index, 16 hex digits>.blk
//
// (temporary files are block-*.tmp). All integers little-endian, CRCs are
// CRC32C (Castagnoli). The header CRC covers bytes 0 to 35 and the key,
// the data CRC covers the data. The data length is min(block size, object
// size - index × block size). Part of the format: changing any of it needs
// a new version.
//
//	 0        4   5        8           12           16            24            32         36           40
//	+--------+---+--------+-----------+------------+-------------+-------------+----------+------------+
//	| "DLCB" | 1 | 0 0 0  | block     | key length | block index | object size | data     | header     |
//	|        |   |        | size u32  | u32        | u64         | u64         | len u32  | CRC u32    |
//	+--------+---+--------+-----------+------------+-------------+-------------+----------+------------+
//	| key (key length bytes)  | data (data len bytes)                             | data CRC u32 |
//	+-------------------------+---------------------------------------------------+--------------+
//	40                    40 + key length                                    file size - 4
//
// # Guarantees
//
//   - A read returns the object's bytes or an error; never bytes of another
//     object or offset (the file header names its block, the CRCs cover
//     it), never a partial range.
//   - One GET per block however many concurrent readers miss it; one GET
//     per run of adjacent missing blocks of a read.
//   - Errors, including a missing object, are never cached.
//   - A read's context bounds only its wait; Close bounds every fill, and
//     waits for every goroutine the cache started.
//   - Memory and disk stay within their bounds (a file larger than the whole
//     disk bound is not written).
//
// Stats reports hits (memory and disk), misses, GETs, bytes fetched,
// evictions, fills in flight and the state of the cold limit.
package cache
