package metalog

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Trim implements Log. It lists the log's objects and deletes, in order
// of offset, those before before and before this writer's newest
// MaxInFlight entries (which it never deletes, so that the bucket always
// tells where the log ends, gaps and all), stopping at the first one younger than TrimGrace (see
// BucketOptions). A missing object counts as deleted, so Trim may be
// called again after a failure.
func (l *Bucket) Trim(ctx context.Context, before int64) error {
	l.trimMu.Lock()
	defer l.trimMu.Unlock()
	start, limit, err := l.pipe.TrimLimit(before, int64(l.maxInFlight))
	if err != nil || limit <= start {
		return err
	}
	ctx, cancel := l.pipe.Bind(ctx)
	defer cancel()

	objs, newest, err := l.listBelow(ctx, limit)
	if err != nil {
		return l.trimErr(err)
	}
	newStart := limit
	for i, o := range objs {
		if l.trimGrace > 0 && newest.Sub(o.mod) < l.trimGrace {
			newStart = o.off
			objs = objs[:i]
			break
		}
	}
	highest, first := l.deleteObjects(ctx, objs)
	if first != nil || ctx.Err() != nil {
		newStart = highest + 1
	}
	l.pipe.Trimmed(newStart)
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if first != nil {
		return l.trimErr(first)
	}
	return nil
}

// deleteObjects deletes objs, bucketLogTrimWorkers at once, until ctx
// ends. It returns the highest offset deleted (-1 if none) and the first
// error. The start moves past the highest deleted object (those left
// below it are left-overs, trimmed for every reader).
func (l *Bucket) deleteObjects(ctx context.Context, objs []bucketObject) (highest int64, first error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		work = make(chan int64)
	)
	highest = -1
	for range min(bucketLogTrimWorkers, len(objs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range work {
				err := l.deleteObject(ctx, off)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				} else if err == nil {
					highest = max(highest, off)
				}
				mu.Unlock()
			}
		}()
	}
	for _, o := range objs {
		select {
		case work <- o.off:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	return highest, first
}

// deleteObject deletes the object of offset off; a missing one counts as
// deleted.
func (l *Bucket) deleteObject(ctx context.Context, off int64) error {
	return l.retry(ctx, "delete "+l.key(off), func(ctx context.Context) error {
		err := l.bucket.Delete(ctx, l.key(off))
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil
		}
		return err
	})
}

// bucketObject is an entry's object as a listing sees it.
type bucketObject struct {
	off int64
	mod time.Time
}

// listBelow lists the log's objects: those of offsets below limit, by
// offset, and the newest modification time of all.
func (l *Bucket) listBelow(ctx context.Context, limit int64) ([]bucketObject, time.Time, error) {
	var objs []bucketObject
	var newest time.Time
	err := l.retry(ctx, "list "+l.dir, func(ctx context.Context) error {
		objs, newest = objs[:0], time.Time{}
		it := l.bucket.List(&blob.ListOptions{Prefix: l.dir})
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			off, ok := l.parseKey(obj.Key)
			if !ok {
				continue
			}
			if obj.ModTime.After(newest) {
				newest = obj.ModTime
			}
			if off < limit {
				objs = append(objs, bucketObject{off, obj.ModTime})
			}
		}
	})
	slices.SortFunc(objs, func(a, b bucketObject) int { return cmp.Compare(a.off, b.off) })
	return objs, newest, err
}

func (l *Bucket) trimErr(err error) error {
	if l.pipe.Context().Err() != nil {
		return ErrClosed
	}
	return fmt.Errorf("metalog: bucket: trimming: %w", err)
}
