package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/server"
)

// DefaultDiffMemory is what the comparisons of versions may hold together
// (Options.DiffMemory).
const DefaultDiffMemory = 256 << 20

// Waits of a comparison for its memory: at most diffWait, after which it is
// answered busy, to try again after diffRetry.
const (
	diffWait  = 3 * time.Second
	diffRetry = 3 * time.Second
)

// diffGate is the daemon's catalog.DiffGate: a weighted semaphore of the
// bytes the comparisons running hold, each granted what its files' sizes
// say it will hold at most (diff.TreeDiff.Memory) before it reads any,
// in the order they asked. A comparison larger than the whole runs alone.
type diffGate struct {
	sem     *semaphore.Weighted
	size    int64
	wait    time.Duration
	held    atomic.Int64
	refused func() // counts a refusal (the metrics)
}

var _ catalog.DiffGate = (*diffGate)(nil)

func newDiffGate(size int64, refused func()) *diffGate {
	return &diffGate{sem: semaphore.NewWeighted(size), size: size, wait: diffWait, refused: refused}
}

// Acquire waits up to g.wait for bytes (at most the whole), then refuses
// with a server.BusyError.
func (g *diffGate) Acquire(ctx context.Context, bytes int64) (func(), error) {
	n := min(bytes, g.size)
	wctx, cancel := context.WithTimeout(ctx, g.wait)
	defer cancel()
	if err := g.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the client went away
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		g.refused()
		return nil, &server.BusyError{RetryAfter: diffRetry, Msg: fmt.Sprintf(
			"the daemon is comparing as much as it may at once (%d MiB, serve --diff-memory; this comparison needs %d MiB): try again later",
			g.size>>20, (n+1<<20-1)>>20)}
	}
	g.held.Add(n)
	return func() {
		g.held.Add(-n)
		g.sem.Release(n)
	}, nil
}
