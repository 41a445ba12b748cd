package coordinator

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// Reads through followers (cluster mode with Options.FollowerLog).
//
// Every broker runs a Follower of every shard, tailing the shard's log
// into a database of its own (Dir/followers/shard-<n>.db). FindBatches
// for a shard led elsewhere is answered by this broker's follower, with no
// call to the leader: after the follower has applied at least the log
// position the leader gave in the answer of this broker's last commit to
// the shard, so a broker reads every write it had acknowledged. A
// follower that is not there yet, lags more than followerWait, fails, or
// answers an error (an offset past what it has applied) leaves the read to
// the leader, as without followers; a follower that failed is opened
// again (from the newest snapshot when the log was trimmed past it).
// ListOffsets stays with the leader: it sees every commit acknowledged
// before it, wherever it was made (KIP-1164).

// followerWait bounds how long a read waits for a follower to apply what
// it must see before it goes to the leader instead.
const followerWait = 2 * time.Second

// followerSlot is one shard's follower and what it must have applied.
type followerSlot struct {
	mu      sync.Mutex
	f       *Follower
	log     metalog.Log
	opening bool
	acked   atomic.Int64 // the highest log position a commit answer gave
}

// startFollowers opens a follower of every shard, in the background.
func (c *Coordinator) startFollowers() {
	c.followers = make([]*followerSlot, len(c.remotes))
	for i := range c.followers {
		c.followers[i] = &followerSlot{}
		c.followers[i].acked.Store(-1)
		c.reopenFollower(i)
	}
}

// reopenFollower opens shard i's follower again (closing the old one),
// in the background, unless an open is under way.
func (c *Coordinator) reopenFollower(i int) {
	fs := c.followers[i]
	fs.mu.Lock()
	if fs.opening || c.ctx.Err() != nil {
		fs.mu.Unlock()
		return
	}
	fs.opening = true
	old, oldLog := fs.f, fs.log
	fs.f, fs.log = nil, nil
	fs.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if old != nil {
			old.Close()
		}
		if oldLog != nil {
			oldLog.Close()
		}
		f, log, err := c.openFollower(i)
		fs.mu.Lock()
		defer fs.mu.Unlock()
		fs.opening = false
		if err != nil {
			if c.ctx.Err() == nil {
				c.logger.Warn("coordinator: opening a follower failed; reads of its shard go to its leader", zap.Int("shard", i), zap.Error(err))
			}
			return
		}
		if c.ctx.Err() != nil {
			f.Close()
			log.Close()
			return
		}
		fs.f, fs.log = f, log
	}()
}

func (c *Coordinator) openFollower(i int) (*Follower, metalog.Log, error) {
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	log, err := c.opts.FollowerLog(ctx, i)
	if err != nil {
		return nil, nil, err
	}
	o := c.opts
	o.Dir = filepath.Join(c.opts.Dir, "followers")
	f, err := OpenFollower(ctx, log, &FollowerOptions{Options: o, Shard: i, Tail: true})
	if err != nil {
		log.Close()
		return nil, nil, err
	}
	return f, log, nil
}

// follower returns shard i's follower, or nil.
func (c *Coordinator) follower(i int) (*followerSlot, *Follower) {
	if c.followers == nil {
		return nil, nil
	}
	fs := c.followers[i]
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs, fs.f
}

// followerFind answers FindBatches from shard i's follower; ok false
// leaves it to the leader.
func (c *Coordinator) followerFind(ctx context.Context, i int, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, bool) {
	fs, f := c.follower(i)
	if f == nil {
		return FindResult{}, false
	}
	wctx, cancel := context.WithTimeout(ctx, followerWait)
	err := f.WaitApplied(wctx, fs.acked.Load())
	cancel()
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			c.reopenFollower(i)
		}
		return FindResult{}, false
	}
	res, err := f.FindBatches(ctx, tp, offset, maxBytes)
	if err != nil {
		return FindResult{}, false // the leader says (an offset the follower has not applied yet, say)
	}
	c.stats.followerReads.Add(1)
	return res, true
}

// closeFollowers closes every follower and its log (after s.ctx ended and
// the background opens returned).
func (c *Coordinator) closeFollowers() error {
	var errs []error
	for _, fs := range c.followers {
		fs.mu.Lock()
		if fs.f != nil {
			errs = append(errs, fs.f.Close(), fs.log.Close())
			fs.f, fs.log = nil, nil
		}
		fs.mu.Unlock()
	}
	return errors.Join(errs...)
}
