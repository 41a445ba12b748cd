package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator"
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
	// StartEarliest starts at the log start offset: complete, slow.
	StartEarliest
	// StartLatest starts at the high watermark: fast, no history.
	StartLatest
)

// Defaults of MaterializerOptions.
const (
	DefaultTailBytes = 100 << 20
	DefaultFetchSize = 4 << 20
	DefaultPoll      = 100 * time.Millisecond
)

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
	// Log configures the local logs: a cache, so usually a short
	// retention (RetentionTime, RetentionBytes).
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

	mu     sync.Mutex
	parts  map[wal.TopicPartition]*partition
	closed bool
}

// partition is one materialised partition.
type partition struct {
	tp   wal.TopicPartition
	log  *segment.Log
	mu   sync.Mutex // serialises catching up
	stop chan struct{}
	done chan struct{}
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
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	switch {
	case o.Start < StartTailWindow || o.Start > StartLatest:
		return nil, fmt.Errorf("replica: MaterializerOptions.Start %d is not a Start", o.Start)
	case o.TailBytes < 0 || o.FetchSize < 0 || o.Poll < 0:
		return nil, errors.New("replica: MaterializerOptions.TailBytes, FetchSize and Poll may not be negative")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	return &Materializer{src: src, objects: objects, dir: dir, opts: o, parts: map[wal.TopicPartition]*partition{}}, nil
}

// Add starts materialising tp: it opens (or creates) its local log and
// follows the coordinator from the log's end, or from where Start says
// when the log is empty.
func (m *Materializer) Add(ctx context.Context, tp wal.TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.parts[tp]; ok {
		return nil
	}
	log, err := segment.OpenLog(ctx, filepath.Join(m.dir, fmt.Sprintf("%s-%d", tp.TopicID, tp.Partition)), &m.opts.Log)
	if err != nil {
		return err
	}
	p := &partition{tp: tp, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	m.parts[tp] = p
	go pprof.Do(context.Background(), pprof.Labels("diskless", "materializer", "partition", tp.String()), func(ctx context.Context) {
		defer close(p.done)
		m.follow(ctx, p)
	})
	return nil
}

// follow catches p up every Poll until it is stopped.
func (m *Materializer) follow(ctx context.Context, p *partition) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	for {
		if _, err := m.catchUp(ctx, p); err != nil && ctx.Err() == nil {
			m.opts.Logger.Warn("replica: materialising", zap.Stringer("partition", p.tp), zap.Error(err))
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// Sync catches tp up with the coordinator now and returns its local end
// offset.
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

// catchUp appends what the coordinator has beyond the local end.
func (m *Materializer) catchUp(ctx context.Context, p *partition) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.log.LatestOffset()
	if next == 0 && p.log.Size() == 0 {
		start, err := m.startOffset(ctx, p.tp)
		if err != nil {
			return next, err
		}
		next = start
	}
	for {
		found, err := m.src.FindBatches(ctx, p.tp, next, m.opts.FetchSize)
		if code := segment.Code(err); code == segment.OffsetOutOfRange && next < found.LogStart {
			next = found.LogStart // the coordinator's log start moved past us
			continue
		}
		if err != nil {
			return next, err
		}
		if len(found.Batches) == 0 {
			return next, nil
		}
		data, err := ReadRuns(ctx, m.objects, found.Batches, next, 1<<62, 0, nil)
		if err != nil {
			return next, err
		}
		if len(data) == 0 {
			return next, nil
		}
		if err := m.append(ctx, p.log, data); err != nil {
			return next, err
		}
		next = p.log.LatestOffset()
	}
}

// append appends data's batches to log in chunks no larger than a
// segment (an append larger than segment.bytes is refused) nor 1 MiB.
func (m *Materializer) append(ctx context.Context, log *segment.Log, data []byte) error {
	limit := 1 << 20
	if sb := m.opts.Log.SegmentBytes; sb > 0 {
		limit = min(limit, sb)
	}
	for len(data) > 0 {
		n := 0
		it := segment.NewBatchIter(data)
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

// startOffset is where a new local log of tp starts.
func (m *Materializer) startOffset(ctx context.Context, tp wal.TopicPartition) (int64, error) {
	found, err := m.src.FindBatches(ctx, tp, 0, 1)
	if err != nil && segment.Code(err) != segment.OffsetOutOfRange {
		return 0, err
	}
	start, end := found.LogStart, found.HighWatermark
	switch m.opts.Start {
	case StartEarliest:
		return start, nil
	case StartLatest:
		return end, nil
	}
	// The tail window: estimate the bytes per offset near the end, then
	// step back TailBytes of them.
	probe := max(start, end-1024)
	sample, err := m.src.FindBatches(ctx, tp, probe, 1<<20)
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

// Log returns tp's local log, for reads. The Materializer keeps it open.
func (m *Materializer) Log(tp wal.TopicPartition) (*segment.Log, error) {
	p, err := m.partition(tp)
	if err != nil {
		return nil, err
	}
	return p.log, nil
}

// Remove stops materialising tp and closes its local log (the files stay).
func (m *Materializer) Remove(tp wal.TopicPartition) error {
	m.mu.Lock()
	p, ok := m.parts[tp]
	delete(m.parts, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	close(p.stop)
	<-p.done
	return p.log.Close()
}

// Close stops every partition and closes their logs. It is safe to call
// twice.
func (m *Materializer) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	parts := m.parts
	m.parts = nil
	m.mu.Unlock()
	var errs []error
	for _, p := range parts {
		close(p.stop)
		<-p.done
		errs = append(errs, p.log.Close())
	}
	return errors.Join(errs...)
}

// Errors of the package.
var (
	// ErrClosed: the Materializer is closed.
	ErrClosed = errors.New("replica: closed")
	// ErrNotMaterialized: the partition was not added.
	ErrNotMaterialized = errors.New("replica: partition not materialised")
)
