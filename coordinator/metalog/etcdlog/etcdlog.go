package etcdlog

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/internal/pipeline"
	"github.com/diskless-go/diskless/internal/backoff"
)

// Defaults of Options.
const (
	DefaultMaxInFlight    = 32
	DefaultSpillBytes     = 1 << 20
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxAttempts    = 8
)

// The values of the log's keys (part of the format; see the package
// doc).
const (
	etcdInline byte = 0 // the entry follows
	etcdSpill  byte = 1 // a reference to the object that holds the entry
)

// Fence is a writer's leadership, as an etcd election (package
// go.etcd.io/etcd/client/v3/concurrency) gives it to the winner: the
// election key it created and the revision it was created at
// (Election.Key, Election.Rev). A Log with a Fence appends only
// while that key still exists at that revision: once the writer's session
// ends (its lease expired: it was paused or cut off past its TTL) or it
// resigns, its appends fail with metalog.ErrFenced, in flight or not.
type Fence struct {
	Key      string
	Revision int64
}

// Options configure a Log. The zero value holds the defaults; a
// nil *Options means the zero value.
type Options struct {
	// Fence, when set, makes every append conditional on the writer's
	// leadership (see Fence), and lets appends pipeline: MaxInFlight of
	// them may be in flight, since no other writer can append between
	// them. Without a Fence, an append is conditional on its offset being
	// free and the one before it taken, as metalog.Bucket's, one at a time.
	Fence *Fence
	// MaxInFlight bounds the appends in flight with a Fence. 0 means
	// DefaultMaxInFlight.
	MaxInFlight int
	// Spill holds the entries larger than SpillBytes, which etcd would
	// refuse (its --max-request-bytes is 1.5 MiB by default): such an
	// entry is put as an object under SpillPrefix and the log's key holds
	// a reference to it. Nil means such entries fail.
	Spill       *blob.Bucket
	SpillPrefix string
	// SpillBytes is the largest entry kept in etcd itself. 0 means
	// DefaultSpillBytes.
	SpillBytes int
	// RequestTimeout bounds each etcd call (a call to a member that is
	// paused or cut off hangs until then, and is then tried again). 0
	// means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of one call that fails with a
	// transient error. 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Logger logs retries, fencing and failures; nil means none.
	Logger *zap.Logger
}

// Log is a metalog.Log in etcd: entry n is the key <prefix>log/<n in 20 digits>,
// written in a transaction that succeeds only if that key does not exist,
// the one before it does, and (with a Fence) the writer still leads.
// Followers are woken by a watch. Brokers keep no state of it that
// matters. It is safe for concurrent use.
//
// An append that fails fails every append queued after it, and every
// later one, until a Read reaches the end of the log from at most this
// writer's end (as metalog.Bucket's).
type Log struct {
	client      *clientv3.Client
	dir         string // <prefix>log/
	fence       *Fence
	spill       *blob.Bucket
	spillDir    string
	spillBytes  int
	maxInFlight int
	timeout     time.Duration
	maxAttempts int
	log         *zap.Logger
	retrier     pipeline.Retrier

	wg     sync.WaitGroup // the sender and its puts
	trimMu sync.Mutex

	leftovers struct {
		n           int
		first, last int64
	}

	// pipe queues the appends, puts them (put), answers them in order,
	// and holds the writer's start and end and its failure.
	pipe pipeline.Pipe[metalog.AppendResult]

	mu struct {
		sync.Mutex
		failNext error // tests: the next put fails with it
	}
}

var _ metalog.Log = (*Log)(nil)

// Open opens the log under prefix in etcd (the cluster passes
// "<cluster prefix>shards/<n>/"). It reads the log's keys once to find its
// start and end; the log may not exist yet. The caller keeps client open
// until after Close.
func Open(ctx context.Context, client *clientv3.Client, prefix string, opts *Options) (*Log, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case client == nil:
		return nil, fmt.Errorf("%w: Open needs a client", metalog.ErrInvalidOptions)
	case o.MaxInFlight < 0:
		return nil, fmt.Errorf("%w: Options.MaxInFlight %d is negative", metalog.ErrInvalidOptions, o.MaxInFlight)
	case o.SpillBytes < 0:
		return nil, fmt.Errorf("%w: Options.SpillBytes %d is negative", metalog.ErrInvalidOptions, o.SpillBytes)
	case o.RequestTimeout < 0:
		return nil, fmt.Errorf("%w: Options.RequestTimeout %v is negative", metalog.ErrInvalidOptions, o.RequestTimeout)
	case o.MaxAttempts < 0:
		return nil, fmt.Errorf("%w: Options.MaxAttempts %d is negative", metalog.ErrInvalidOptions, o.MaxAttempts)
	case o.Fence != nil && o.Fence.Key == "":
		return nil, fmt.Errorf("%w: Options.Fence has no key", metalog.ErrInvalidOptions)
	}
	l := &Log{
		client:      client,
		dir:         prefix + "log/",
		fence:       o.Fence,
		spill:       o.Spill,
		spillDir:    o.SpillPrefix,
		spillBytes:  cmp.Or(o.SpillBytes, DefaultSpillBytes),
		maxInFlight: cmp.Or(o.MaxInFlight, DefaultMaxInFlight),
		timeout:     cmp.Or(o.RequestTimeout, DefaultRequestTimeout),
		maxAttempts: cmp.Or(o.MaxAttempts, DefaultMaxAttempts),
		log:         o.Logger,
	}
	if l.fence == nil {
		l.maxInFlight = 1
	}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	l.retrier = pipeline.Retrier{
		Policy:      backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second},
		MaxAttempts: l.maxAttempts, AttemptTimeout: l.timeout, Log: l.log, Msg: "etcdlog: retrying",
	}
	offs, err := l.listOffsets(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcdlog: opening: %w", err)
	}
	start, end := metalog.ListedRun(offs, 1) // the same rule as a metalog.Bucket's that does not pipeline
	l.leftovers.n, l.leftovers.first, l.leftovers.last = pipeline.Leftovers(offs, start)
	l.pipe.Init(ctx, start, end, pipeline.PipeOptions{
		Name: "etcdlog", Closed: metalog.ErrClosed,
		MaxQueued: max(l.maxInFlight, 64), MaxInFlight: l.maxInFlight,
		Write: l.put, Inject: l.injected, Label: "metalog-etcd", WaitGroup: &l.wg,
	})
	return l, nil
}

// injected returns the failure FailNext injected, once.
func (l *Log) injected() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.mu.failNext
	l.mu.failNext = nil
	return err
}

// listOffsets returns the offsets of the log's keys, in order.
func (l *Log) listOffsets(ctx context.Context) ([]int64, error) {
	var offs []int64
	from := l.dir
	for {
		var resp *clientv3.GetResponse
		err := l.retry(ctx, "list "+l.dir, func(ctx context.Context) error {
			var err error
			resp, err = l.client.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(l.dir)), clientv3.WithKeysOnly(), clientv3.WithLimit(10_000))
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			if off, ok := l.parseKey(string(kv.Key)); ok {
				offs = append(offs, off)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return offs, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Leftovers reports the entry keys Open found below the log's start, past
// a gap (see metalog.Bucket.Leftovers).
func (l *Log) Leftovers() (n int, first, last int64) {
	return l.leftovers.n, l.leftovers.first, l.leftovers.last
}

// key returns the key of offset off.
func (l *Log) key(off int64) string { return pipeline.Key(l.dir, off) }

// parseKey returns the offset of a log key.
func (l *Log) parseKey(key string) (int64, bool) { return pipeline.ParseKey(l.dir, key) }

// MaxInFlight implements metalog.Log: with a Fence, MaxInFlight of Options;
// without, 1.
func (l *Log) MaxInFlight() int { return l.maxInFlight }

// Append implements metalog.Log.
func (l *Log) Append(entry []byte) <-chan metalog.AppendResult { return l.pipe.Append(entry) }

// entryOf resolves a key's value into its entry.
func (l *Log) entryOf(ctx context.Context, off int64, v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: etcd key of offset %d is empty", metalog.ErrCorrupt, off)
	}
	switch v[0] {
	case etcdInline:
		return v[1:], nil
	case etcdSpill:
		n, k := binary.Uvarint(v[1:])
		if k <= 0 || len(v) < 1+k+4 {
			return nil, fmt.Errorf("%w: etcd key of offset %d: a bad spill reference", metalog.ErrCorrupt, off)
		}
		sum := binary.BigEndian.Uint32(v[1+k:])
		key := string(v[1+k+4:])
		if l.spill == nil {
			return nil, fmt.Errorf("etcdlog: entry %d is spilled to %s, and there is no Spill bucket", off, key)
		}
		var data []byte
		err := l.retry(ctx, "get "+key, func(ctx context.Context) error {
			var err error
			data, err = l.spill.ReadAll(ctx, key)
			if gcerrors.Code(err) == gcerrors.NotFound {
				return fmt.Errorf("%w: entry %d's object %s is missing", metalog.ErrCorrupt, off, key)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if uint64(len(data)) != n || crc32.Checksum(data, crcTable) != sum {
			return nil, fmt.Errorf("%w: entry %d's object %s does not hold it (%d bytes)", metalog.ErrCorrupt, off, key, len(data))
		}
		return data, nil
	}
	return nil, fmt.Errorf("%w: etcd key of offset %d has kind %d", metalog.ErrCorrupt, off, v[0])
}

// Read implements metalog.Log: it reads the keys from from on, a page at a time,
// until one is missing.
func (l *Log) Read(ctx context.Context, from int64, fn func(offset int64, entry []byte) error) error {
	start, end, err := l.pipe.Bounds()
	if err != nil {
		return err
	}
	if from < start {
		return fmt.Errorf("%w: offset %d, the etcd log starts at %d", metalog.ErrTrimmed, from, start)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := l.pipe.Bind(ctx)
	defer cancel()
	next := from
	for {
		var resp *clientv3.GetResponse
		err := l.retry(ctx, "read "+l.key(next), func(ctx context.Context) error {
			var err error
			resp, err = l.client.Get(ctx, l.key(next), clientv3.WithRange(clientv3.GetPrefixRangeEnd(l.dir)), clientv3.WithLimit(64))
			return err
		})
		if err != nil {
			if l.pipe.Context().Err() != nil {
				return metalog.ErrClosed
			}
			return fmt.Errorf("etcdlog: reading offset %d: %w", next, err)
		}
		gap := false
		for _, kv := range resp.Kvs {
			off, ok := l.parseKey(string(kv.Key))
			if !ok {
				continue
			}
			if off != next {
				if next == from && off > from && from < end {
					return fmt.Errorf("%w: offset %d is gone from the etcd log", metalog.ErrTrimmed, from)
				}
				gap = true
				break
			}
			e, err := l.entryOf(ctx, off, kv.Value)
			if err != nil {
				return err
			}
			if err := fn(off, e); err != nil {
				return err
			}
			next++
		}
		if gap || !resp.More || len(resp.Kvs) == 0 {
			break
		}
	}
	if next < end {
		return fmt.Errorf("%w: offset %d is gone from the etcd log, which ended at %d or later", metalog.ErrTrimmed, next, end)
	}
	l.pipe.CatchUp(from, next)
	return nil
}

// Wait implements metalog.Log: it watches the key of offset.
func (l *Log) Wait(ctx context.Context, offset int64) (int64, error) {
	key := l.key(offset)
	var rev int64 // the revision of the last look
	look := func(ctx context.Context) (bool, error) {
		var resp *clientv3.GetResponse
		err := l.retry(ctx, "get "+key, func(ctx context.Context) error {
			var err error
			resp, err = l.client.Get(ctx, key, clientv3.WithKeysOnly())
			return err
		})
		if err != nil {
			return false, fmt.Errorf("etcdlog: waiting for offset %d: %w", offset, err)
		}
		rev = resp.Header.Revision
		return len(resp.Kvs) > 0, nil
	}
	sleep := func(ctx context.Context, grew <-chan struct{}) bool {
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		wch := l.client.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(rev+1))
		select {
		case w, ok := <-wch:
			if ok && w.Err() == nil {
				for _, ev := range w.Events {
					if ev.Type == clientv3.EventTypePut {
						return true
					}
				}
			}
		case <-grew:
		case <-ctx.Done():
		}
		return false
	}
	return l.pipe.Wait(ctx, offset, look, sleep)
}

// Start implements metalog.Log.
func (l *Log) Start() int64 { return l.pipe.Start() }

// End implements metalog.Log.
func (l *Log) End() int64 { return l.pipe.End() }

var _ metalog.Confirmer = (*Log)(nil)

// Confirm implements metalog.Confirmer: a linearizable read of the
// Fence's election key finds it still there at its revision. Without a
// Fence there is no leadership to confirm, and it returns nil.
func (l *Log) Confirm(ctx context.Context) error {
	if l.fence == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.client.Get(ctx, l.fence.Key, clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("etcdlog: confirming the leadership at %s: %w", l.fence.Key, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.fence.Revision {
		return fmt.Errorf("%w: the leadership at %s of revision %d has ended", metalog.ErrFenced, l.fence.Key, l.fence.Revision)
	}
	return nil
}

// Trim implements metalog.Log: it deletes the keys (and spilled objects) before
// before and before this writer's last known entry.
func (l *Log) Trim(ctx context.Context, before int64) error {
	l.trimMu.Lock()
	defer l.trimMu.Unlock()
	start, limit, err := l.pipe.TrimLimit(before, 1)
	if err != nil || limit <= start {
		return err
	}
	ctx, cancel := l.pipe.Bind(ctx)
	defer cancel()
	err = l.retry(ctx, "trim "+l.dir, func(ctx context.Context) error {
		_, err := l.client.Delete(ctx, l.key(start), clientv3.WithRange(l.key(limit)))
		return err
	})
	if err != nil {
		if l.pipe.Context().Err() != nil {
			return metalog.ErrClosed
		}
		return fmt.Errorf("etcdlog: trimming: %w", err)
	}
	l.pipe.Trimmed(limit)
	if l.spill != nil {
		if err := l.trimSpill(ctx, limit); err != nil {
			return err
		}
	}
	return nil
}

// trimSpill deletes the spilled objects of offsets below limit.
func (l *Log) trimSpill(ctx context.Context, limit int64) error {
	it := l.spill.List(&blob.ListOptions{Prefix: l.spillDir})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("etcdlog: listing spilled entries: %w", err)
		}
		rest := strings.TrimPrefix(obj.Key, l.spillDir)
		if len(rest) < 20 {
			continue
		}
		off, err := strconv.ParseInt(rest[:20], 10, 64)
		if err != nil || off >= limit {
			continue
		}
		if err := l.spill.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("etcdlog: deleting spilled entry %s: %w", obj.Key, err)
		}
	}
}

// Close implements metalog.Log: puts in flight are abandoned (they may still land,
// where a reopen reads them) and fail with metalog.ErrClosed, with every queued
// append.
func (l *Log) Close() error {
	l.pipe.Close(&l.trimMu)
	return nil
}

// errInjected marks a failure a test injected (FailNext).
var errInjected = errors.New("etcdlog: injected failure")
