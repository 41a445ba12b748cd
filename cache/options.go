package cache

import (
	"fmt"

	"go.uber.org/zap"
)

// Defaults of Options.
const (
	// DefaultBlockSize is the unit of fills and of both tiers.
	DefaultBlockSize = 4 << 20
	// DefaultMemoryBytes bounds the memory tier.
	DefaultMemoryBytes = 256 << 20
	// DefaultDiskBytes bounds the disk tier when Options.Dir is set.
	DefaultDiskBytes = 8 << 30
	// DefaultColdConcurrency is how many cold fills may run at once.
	DefaultColdConcurrency = 4
	// DefaultHotKeys is how many keys the cache remembers as hot.
	DefaultHotKeys = 64
	// MaxBlockSize is the largest block size (block files store a block's
	// length in 32 bits).
	MaxBlockSize = 1 << 30
	// maxShards caps the default number of memory shards.
	maxShards = 16
)

// Options configure a Cache. The zero value holds the defaults; a nil
// *Options means the zero value. New reports the first field that is out of
// range.
type Options struct {
	// BlockSize is the size of a block: fills fetch whole blocks (the last
	// block of an object is shorter), and both tiers hold whole blocks. 0
	// means DefaultBlockSize; otherwise 1 to MaxBlockSize.
	BlockSize int64
	// MemoryBytes bounds the bytes of blocks held in memory (and up to 8
	// blocks more, evicted and waiting to be written to disk: see the
	// package doc's Write-back). 0 means DefaultMemoryBytes; it must hold
	// at least one block per shard.
	MemoryBytes int64
	// Shards is the number of independently locked LRU shards of the memory
	// tier; MemoryBytes is split evenly between them. 0 means up to 16,
	// fewer when MemoryBytes is small, so that each shard holds at least 4
	// blocks.
	Shards int
	// Dir, when set, enables the disk tier: one file per block in this
	// folder (created if missing), kept across restarts. The cache owns
	// the files it names (*.blk, *.tmp) and leaves others alone.
	Dir string
	// DiskBytes bounds the bytes of block files in Dir. 0 means
	// DefaultDiskBytes; it must hold at least one block.
	DiskBytes int64
	// ColdConcurrency is how many cold fills (fetches for reads of old
	// data) may run at once; further cold fills wait. Hot fills do not
	// wait. 0 means DefaultColdConcurrency.
	ColdConcurrency int
	// HotKeys is how many keys the cache remembers as hot: the keys most
	// recently given to Put or read with ClassHot. A read with ClassAuto of
	// a remembered key is hot, of any other key cold. 0 means
	// DefaultHotKeys.
	HotKeys int
	// Logger logs fill failures, damaged block files and the disk scan;
	// nil means no logging.
	Logger *zap.Logger
}

// Class says which concurrency limit a read's fills go through.
type Class uint8

const (
	// ClassAuto lets the cache decide: hot if the key is among the
	// Options.HotKeys keys most recently Put or read with ClassHot, else
	// cold.
	ClassAuto Class = iota
	// ClassHot: a read of recent data (a consumer at the tail). Its fills
	// never wait for a cold slot, and a hot read that joins a cold fill
	// still waiting for its slot lets it go at once.
	ClassHot
	// ClassCold: a read of old data (a lagging consumer). Its fills go
	// through the Options.ColdConcurrency limit.
	ClassCold
)

// String returns "auto", "hot" or "cold".
func (c Class) String() string {
	switch c {
	case ClassAuto:
		return "auto"
	case ClassHot:
		return "hot"
	case ClassCold:
		return "cold"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ReadOptions tune one read. A nil *ReadOptions means the zero value.
type ReadOptions struct {
	// Class is the read's class; the zero value is ClassAuto.
	Class Class
	// ObjectSize, when positive, is the object's size in bytes, as the
	// caller knows it (the coordinator stores every WAL object's size). A
	// range past it fails with ErrOutOfRange without a GET, and fills stop
	// at it. A bucket that reports another size fails the read with
	// ErrSizeMismatch.
	ObjectSize int64
}

// config is Options validated, with defaults applied.
type config struct {
	blockSize       int64
	memoryBytes     int64
	shards          int
	dir             string
	diskBytes       int64
	coldConcurrency int
	hotKeys         int
	log             *zap.Logger
}

func (o *Options) config() (config, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	c := config{
		blockSize:       opts.BlockSize,
		memoryBytes:     opts.MemoryBytes,
		shards:          opts.Shards,
		dir:             opts.Dir,
		diskBytes:       opts.DiskBytes,
		coldConcurrency: opts.ColdConcurrency,
		hotKeys:         opts.HotKeys,
		log:             opts.Logger,
	}
	if c.blockSize == 0 {
		c.blockSize = DefaultBlockSize
	}
	if c.blockSize < 1 || c.blockSize > MaxBlockSize {
		return c, fmt.Errorf("cache: Options.BlockSize %d: want 1 to %d", opts.BlockSize, MaxBlockSize)
	}
	if c.memoryBytes == 0 {
		c.memoryBytes = DefaultMemoryBytes
	}
	if c.memoryBytes < c.blockSize {
		return c, fmt.Errorf("cache: Options.MemoryBytes %d: must hold at least one block of %d bytes", opts.MemoryBytes, c.blockSize)
	}
	switch {
	case c.shards == 0:
		c.shards = maxShards
		for c.shards > 1 && c.memoryBytes/int64(c.shards) < 4*c.blockSize {
			c.shards /= 2
		}
	case c.shards < 0:
		return c, fmt.Errorf("cache: Options.Shards %d: must not be negative", opts.Shards)
	case c.memoryBytes/int64(c.shards) < c.blockSize:
		return c, fmt.Errorf("cache: Options.Shards %d: each shard of MemoryBytes %d must hold a block of %d bytes", opts.Shards, c.memoryBytes, c.blockSize)
	}
	if c.dir != "" {
		if c.diskBytes == 0 {
			c.diskBytes = DefaultDiskBytes
		}
		if c.diskBytes < c.blockSize {
			return c, fmt.Errorf("cache: Options.DiskBytes %d: must hold at least one block of %d bytes", opts.DiskBytes, c.blockSize)
		}
	} else if c.diskBytes != 0 {
		return c, fmt.Errorf("cache: Options.DiskBytes %d: set without Options.Dir", opts.DiskBytes)
	}
	if c.coldConcurrency == 0 {
		c.coldConcurrency = DefaultColdConcurrency
	}
	if c.coldConcurrency < 0 {
		return c, fmt.Errorf("cache: Options.ColdConcurrency %d: must not be negative", opts.ColdConcurrency)
	}
	if c.hotKeys == 0 {
		c.hotKeys = DefaultHotKeys
	}
	if c.hotKeys < 0 {
		return c, fmt.Errorf("cache: Options.HotKeys %d: must not be negative", opts.HotKeys)
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	return c, nil
}
