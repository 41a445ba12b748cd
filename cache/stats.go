package cache

import "sync/atomic"

// Stats is a snapshot of a Cache's counters (totals since New) and gauges
// (values now). Blocks are counted once per read that needs them: a read of
// three blocks, one in memory and two fetched, is one hit and two misses.
type Stats struct {
	// Hits counts blocks served from the memory tier.
	Hits int64
	// DiskHits counts blocks served from the disk tier (and copied into
	// memory).
	DiskHits int64
	// Misses counts blocks in neither tier: a read started a fill for them
	// or joined one in flight.
	Misses int64
	// Coalesced counts the misses that joined a fill already in flight
	// (single flight) rather than starting one.
	Coalesced int64
	// GETs counts the range GETs sent to the bucket; one fill is one GET,
	// whatever the number of blocks it fetches.
	GETs int64
	// GetErrors counts fills that failed (errors are not cached).
	GetErrors int64
	// BytesFetched counts the bytes read from the bucket.
	BytesFetched int64
	// ColdFills counts fills that started cold (they wait for one of
	// Options.ColdConcurrency slots).
	ColdFills int64
	// Promoted counts cold fills let go without a slot because a hot read
	// joined them while they waited.
	Promoted int64
	// FillsInFlight is the number of fills started and not yet finished
	// (gauge).
	FillsInFlight int64
	// ColdWaiting is the number of cold fills waiting for a slot (gauge).
	ColdWaiting int64
	// Puts counts calls to Put, BytesPut the bytes they gave.
	Puts, BytesPut int64
	// Forgets counts calls to Forget.
	Forgets int64
	// Evictions counts blocks evicted from the memory tier to make room.
	Evictions int64
	// MemoryBytes and MemoryBlocks are the bytes and blocks in the memory
	// tier (gauges).
	MemoryBytes, MemoryBlocks int64
	// DiskEvictions counts block files deleted to make room.
	DiskEvictions int64
	// DiskDamaged counts block files found damaged (a CRC or another check
	// failed), deleted, and their blocks fetched again.
	DiskDamaged int64
	// DiskWriteErrors counts block files that could not be written.
	DiskWriteErrors int64
	// Spilled counts blocks Put gave that went to the disk tier later,
	// as the memory tier evicted them (or at Close).
	Spilled int64
	// DiskBytes and DiskBlocks are the bytes and number of block files in
	// the disk tier (gauges).
	DiskBytes, DiskBlocks int64
}

// counters are the Cache's own counters; the tiers keep theirs.
type counters struct {
	diskHits      atomic.Int64
	misses        atomic.Int64
	coalesced     atomic.Int64
	gets          atomic.Int64
	getErrors     atomic.Int64
	bytesFetched  atomic.Int64
	coldFills     atomic.Int64
	promoted      atomic.Int64
	fillsInFlight atomic.Int64
	coldWaiting   atomic.Int64
	puts          atomic.Int64
	bytesPut      atomic.Int64
	forgets       atomic.Int64
	spilled       atomic.Int64
}

// Stats returns a snapshot of the counters. Each field is read atomically;
// the snapshot as a whole is not (fields read while reads run may not add
// up exactly).
func (c *Cache) Stats() Stats {
	s := Stats{
		DiskHits:      c.st.diskHits.Load(),
		Misses:        c.st.misses.Load(),
		Coalesced:     c.st.coalesced.Load(),
		GETs:          c.st.gets.Load(),
		GetErrors:     c.st.getErrors.Load(),
		BytesFetched:  c.st.bytesFetched.Load(),
		ColdFills:     c.st.coldFills.Load(),
		Promoted:      c.st.promoted.Load(),
		FillsInFlight: c.st.fillsInFlight.Load(),
		ColdWaiting:   c.st.coldWaiting.Load(),
		Puts:          c.st.puts.Load(),
		BytesPut:      c.st.bytesPut.Load(),
		Forgets:       c.st.forgets.Load(),
		Spilled:       c.st.spilled.Load(),
	}
	s.Hits, s.Evictions, s.MemoryBytes, s.MemoryBlocks = c.mem.totals()
	if c.disk != nil {
		s.DiskEvictions = c.disk.evictions.Load()
		s.DiskDamaged = c.disk.damaged.Load()
		s.DiskWriteErrors = c.disk.writeErrors.Load()
		s.DiskBytes = c.disk.bytes.Load()
		s.DiskBlocks = c.disk.blocks.Load()
	}
	return s
}
