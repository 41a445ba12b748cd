package coordinator

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// CommitFile commits an object's coordinates: the coordinates of each
// shard's partitions, in object order, go to that shard, concurrently,
// with the object's owners list (those shards, in a random order; see
// ownership.go); the results come back in the order of the coordinates.
// Coordinates of partitions no shard serves get UNKNOWN_TOPIC_OR_PARTITION;
// if none is served, nothing is committed (the object is an orphan).
// req.Owners is ignored.
//
// A shard whose call fails as a whole (it is not the leader any more, it
// is reopening, ctx ended) gives its coordinates that error in their
// Result.Err; the error returned is for the whole call only when every
// shard's call failed (nothing was committed then, as far as the calls
// tell: a commit whose ctx ended may still happen).
func (c *Coordinator) CommitFile(ctx context.Context, req CommitFileRequest) ([]wal.Result, error) {
	wait := c.CommitFileAsync(ctx, req)
	return wait()
}

// CommitFileAsync is CommitFile in two steps: it submits each shard's part
// (leader.CommitFileAsync) and returns, and wait returns the results
// as CommitFile does. Objects submitted one after another from one
// goroutine commit in that order on every shard.
func (c *Coordinator) CommitFileAsync(ctx context.Context, req CommitFileRequest) (wait func() ([]wal.Result, error)) {
	return c.commitAsync(ctx, req, false)
}

// CommitPendingAsync is CommitFileAsync for an object whose PUT is still
// on its way (docs/parallel-commit.md): each shard's commit is pending,
// its offsets assigned and logged but not read, until Settle says how the
// PUT ended. Every shard of the object must be one this broker leads.
func (c *Coordinator) CommitPendingAsync(ctx context.Context, req CommitFileRequest) (wait func() ([]wal.Result, error)) {
	return c.commitAsync(ctx, req, true)
}

// commitAsync is CommitFileAsync, pending or not.
func (c *Coordinator) commitAsync(ctx context.Context, req CommitFileRequest, pending bool) (wait func() ([]wal.Result, error)) {
	results := make([]wal.Result, len(req.Coordinates))
	byShard := map[int][]int{}
	c.mu.RLock()
	for i := range req.Coordinates {
		sh, ok := c.mu.parts[req.Coordinates[i].TopicPartition]
		if !ok {
			results[i] = wal.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1,
				Err: kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no shard serves partition %s", req.Coordinates[i].TopicPartition)}
			continue
		}
		byShard[sh] = append(byShard[sh], i)
	}
	c.mu.RUnlock()
	if len(byShard) == 0 {
		return func() ([]wal.Result, error) { return results, nil }
	}
	owners := make([]int, 0, len(byShard))
	for sh := range byShard {
		owners = append(owners, sh)
	}
	rand.Shuffle(len(owners), func(i, j int) { owners[i], owners[j] = owners[j], owners[i] })
	c.stats.objects.Add(1)
	c.stats.shardCommits.Add(int64(len(owners)))
	c.stats.fanout[min(len(owners), len(c.stats.fanout)-1)].Add(1)

	waits := make([]func() ([]wal.Result, error), len(owners))
	errs := make([]error, len(owners))
	for k, sh := range owners {
		idx := byShard[sh]
		r := req
		r.Owners = owners
		r.Coordinates = make([]wal.Coordinate, len(idx))
		for j, i := range idx {
			r.Coordinates[j] = req.Coordinates[i]
		}
		shard, err := c.shard(sh)
		if err == nil {
			waits[k], err = shard.CommitFileAsync(ctx, r, pending)
		}
		errs[k] = err
	}
	return func() ([]wal.Result, error) {
		var wg sync.WaitGroup
		for k, sh := range owners {
			wg.Go(func() {
				var res []wal.Result
				if errs[k] == nil {
					res, errs[k] = waits[k]()
				}
				for j, i := range byShard[sh] {
					if errs[k] != nil {
						results[i] = wal.Result{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1, Err: shardCommitErr(errs[k])}
					} else {
						results[i] = res[j]
					}
				}
			})
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		if failed == len(owners) {
			return nil, errs[0]
		}
		return results, nil
	}
}

// shardCommitErr is the error of each batch of a shard whose commit failed
// as a whole while other shards' succeeded: the Kafka code it carries, else
// KAFKA_STORAGE_ERROR, which a producer retries (the Broker answers a
// commit that failed whole so too).
func shardCommitErr(err error) error {
	if kafkaerr.CodeOf(err) != kafkaerr.UnknownServerError {
		return err
	}
	return &kafkaerr.Error{Code: kafkaerr.KafkaStorageError, Message: "committing to the partition's shard failed", Err: err}
}

// Settle settles the pending commits of the object key on every shard
// (CommitPendingAsync; see docs/parallel-commit.md):
// landed says its PUT succeeded. It returns once each shard's commit is
// off its pending queue, its offsets readable, or void; with landed set,
// a commit voided all the same (one queued before it on its shard was) is
// an error, KAFKA_STORAGE_ERROR, and the object's producers must not be
// answered as appended. A shard with no pending commit of key has
// nothing to do. Only the shards this broker leads are settled: the
// parallel commit is for a coordinator without a Forwarder.
func (c *Coordinator) Settle(ctx context.Context, key string, landed bool) error {
	locals := c.locals()
	errs := make([]error, len(locals))
	var wg sync.WaitGroup
	for i, l := range locals {
		if l == nil {
			continue
		}
		wg.Go(func() { errs[i] = l.Settle(ctx, key, landed) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
