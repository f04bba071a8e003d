package daemon

import (
	"context"
	"time"
)

// Event retention (daemon.Options): the log keeps events for
// DefaultEventRetention and at most DefaultEventRetainCount of them,
// pruning every eventPruneEvery.
const (
	DefaultEventRetention   = 7 * 24 * time.Hour
	DefaultEventRetainCount = 100_000
	eventPruneEvery         = time.Minute
)

// appliedRetention is how long the index keeps the id of an activation
// batch it applied (index.DB.PruneApplied): a host stopped longer than this
// between delivering its journal and clearing it would count the batch
// again at its next start.
const appliedRetention = 90 * 24 * time.Hour

// pruneEvents keeps the event log within its retention until ctx ends, and
// forgets the ids of activation batches applied long ago.
func (d *Daemon) pruneEvents(ctx context.Context, keepFor time.Duration, keep int64) {
	prune := func() {
		n, err := d.db.PruneEvents(ctx, time.Now().Add(-keepFor), keep)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("prune the event log", "err", err)
		case n > 0:
			d.log.Debug("event log pruned", "events", n)
		}
		n, err = d.db.PruneApplied(ctx, time.Now().Add(-appliedRetention))
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("prune the ids of applied activation batches", "err", err)
		case n > 0:
			d.log.Debug("ids of applied activation batches pruned", "ids", n)
		}
	}
	prune()
	periodically(ctx, eventPruneEvery, prune)
}
