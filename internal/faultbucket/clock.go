package faultbucket

import (
	"context"
	"time"
)

// Clock is the wrapper's time source: Now for outage windows and
// bandwidth accounting, Sleep for every injected wait. Tests pass a fake
// that records the waits instead of sleeping.
type Clock interface {
	Now() time.Time
	// Sleep waits for d, or until ctx ends, in which case it returns
	// ctx's error. A d of zero or less returns at once (nil, unless ctx
	// has ended).
	Sleep(ctx context.Context, d time.Duration) error
}

// systemClock is the Clock of the time package.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ Clock = systemClock{}
