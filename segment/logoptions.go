package segment

import (
	"fmt"
	"math"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kbatch"
)

// Defaults of the topic settings that LogOptions mirrors: Apache Kafka's,
// except FileDeleteDelay (see there).
const (
	// DefaultSegmentTime is segment.ms: 7 days (kbatch.DefaultSegmentTime).
	DefaultSegmentTime = kbatch.DefaultSegmentTime
	// DefaultIndexIntervalBytes is index.interval.bytes.
	DefaultIndexIntervalBytes = 4096
	// DefaultSegmentIndexBytes is segment.index.bytes: 10 MiB, so 1 310 720
	// offset index entries and 873 813 time index entries.
	DefaultSegmentIndexBytes = 10 << 20
	// DefaultRetentionTime is retention.ms: 7 days
	// (kbatch.DefaultRetentionTime).
	DefaultRetentionTime = kbatch.DefaultRetentionTime
	// DefaultDeleteRetention is delete.retention.ms: 1 day.
	DefaultDeleteRetention = 24 * time.Hour
	// DefaultMinCleanableDirtyRatio is min.cleanable.dirty.ratio.
	DefaultMinCleanableDirtyRatio = 0.5
	// DefaultCleanerBufferBytes is log.cleaner.dedupe.buffer.size: the
	// memory the cleaner's map of keys to offsets may take.
	DefaultCleanerBufferBytes = 128 << 20
)

// minSegmentIndexBytes is the smallest segment.index.bytes a Log accepts:
// room for two time index entries, so that an index can fill and roll the
// segment only once it holds something.
const minSegmentIndexBytes = 2 * timeIndexEntrySize

// CleanupPolicy is a topic's cleanup.policy. The zero value is "delete",
// Kafka's default.
type CleanupPolicy uint8

// The cleanup policies.
const (
	// CleanupDelete removes whole old segments by retention.ms and
	// retention.bytes.
	CleanupDelete CleanupPolicy = iota
	// CleanupCompact keeps the latest record of each key (Compact).
	CleanupCompact
	// CleanupCompactDelete does both: "compact,delete".
	CleanupCompactDelete
)

// Delete reports whether the policy includes delete.
func (p CleanupPolicy) Delete() bool { return p == CleanupDelete || p == CleanupCompactDelete }

// Compact reports whether the policy includes compact.
func (p CleanupPolicy) Compact() bool { return p == CleanupCompact || p == CleanupCompactDelete }

// String returns the cleanup.policy value as Kafka spells it.
func (p CleanupPolicy) String() string {
	switch p {
	case CleanupDelete:
		return "delete"
	case CleanupCompact:
		return "compact"
	case CleanupCompactDelete:
		return "compact,delete"
	}
	return fmt.Sprintf("CleanupPolicy(%d)", uint8(p))
}

// ParseCleanupPolicy parses a cleanup.policy value: "delete", "compact",
// or both separated by a comma in either order.
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	var del, compact bool
	for _, part := range strings.Split(s, ",") {
		switch strings.ToLower(strings.TrimSpace(part)) {
		case "delete":
			del = true
		case "compact":
			compact = true
		default:
			return 0, fmt.Errorf("segment: unknown cleanup.policy %q", s)
		}
	}
	switch {
	case del && compact:
		return CleanupCompactDelete, nil
	case compact:
		return CleanupCompact, nil
	}
	return CleanupDelete, nil
}

// LogOptions are the settings of one partition's Log: Kafka's topic
// configurations of the same names. The zero value of each field is Kafka's
// default; a nil *LogOptions means all defaults. OpenLog validates them and
// names the field that is out of range.
//
// Zero always means the default, so where Kafka accepts 0 and defaults to
// something else (retention.ms, retention.bytes, delete.retention.ms,
// min.cleanable.dirty.ratio), the field says how to get Kafka's 0.
type LogOptions struct {
	// SegmentBytes is segment.bytes: a segment rolls before an append
	// would take it past this size, and an append larger than it fails
	// with RECORD_LIST_TOO_LARGE. 0 means DefaultSegmentBytes (1 GiB);
	// otherwise it must be within [HeaderSize, MaxInt32].
	SegmentBytes int
	// SegmentTime is segment.ms: a segment rolls once an append's max
	// timestamp is this far past the max timestamp of the segment's first
	// batch (record time, not wall time; wall time since the segment was
	// created or loaded when its first batch has no timestamp). 0 means
	// DefaultSegmentTime (7 days).
	//
	// The reference is the first batch's max timestamp whether the segment
	// was written by this process or loaded. Kafka uses the greatest
	// timestamp of the segment's first append while it writes the segment
	// and the first batch's after a restart; the two differ only when the
	// first append holds several batches and a later one has a greater
	// timestamp, where a Log may roll a little earlier than Kafka would.
	SegmentTime time.Duration
	// SegmentJitter is segment.jitter.ms: each segment's SegmentTime is
	// shortened by a random duration in [0, min(SegmentJitter,
	// SegmentTime)). 0 means none.
	SegmentJitter time.Duration
	// IndexIntervalBytes is index.interval.bytes: an append gets an offset
	// index entry when more than this many bytes were appended since the
	// last entry. 0 means DefaultIndexIntervalBytes (4096); 1 indexes every
	// append but the first of each segment.
	IndexIntervalBytes int
	// SegmentIndexBytes is segment.index.bytes, the size of a full index
	// file: a segment rolls when its offset index holds
	// SegmentIndexBytes/8 entries or its time index
	// SegmentIndexBytes/12 - 1. 0 means DefaultSegmentIndexBytes (10 MiB);
	// otherwise at least 24.
	SegmentIndexBytes int
	// RetentionTime is retention.ms: DeleteOldSegments deletes a segment
	// whose greatest record timestamp is older than this. 0 means
	// DefaultRetentionTime (7 days); negative means no limit (Kafka's -1).
	// It counts in whole milliseconds, as Kafka does: a positive duration
	// below a millisecond, such as time.Nanosecond, is Kafka's
	// retention.ms=0 (every segment whose greatest timestamp is in the
	// past goes).
	RetentionTime time.Duration
	// RetentionBytes is retention.bytes: DeleteOldSegments deletes the
	// oldest segments while the log would stay at least this large without
	// them. 0 or negative means no limit, Kafka's default (-1). Kafka's
	// retention.bytes=0, which deletes every segment (rolling the active
	// one first), cannot be asked for: 1 comes closest and keeps only the
	// newest non-empty segment; to empty the log, DeleteRecords with
	// DeleteRecordsHighWatermark.
	RetentionBytes int64
	// CleanupPolicy is cleanup.policy: delete (the zero value), compact,
	// or both.
	CleanupPolicy CleanupPolicy
	// DeleteRetention is delete.retention.ms: how long Compact keeps a
	// tombstone, or a transaction marker whose transaction has no data
	// left, after the clean that first keeps it. 0 means
	// DefaultDeleteRetention (1 day); negative means Kafka's 0 (gone at the
	// next clean).
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: Compact cleans
	// when the dirty bytes are more than this share of the cleanable log.
	// 0 means DefaultMinCleanableDirtyRatio (0.5), not Kafka's 0; negative
	// means Kafka's 0 (clean whenever anything is dirty); above 1 is
	// invalid.
	MinCleanableDirtyRatio float64
	// MinCompactionLag is min.compaction.lag.ms: a segment whose greatest
	// timestamp is younger than this is not cleaned. 0 means none, the
	// default.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: the log is cleaned
	// whatever its dirty ratio once its earliest dirty batch is older than
	// this. 0 or negative means no limit, the default.
	MaxCompactionLag time.Duration
	// FileDeleteDelay is file.delete.delay.ms: how long a deleted segment's
	// files stay on disk, renamed to .deleted, before they are removed.
	// Kafka's default is 60 s, for readers that may still hold the files;
	// a Log counts its readers and keeps a segment's files open until the
	// last one is done, so 0, the default here, removes them at once.
	FileDeleteDelay time.Duration
	// CleanerBufferBytes bounds the memory of Compact's map from keys to
	// their latest offsets (log.cleaner.dedupe.buffer.size); when it is
	// full, Compact cleans the part of the log it has mapped. 0 means
	// DefaultCleanerBufferBytes (128 MiB).
	CleanerBufferBytes int64
	// Clock is the broker's clock, for retention.ms, delete horizons,
	// compaction lags and segments without timestamps. nil means
	// time.Now.
	Clock func() time.Time
	// Logger receives the log's decisions (rolls, recovery, deletions,
	// cleaning). nil means zap.NewNop().
	Logger *zap.Logger

	hooks *logHooks
}

// logHooks let tests stop the world at the steps of a crash-safe file
// protocol; production code leaves them nil.
type logHooks struct {
	// afterSwapRename runs when a cleaned segment's files are all renamed
	// to .swap, before the segments it replaces are deleted.
	afterSwapRename func()
	// afterOldDeleted runs when the replaced segments are renamed to
	// .deleted, before the .swap files are renamed into place.
	afterOldDeleted func()
}

// logConfig is LogOptions with defaults applied and values in the units
// the log uses.
type logConfig struct {
	segmentBytes       int64
	segmentMs          int64
	jitterMs           int64
	indexInterval      int64
	offsetMaxEntries   int
	timeMaxEntries     int
	segmentIndexBytes  int64
	retentionMs        int64 // < 0: off
	retentionBytes     int64 // <= 0: off
	policy             CleanupPolicy
	deleteRetentionMs  int64
	minDirtyRatio      float64
	minCompactionLagMs int64
	maxCompactionLagMs int64 // MaxInt64: off
	fileDeleteDelay    time.Duration
	cleanerBufferBytes int64
	clock              func() time.Time
	logger             *zap.Logger
	hooks              logHooks
}

func (c *logConfig) nowMs() int64 { return c.clock().UnixMilli() }

func invalidOption(field string, format string, args ...any) error {
	return fmt.Errorf("%w: LogOptions.%s %s", ErrInvalidLogOptions, field, fmt.Sprintf(format, args...))
}

// resolveLogOptions applies the defaults to o and validates it.
func resolveLogOptions(o *LogOptions) (logConfig, error) {
	if o == nil {
		o = &LogOptions{}
	}
	c := logConfig{
		segmentBytes:       kbatch.DefaultSegmentBytes,
		segmentMs:          DefaultSegmentTime.Milliseconds(),
		indexInterval:      DefaultIndexIntervalBytes,
		segmentIndexBytes:  DefaultSegmentIndexBytes,
		retentionMs:        DefaultRetentionTime.Milliseconds(),
		retentionBytes:     o.RetentionBytes,
		policy:             o.CleanupPolicy,
		deleteRetentionMs:  DefaultDeleteRetention.Milliseconds(),
		minDirtyRatio:      DefaultMinCleanableDirtyRatio,
		maxCompactionLagMs: math.MaxInt64,
		fileDeleteDelay:    max(o.FileDeleteDelay, 0),
		cleanerBufferBytes: DefaultCleanerBufferBytes,
		clock:              o.Clock,
		logger:             o.Logger,
	}
	switch {
	case o.SegmentBytes < 0 || (o.SegmentBytes > 0 && o.SegmentBytes < kbatch.HeaderSize) || int64(o.SegmentBytes) > math.MaxInt32:
		return c, invalidOption("SegmentBytes", "%d is outside [%d, %d]", o.SegmentBytes, kbatch.HeaderSize, math.MaxInt32)
	case o.SegmentBytes > 0:
		c.segmentBytes = int64(o.SegmentBytes)
	}
	switch {
	case o.SegmentTime < 0:
		return c, invalidOption("SegmentTime", "%v is negative", o.SegmentTime)
	case o.SegmentTime > 0:
		c.segmentMs = max(o.SegmentTime.Milliseconds(), 1)
	}
	if o.SegmentJitter < 0 {
		return c, invalidOption("SegmentJitter", "%v is negative", o.SegmentJitter)
	}
	c.jitterMs = o.SegmentJitter.Milliseconds()
	switch {
	case o.IndexIntervalBytes < 0:
		return c, invalidOption("IndexIntervalBytes", "%d is negative", o.IndexIntervalBytes)
	case o.IndexIntervalBytes > 0:
		c.indexInterval = int64(o.IndexIntervalBytes)
	}
	switch {
	case o.SegmentIndexBytes < 0 || (o.SegmentIndexBytes > 0 && o.SegmentIndexBytes < minSegmentIndexBytes) || int64(o.SegmentIndexBytes) > math.MaxInt32:
		return c, invalidOption("SegmentIndexBytes", "%d is outside [%d, %d]", o.SegmentIndexBytes, minSegmentIndexBytes, math.MaxInt32)
	case o.SegmentIndexBytes > 0:
		c.segmentIndexBytes = int64(o.SegmentIndexBytes)
	}
	c.offsetMaxEntries = int(c.segmentIndexBytes / offsetIndexEntrySize)
	c.timeMaxEntries = int(c.segmentIndexBytes / timeIndexEntrySize)
	switch {
	case o.RetentionTime < 0:
		c.retentionMs = -1
	case o.RetentionTime > 0:
		c.retentionMs = o.RetentionTime.Milliseconds()
	}
	if c.policy > CleanupCompactDelete {
		return c, invalidOption("CleanupPolicy", "%d is not a cleanup policy", uint8(c.policy))
	}
	switch {
	case o.DeleteRetention < 0:
		c.deleteRetentionMs = 0
	case o.DeleteRetention > 0:
		c.deleteRetentionMs = o.DeleteRetention.Milliseconds()
	}
	switch r := o.MinCleanableDirtyRatio; {
	case math.IsNaN(r) || r > 1:
		return c, invalidOption("MinCleanableDirtyRatio", "%v is not within [0, 1]", r)
	case r < 0:
		c.minDirtyRatio = 0
	case r > 0:
		c.minDirtyRatio = r
	}
	if o.MinCompactionLag < 0 {
		return c, invalidOption("MinCompactionLag", "%v is negative", o.MinCompactionLag)
	}
	c.minCompactionLagMs = o.MinCompactionLag.Milliseconds()
	if o.MaxCompactionLag > 0 {
		c.maxCompactionLagMs = o.MaxCompactionLag.Milliseconds()
	}
	switch {
	case o.CleanerBufferBytes < 0:
		return c, invalidOption("CleanerBufferBytes", "%d is negative", o.CleanerBufferBytes)
	case o.CleanerBufferBytes > 0:
		c.cleanerBufferBytes = o.CleanerBufferBytes
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	if o.hooks != nil {
		c.hooks = *o.hooks
	}
	return c, nil
}
