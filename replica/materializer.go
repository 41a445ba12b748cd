package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// Source is what a Materializer reads of the coordinator. The Coordinator
// and its Follower implement it.
type Source interface {
	FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (coordinator.FindResult, error)
}

var (
	_ Source = (*coordinator.Coordinator)(nil)
	_ Source = (*coordinator.Follower)(nil)
)

// Start says where a new replica of a partition starts its local log.
type Start int

// The three starts of KIP-1163.
const (
	// StartTailWindow starts TailBytes before the end, or at the earliest
	// offset if later. The default.
	StartTailWindow Start = iota
	// StartEarliest starts at the earliest offset still held as diskless
	// batches (KIP-1163's "earliest non-tiered offset"): complete but for
	// tiered segments, which stay remote; slow, a storm of GETs.
	StartEarliest
	// StartLatest starts at the high watermark: fast, no history.
	StartLatest
	// StartDiskless starts at the diskless start offset, and keeps every
	// segment from there until it is offloaded: what an Offloader needs.
	StartDiskless
)

// Defaults of MaterializerOptions.
const (
	DefaultTailBytes = 100 << 20
	DefaultFetchSize = 4 << 20
	DefaultPoll      = 100 * time.Millisecond
)

// DefaultWorkers is the default of MaterializerOptions.Workers:
// GOMAXPROCS, at least 4 (catching up waits on reads from the bucket more
// than it computes).
func DefaultWorkers() int { return max(4, runtime.GOMAXPROCS(0)) }

// MaterializerOptions configure a Materializer. The zero value holds the
// defaults; nil means the zero value.
type MaterializerOptions struct {
	// Start is where a partition without a local log starts.
	Start Start
	// TailBytes is the tail window of StartTailWindow; 0 means 100 MiB.
	TailBytes int64
	// FetchSize bounds what one FindBatches asks; 0 means 4 MiB.
	FetchSize int64
	// Poll is how often each partition looks for new batches; 0 means
	// 100 ms. Call Sync to catch up at once.
	Poll time.Duration
	// Workers is how many goroutines catch partitions up in the
	// background, shared by every partition (and by the Offloaders over
	// this Materializer); 0 means DefaultWorkers. A partition is caught
	// up by one worker at a time.
	Workers int
	// Clock is the time source of Poll, of local retention by time and of
	// an Offloader's event times; nil means clock.System.
	Clock clock.Clock
	// Log configures the local logs. They are a cache, so usually with a
	// short retention (RetentionTime, RetentionBytes: local.retention.ms
	// and local.retention.bytes), which the Materializer applies after
	// each catch-up, to closed segments only, and, for StartDiskless
	// partitions, only to segments already offloaded (below the diskless
	// start offset).
	Log segment.LogOptions
	// Logger logs; nil means none.
	Logger *zap.Logger
}

// Materializer keeps a local segment.Log per partition in step with the
// coordinator. It is safe for concurrent use.
type Materializer struct {
	src     Source
	objects ObjectReader
	dir     string
	opts    MaterializerOptions

	sched *scheduler

	mu     sync.Mutex
	parts  map[wal.TopicPartition]*partition
	closed bool
}

// partition is one materialised partition.
type partition struct {
	tp    wal.TopicPartition
	dir   string
	start Start
	opts  segment.LogOptions
	mu    sync.Mutex // serialises catching up and resets
	log   atomic.Pointer[segment.Log]
	task  *task // its background catch-up
}

// PartitionOptions override the MaterializerOptions for one partition.
type PartitionOptions struct {
	// Start, if not nil, is where the partition starts.
	Start *Start
	// Log, if not nil, configures the partition's local log (a topic's
	// segment.bytes and segment.ms, its cleanup policy).
	Log *segment.LogOptions
}

// NewMaterializer returns a Materializer that keeps its logs under dir,
// one folder per partition: <topic ID>-<partition>.
func NewMaterializer(src Source, objects ObjectReader, dir string, opts *MaterializerOptions) (*Materializer, error) {
	var o MaterializerOptions
	if opts != nil {
		o = *opts
	}
	if o.TailBytes == 0 {
		o.TailBytes = DefaultTailBytes
	}
	if o.FetchSize == 0 {
		o.FetchSize = DefaultFetchSize
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers()
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	o.Clock = clock.Or(o.Clock)
	switch {
	case o.Start < StartTailWindow || o.Start > StartDiskless:
		return nil, fmt.Errorf("replica: MaterializerOptions.Start %d is not a Start", o.Start)
	case o.TailBytes < 0 || o.FetchSize < 0 || o.Poll < 0:
		return nil, errors.New("replica: MaterializerOptions.TailBytes, FetchSize and Poll may not be negative")
	case o.Workers < 0:
		return nil, fmt.Errorf("replica: MaterializerOptions.Workers %d is negative", o.Workers)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	m := &Materializer{src: src, objects: objects, dir: dir, opts: o, parts: map[wal.TopicPartition]*partition{}}
	m.sched = newScheduler(o.Clock, o.Workers, "replica")
	return m, nil
}

// Add starts materialising tp: it opens (or creates) its local log and
// follows the coordinator from the log's end, or from where the start
// strategy says when the log is empty. opts (nil: none) override the
// Materializer's options for tp. Adding a partition twice with the same
// options changes nothing; with other options (the start, or the log
// options but for their Logger and Clock) it is an error
// (ErrConflictingOptions), and the partition keeps the first.
func (m *Materializer) Add(ctx context.Context, tp wal.TopicPartition, opts *PartitionOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	p := &partition{tp: tp, dir: filepath.Join(m.dir, fmt.Sprintf("%s-%d", tp.TopicID, tp.Partition)), start: m.opts.Start, opts: m.opts.Log}
	if opts != nil && opts.Start != nil {
		p.start = *opts.Start
	}
	if opts != nil && opts.Log != nil {
		p.opts = *opts.Log
	}
	if old, ok := m.parts[tp]; ok {
		switch {
		case old.start != p.start:
			return fmt.Errorf("%w: %s was added with start %d, now %d", ErrConflictingOptions, tp, old.start, p.start)
		case !sameLogOptions(old.opts, p.opts):
			return fmt.Errorf("%w: %s was added with other log options (%+v, now %+v)", ErrConflictingOptions, tp, old.opts, p.opts)
		}
		return nil
	}
	if p.start < StartTailWindow || p.start > StartDiskless {
		return fmt.Errorf("replica: PartitionOptions.Start %d is not a Start", p.start)
	}
	log, err := segment.OpenLog(ctx, p.dir, &p.opts)
	if err != nil {
		return err
	}
	p.log.Store(log)
	m.parts[tp] = p
	p.task = m.sched.add(tp.String(), 0, m.opts.Poll, func(ctx context.Context) { m.follow(ctx, p) })
	return nil
}

// sameLogOptions reports whether a and b configure a log alike: they are
// equal but for their Logger and Clock (funcs do not compare).
func sameLogOptions(a, b segment.LogOptions) bool {
	a.Logger, b.Logger, a.Clock, b.Clock = nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

// follow is p's background catch-up, run by the scheduler every Poll.
func (m *Materializer) follow(ctx context.Context, p *partition) {
	if _, err := m.catchUp(ctx, p); err != nil && ctx.Err() == nil {
		m.opts.Logger.Warn("replica: materialising", zap.Stringer("partition", p.tp), zap.Error(err))
	}
}

// Sync catches tp up with the coordinator now and returns its local end
// offset. It returns once the local log reaches the high watermark that
// the coordinator reported when Sync began (a commit acknowledged before
// the call is in it), or with an error, and then the end reached.
func (m *Materializer) Sync(ctx context.Context, tp wal.TopicPartition) (int64, error) {
	p, err := m.partition(tp)
	if err != nil {
		return -1, err
	}
	return m.catchUp(ctx, p)
}

func (m *Materializer) partition(tp wal.TopicPartition) (*partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	p, ok := m.parts[tp]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotMaterialized, tp)
	}
	return p, nil
}

// catchUp appends what the coordinator has beyond the local end, after
// bringing the local log's range in line with the coordinator's: a local
// log that no longer meets it (the log start moved past its end; for
// StartDiskless, it does not hold the diskless start offset) starts again
// where the strategy says.
func (m *Materializer) catchUp(ctx context.Context, p *partition) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	log := p.log.Load()
	state, err := m.state(ctx, p.tp)
	if err != nil {
		return log.LatestOffset(), err
	}
	lo, end := log.EarliestOffset(), log.LatestOffset()
	empty := log.Size() == 0
	floor := state.LogStart // below it, nothing may be read
	if p.start == StartDiskless || p.start == StartEarliest {
		floor = state.DisklessStart // below it, the data is tiered
	}
	switch {
	case empty || end < floor || (p.start == StartDiskless && lo > state.DisklessStart):
		start, err := m.startOffset(ctx, p, state)
		if err != nil {
			return end, err
		}
		if !empty || lo != start {
			if err := m.reset(ctx, p, start); err != nil {
				return end, err
			}
		}
	case lo < state.LogStart:
		if _, err := log.DeleteRecords(ctx, state.LogStart); err != nil {
			return end, err
		}
	}
	log = p.log.Load() // reset may have replaced it
	next := log.LatestOffset()
	for {
		found, err := m.src.FindBatches(ctx, p.tp, next, m.opts.FetchSize)
		if err != nil {
			return next, err
		}
		if found.Remote != nil || len(found.Batches) == 0 {
			break // tiered (the floor moved meanwhile: the next catch-up resets), or caught up
		}
		data, err := ReadRuns(ctx, m.objects, found.Batches, next, 1<<62, leaderEpoch, nil)
		if err != nil {
			return next, err
		}
		if len(data) == 0 {
			break
		}
		if err := m.append(ctx, log, p.opts.SegmentBytes, data); err != nil {
			return next, err
		}
		next = log.LatestOffset()
	}
	if next < state.HighWatermark {
		// Not caught up to the watermark seen: a Source whose batches lag
		// its watermark, or the floor moved meanwhile (the next catch-up
		// resets). Sync says so rather than return a short end.
		return next, fmt.Errorf("replica: %s: caught up to %d only, below the high watermark %d", p.tp, next, state.HighWatermark)
	}
	keep := int64(math.MaxInt64)
	if p.start == StartDiskless {
		keep = state.DisklessStart
	}
	if err := m.retain(ctx, log, &p.opts, keep); err != nil {
		return next, err
	}
	return next, nil
}

// partitionState is the coordinator's range of a partition.
type partitionState struct {
	LogStart, DisklessStart, HighWatermark int64
}

// state asks the coordinator for tp's range.
func (m *Materializer) state(ctx context.Context, tp wal.TopicPartition) (partitionState, error) {
	found, err := m.src.FindBatches(ctx, tp, 0, 1)
	if err != nil && kafkaerr.CodeOf(err) != kafkaerr.OffsetOutOfRange {
		return partitionState{}, err
	}
	return partitionState{LogStart: found.LogStart, DisklessStart: found.DisklessStart, HighWatermark: found.HighWatermark}, nil
}

// reset replaces p's local log with an empty one that starts at start.
func (m *Materializer) reset(ctx context.Context, p *partition, start int64) error {
	if err := p.log.Load().Close(); err != nil {
		m.opts.Logger.Warn("replica: closing a local log to reset it", zap.Stringer("partition", p.tp), zap.Error(err))
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("replica: resetting %s: %w", p.tp, err)
	}
	// The log starts at the first batch it will hold, which may begin
	// below start (a batch is never split).
	base := start
	if found, err := m.src.FindBatches(ctx, p.tp, start, 1); err == nil && found.Remote == nil && len(found.Batches) > 0 {
		data, err := ReadRuns(ctx, m.objects, found.Batches[:1], start, 1, leaderEpoch, nil)
		if err != nil {
			return err
		}
		if b, err := kbatch.ParseBatch(data); err == nil {
			base = min(base, b.BaseOffset())
		}
	}
	log, err := segment.CreateLog(ctx, p.dir, base, &p.opts)
	if err != nil {
		// Keep a usable log: an empty one, which the next catch-up
		// resets again.
		if log, err2 := segment.OpenLog(ctx, p.dir, &p.opts); err2 == nil {
			p.log.Store(log)
		}
		return err
	}
	p.log.Store(log)
	m.opts.Logger.Info("replica: local log reset", zap.Stringer("partition", p.tp), zap.Int64("start", start))
	return nil
}

// retain applies the local retention (the local log's RetentionTime and
// RetentionBytes) to the closed segments wholly below keep.
func (m *Materializer) retain(ctx context.Context, log *segment.Log, o *segment.LogOptions, keep int64) error {
	segs := log.Segments()
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	retentionMs := o.RetentionTime.Milliseconds()
	if o.RetentionTime == 0 {
		retentionMs = segment.DefaultRetentionTime.Milliseconds()
	}
	now := m.opts.Clock.Now().UnixMilli()
	upTo := int64(-1) // delete the records below it
	for i := 0; i+1 < len(segs); i++ {
		s, next := segs[i], segs[i+1]
		if next.BaseOffset > keep {
			break
		}
		bySize := o.RetentionBytes > 0 && total-s.Size >= o.RetentionBytes
		byTime := o.RetentionTime >= 0 && s.LargestTimestamp != kbatch.NoTimestamp && now-s.LargestTimestamp > retentionMs
		if !bySize && !byTime {
			break
		}
		total -= s.Size
		upTo = next.BaseOffset
	}
	if upTo < 0 || upTo <= log.EarliestOffset() {
		return nil
	}
	_, err := log.DeleteRecords(ctx, upTo)
	return err
}

// append appends data's batches to log in chunks no larger than a
// segment (an append larger than segment.bytes is refused) nor 1 MiB.
func (m *Materializer) append(ctx context.Context, log *segment.Log, segmentBytes int, data []byte) error {
	limit := 1 << 20
	if sb := segmentBytes; sb > 0 {
		limit = min(limit, sb)
	}
	for len(data) > 0 {
		n := 0
		it := kbatch.NewBatchIter(data)
		for it.Next() {
			if n > 0 && n+it.Batch().Size() > limit {
				break
			}
			n += it.Batch().Size()
		}
		if n == 0 {
			return it.Err()
		}
		if _, err := log.Append(ctx, data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// startOffset is where a new local log of p starts.
func (m *Materializer) startOffset(ctx context.Context, p *partition, st partitionState) (int64, error) {
	switch p.start {
	case StartEarliest, StartDiskless:
		return st.DisklessStart, nil
	case StartLatest:
		return st.HighWatermark, nil
	}
	// The tail window: estimate the bytes per offset near the end, then
	// step back TailBytes of them, but not into tiered data.
	start, end := st.DisklessStart, st.HighWatermark
	probe := max(start, end-1024)
	sample, err := m.src.FindBatches(ctx, p.tp, probe, 1<<20)
	if err != nil || len(sample.Batches) == 0 {
		return start, nil
	}
	var bytes, offsets int64
	for _, l := range sample.Batches {
		bytes += l.ByteSize
		offsets += l.LastOffset - l.BaseOffset + 1
	}
	perOffset := max(float64(bytes)/float64(max(offsets, 1)), 1)
	return max(start, end-int64(float64(m.opts.TailBytes)/perOffset)), nil
}

// Log returns tp's local log, for reads. The Materializer keeps it open,
// until it replaces it (a reset) or the partition is removed: a read that
// fails with segment.ErrClosed asks again.
func (m *Materializer) Log(tp wal.TopicPartition) (*segment.Log, error) {
	p, err := m.partition(tp)
	if err != nil {
		return nil, err
	}
	return p.log.Load(), nil
}

// Remove stops materialising tp and closes its local log (the files stay).
func (m *Materializer) Remove(tp wal.TopicPartition) error {
	p, ok := takePart(&m.mu, &m.parts, tp)
	if !ok {
		return nil
	}
	m.sched.remove(p.task)
	return p.log.Load().Close()
}

// Drop stops materialising tp, if it was, and deletes its local files
// (its topic was deleted).
func (m *Materializer) Drop(tp wal.TopicPartition) error {
	if err := m.Remove(tp); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(m.dir, fmt.Sprintf("%s-%d", tp.TopicID, tp.Partition))); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	return nil
}

// Close stops every partition and closes their logs. It is safe to call
// twice.
func (m *Materializer) Close() error {
	parts, first := closeParts(&m.mu, &m.closed, &m.parts)
	if !first {
		return nil
	}
	m.sched.close()
	var errs []error
	for _, p := range parts {
		errs = append(errs, p.log.Load().Close())
	}
	return errors.Join(errs...)
}

// takePart deletes tp from *parts under mu and returns what it held.
func takePart[V any](mu *sync.Mutex, parts *map[wal.TopicPartition]V, tp wal.TopicPartition) (V, bool) {
	mu.Lock()
	defer mu.Unlock()
	p, ok := (*parts)[tp]
	delete(*parts, tp)
	return p, ok
}

// closeParts sets *closed under mu and takes *parts, leaving nil: the
// partitions to stop. first is false, and parts nil, when *closed was
// set already.
func closeParts[M ~map[K]V, K comparable, V any](mu *sync.Mutex, closed *bool, parts *M) (taken M, first bool) {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return nil, false
	}
	*closed = true
	taken, *parts = *parts, nil
	return taken, true
}

// Errors of the package.
var (
	// ErrClosed: the Materializer is closed.
	ErrClosed = errors.New("replica: closed")
	// ErrNotMaterialized: the partition was not added.
	ErrNotMaterialized = errors.New("replica: partition not materialised")
	// ErrConflictingOptions: the partition was added (or assigned) before
	// with other options.
	ErrConflictingOptions = errors.New("replica: partition added with other options")
)
