package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/diskless-go/diskless/coordinator/lifecycle"

	"github.com/diskless-go/diskless/coordinator/state"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/backoff"
	"github.com/diskless-go/diskless/wal"
)

// Orphans are WAL objects uploaded and never committed: a broker died
// between the upload and the commit, or every commit of the object failed.
// No shard knows them, so no lifecycle deletes them. The collector
// (Coordinator.CollectOrphans, every Options.OrphanInterval) does:
//
//  1. the threshold is now minus OrphanGrace;
//  2. it lists <prefix>wal/ in key order, which is time order (the UUIDv7
//     time in each key), and stops at the first key at or after the
//     threshold: a run costs a LIST per 1,000 objects named before the
//     threshold, which is every WAL object in the bucket but the last
//     OrphanGrace's (then it lists <prefix>tiered/, in full: see below);
//  3. it asks every shard about exactly the keys of each page
//     (KnownKeys, which goes through the shard's loop, so it sees commits
//     still on their way to the log);
//  4. it deletes the page's keys no shard knows, and lists the next page:
//     a run holds one page of keys, however many the bucket has.
//
// An orphan goes one OrphanGrace after it was named, whatever else the
// bucket holds: one left by a compaction that crashed before its commit
// (its range's old objects stay live), or by a producer whose broker died,
// next to a topic that keeps its objects forever.
//
// The race: an object named before the threshold and committed while the
// collector runs. Committed before step 3, a shard knows it then, and it
// stays. Committed after step 3, it would be deleted under a live batch:
// that is what Options.CommitDeadline prevents. Every shard refuses to
// commit an object named longer than CommitDeadline ago (OrphanGrace / 2
// by default), and a candidate was named more than OrphanGrace ago, so no
// shard accepts its commit any more. The assumption, then: an upload is
// committed within CommitDeadline of the moment its key was named, or not
// at all (its producer gets REQUEST_TIMED_OUT and sends it again, in a new
// object), and the clocks of the brokers that name objects, the shards and
// the collector differ by less than OrphanGrace - CommitDeadline. An
// upload still in flight is no exception: its key was named when it began,
// so it too is either committed within the deadline or refused.
//
// Remote segments are the same (remote.go): the offloader names a segment
// with a fresh UUIDv7 ID before it uploads its files, and registration
// obeys the same deadline. Their keys sort by partition and offset, not by
// time, so each run lists <prefix>tiered/ in full (a LIST per 1,000
// files); a file whose segment ID was named before the threshold, and
// whose segment key no shard knows (step 3, once per segment), is deleted.
// The threshold is the same.

// walKeyTime returns the time in a WAL object key under prefix, if the key
// is one in its canonical form (a lowercase UUIDv7, as wal.NewObjectKey
// writes it): only those sort in time order, and only those are ever
// collected.
func walKeyTime(prefix, key string) (time.Time, bool) {
	id, t, err := wal.ParseObjectKey(prefix, key)
	if err != nil || !strings.HasSuffix(key, id.String()) || len(key) != len(prefix)+len("wal/")+36 {
		return time.Time{}, false
	}
	return t, true
}

// KnownKeys reports which of keys name objects this shard knows: committed
// and not yet forgotten (ObjectsDeleted), received (see ReceiveOwnership),
// or on their way to the log. It is decided in the shard's loop, in order
// with commits: a commit that this answer does not see is decided after
// it.
func (l *leader) KnownKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	o := &state.KnownKeysOp{BaseOp: state.NewBaseOp(ctx), Keys: keys}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Known, nil
}

// OrphanRun is what one run of the orphan collector did.
type OrphanRun struct {
	// Threshold: objects named before it, and known by no shard, are
	// orphans.
	Threshold time.Time
	// Lists counts the LIST calls of the run; Listed the WAL object keys
	// and remote segment files they returned.
	Lists, Listed int
	// Candidates counts the objects (WAL objects, remote segment files)
	// older than the threshold, and Deleted those no shard knew, deleted.
	Candidates, Deleted int
}

// orphanChunk is how many keys one KnownKeys call asks about, and one LIST
// page holds.
const orphanChunk = 1000

// CollectOrphans runs the orphan collector once (see orphans.go): it
// deletes the WAL objects, and the files of remote segments, named more
// than OrphanGrace ago that no shard knows. It needs a bucket (see
// Options.Bucket). A failure stops the run before it deletes
// anything it has not checked; the run says what was done.
func (c *Coordinator) CollectOrphans(ctx context.Context) (OrphanRun, error) {
	if c.bucket == nil {
		return OrphanRun{}, fmt.Errorf("%w: CollectOrphans needs a bucket", ErrInvalidOptions)
	}
	c.orphanMu.Lock()
	defer c.orphanMu.Unlock()
	run, err := c.collectOrphans(ctx)
	c.stats.orphanRuns.Add(1)
	c.stats.orphanLists.Add(int64(run.Lists))
	c.stats.orphansDeleted.Add(int64(run.Deleted))
	c.lastOrphanRun.Store(&run)
	if err != nil {
		return run, fmt.Errorf("coordinator: collecting orphans: %w", err)
	}
	c.logger.Info("coordinator: orphans collected", zap.Time("threshold", run.Threshold), zap.Int("lists", run.Lists),
		zap.Int("candidates", run.Candidates), zap.Int("deleted", run.Deleted))
	return run, nil
}

// listPage lists a page of the keys under prefix. A file:// bucket's
// listing fails with NotFound when an object is deleted while it walks the
// folder (gocloud's fileblob lstats each file it has read), and the
// lifecycle may be deleting many objects: the page is listed again, after
// a growing wait, for up to orphanListRetry.
func (c *Coordinator) listPage(ctx context.Context, token []byte, prefix string) ([]*blob.ListObject, []byte, error) {
	bo, deadline := backoff.Backoff{Policy: backoff.Policy{Initial: 10 * time.Millisecond, Max: 500 * time.Millisecond}, Clock: c.clock}, c.clock.Now().Add(orphanListRetry)
	for {
		objs, next, err := c.bucket.ListPage(ctx, token, cmp.Or(c.listPageSize, orphanChunk), &blob.ListOptions{Prefix: prefix})
		if err == nil || gcerrors.Code(err) != gcerrors.NotFound || c.clock.Now().After(deadline) {
			return objs, next, err
		}
		if err := bo.Wait(ctx); err != nil {
			return nil, nil, err
		}
	}
}

// orphanListRetry bounds the retries of a listing that fails with NotFound.
const orphanListRetry = 30 * time.Second

func (c *Coordinator) collectOrphans(ctx context.Context) (OrphanRun, error) {
	var run OrphanRun
	coords, err := c.all()
	if err != nil {
		return run, err
	}
	run.Threshold = c.clock.Now().Add(-c.opts.OrphanGrace)

	// WAL objects, a LIST page at a time: listed, checked, deleted, so
	// that a run holds one page of keys however many the bucket has.
	prefix := c.opts.Prefix
	for token := blob.FirstPageToken; ; {
		objs, next, err := c.listPage(ctx, token, prefix+"wal/")
		run.Lists++
		if err != nil {
			return run, fmt.Errorf("listing %swal/: %w", prefix, err)
		}
		run.Listed += len(objs)
		var page []string
		done := false
		for _, o := range objs {
			t, ok := walKeyTime(prefix, o.Key)
			if !ok {
				continue // not ours to judge
			}
			if !t.Before(run.Threshold) {
				done = true // keys sort as times: the rest are newer
				break
			}
			page = append(page, o.Key)
		}
		run.Candidates += len(page)
		if err := c.collect(ctx, coords, page, nil, &run); err != nil {
			return run, err
		}
		if done || len(next) == 0 {
			break
		}
		token = next
	}

	// Remote segments' files: all of them, named before the threshold,
	// by segment key.
	segs, files, err := c.remoteCandidates(ctx, &run)
	if err != nil {
		return run, err
	}
	return run, c.collect(ctx, coords, segs, files, &run)
}

// collect checks candidates (WAL object keys, or remote segment keys with
// their files) with every shard, and deletes those no shard knows.
func (c *Coordinator) collect(ctx context.Context, coords []shardAPI, candidates []string, files map[string][]string, run *OrphanRun) error {
	if len(candidates) == 0 {
		return nil
	}
	if c.orphanHook != nil {
		c.orphanHook("listed")
	}
	orphans, err := c.unknownToAll(ctx, coords, candidates, files)
	if err != nil {
		return err
	}
	errs := lifecycle.ForEachConcurrently(orphans, lifecycle.DeleteConcurrency, func(key string) error {
		err := c.bucket.Delete(ctx, key)
		if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("deleting %s: %w", key, err)
		}
		c.logger.Debug("coordinator: deleted an orphan", zap.String("key", key))
		return nil
	})
	run.Deleted += len(orphans) - len(errs)
	for _, key := range orphans {
		if err := errs[key]; err != nil {
			return err
		}
	}
	return nil
}

// remoteCandidates lists the remote segments whose files were named
// before run.Threshold (by segment key, with the files of each).
func (c *Coordinator) remoteCandidates(ctx context.Context, run *OrphanRun) (candidates []string, files map[string][]string, err error) {
	prefix := c.opts.Prefix
	files = map[string][]string{}
	token := blob.FirstPageToken
	for {
		objs, next, err := c.listPage(ctx, token, prefix+state.TieredDir)
		run.Lists++
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s%s: %w", prefix, state.TieredDir, err)
		}
		run.Listed += len(objs)
		for _, o := range objs {
			seg, _, t, ok := ParseRemoteSegmentKey(prefix, o.Key)
			if !ok || !t.Before(run.Threshold) {
				continue // not ours to judge, or may still be registered
			}
			if files[seg] == nil {
				candidates = append(candidates, seg)
			}
			files[seg] = append(files[seg], o.Key)
			run.Candidates++
		}
		if len(next) == 0 {
			break
		}
		token = next
	}
	return candidates, files, nil
}

// unknownToAll asks every shard, again, about exactly the candidates, and
// returns the keys of those no shard knows (a remote segment's: its
// files).
func (c *Coordinator) unknownToAll(ctx context.Context, coords []shardAPI, candidates []string, files map[string][]string) ([]string, error) {
	var orphans []string
	for len(candidates) > 0 {
		chunk := candidates[:min(len(candidates), orphanChunk)]
		candidates = candidates[len(chunk):]
		known := map[string]bool{}
		for i, sh := range coords {
			k, err := sh.KnownKeys(ctx, chunk)
			if err != nil {
				return nil, fmt.Errorf("shard %d: %w", i, err)
			}
			for key := range k {
				known[key] = true
			}
		}
		for _, key := range chunk {
			switch {
			case known[key]:
			case files[key] != nil:
				orphans = append(orphans, files[key]...)
			default:
				orphans = append(orphans, key)
			}
		}
	}
	if c.orphanHook != nil {
		c.orphanHook("checked")
	}
	return orphans, nil
}
