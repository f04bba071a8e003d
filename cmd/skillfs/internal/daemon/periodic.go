package daemon

import (
	"context"
	"time"
)

// periodically calls fn every interval until ctx ends.
func periodically(ctx context.Context, every time.Duration, fn func()) {
	periodicallyOr(ctx, every, nil, fn)
}

// periodicallyOr calls fn every interval, and whenever wake fires, until
// ctx ends. A nil wake never fires, and one that is closed no longer does.
func periodicallyOr(ctx context.Context, every time.Duration, wake <-chan struct{}, fn func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		case _, ok := <-wake:
			if !ok {
				wake = nil
				continue
			}
			fn()
		}
	}
}
