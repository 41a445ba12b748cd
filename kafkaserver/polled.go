package kafkaserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
)

// polled is state this node reads from the Broker by version, at start
// and then every interval: the ACLs (authz.go) and the client quotas
// (quotas.go). A read that fails leaves the last state in force, and is
// logged once until a read works again.
type polled struct {
	what    string       // "the ACLs", for the log
	version atomic.Int64 // of the state in force; -1 before the first read
	mu      sync.Mutex   // serialises reads
	log     *zap.Logger
	// read returns the state's version and whether it changed since
	// since; set, called with mu held, puts it in force.
	read func(ctx context.Context, since int64) (version int64, changed bool, set func(), err error)
}

// refresh reads the state again and puts it in force if it changed.
func (p *polled) refresh(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	have := p.version.Load()
	v, changed, set, err := p.read(ctx, have)
	switch {
	case err != nil:
		return err
	case !changed && have >= 0 || v < have:
		return nil // unchanged, or an older state (a follower behind the leader read before)
	}
	set()
	p.version.Store(v)
	return nil
}

// run refreshes every interval until ctx ends, calling after (if not
// nil) after each.
func (p *polled) run(ctx context.Context, c clock.Clock, interval time.Duration, after func()) {
	t := clock.NewTicker(c, interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := p.refresh(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			p.log.Warn("reading "+p.what+" failed; keeping the last read until it works again", zap.Error(err))
			failing = true
		case err == nil && failing:
			p.log.Info("reading " + p.what + " works again")
			failing = false
		}
		if after != nil {
			after()
		}
	}
}
