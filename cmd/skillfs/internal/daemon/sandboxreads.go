package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"skillfs/cmd/skillfs/internal/server"
)

// The reads of paths in sandboxes that may be outstanding at once: on the
// whole host, and for one user. A read counts until its thread and its
// copier truly returned (sandbox.Request.Done), not until its install gave
// up waiting: a filesystem of the sandbox that never answers holds an OS
// thread and descriptors for as long as it hangs, so a user whose read is
// stuck installs no more paths until it ends, and such users together
// cannot take more than the host's count of threads: a read waits a few
// seconds for a place there, then is answered busy.
const (
	maxSandboxReads        = 32
	maxSandboxReadsPerUser = 1
	sandboxReadRetry       = time.Minute
	sandboxReadWait        = 5 * time.Second // for a place on the host
)

// readGate counts the outstanding reads of sandbox paths, in all and by
// user. A read waits up to wait for a place on the host (reads that end
// give theirs back within moments; only stuck ones keep them), none for
// its user's (a user's installs run one at a time, so a place of theirs
// still held is a read stuck).
type readGate struct {
	sem     *semaphore.Weighted
	max     int
	perUser int
	wait    time.Duration
	refused func() // counts a refusal (the metrics)

	mu     sync.Mutex
	n      int
	byUser map[string]int
}

func newReadGate(max, perUser int, refused func()) *readGate {
	return &readGate{sem: semaphore.NewWeighted(int64(max)), max: max, perUser: perUser, wait: sandboxReadWait,
		refused: refused, byUser: make(map[string]int)}
}

// enter takes a place for a read as user uid, and returns what gives it
// back (once, whenever it is called); past the user's count, or when no
// place on the host frees within g.wait, a server.BusyError.
func (g *readGate) enter(ctx context.Context, uid string) (func(), error) {
	g.mu.Lock()
	if g.byUser[uid] >= g.perUser {
		g.mu.Unlock()
		g.refuse()
		return nil, &server.BusyError{RetryAfter: sandboxReadRetry, Msg: fmt.Sprintf(
			"user %q has a read of a sandbox's path still outstanding (a filesystem in the sandbox that does not answer holds it even after the install gave up): no path is read for them until it ends; try again later, or send the skill itself or a git source",
			uid)}
	}
	g.byUser[uid]++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.byUser[uid]--; g.byUser[uid] <= 0 {
			delete(g.byUser, uid)
		}
	}
	if err := g.acquire(ctx); err != nil {
		leave()
		if ctx.Err() != nil {
			return nil, ctx.Err() // the client went away
		}
		g.refuse()
		return nil, &server.BusyError{RetryAfter: sandboxReadRetry, Msg: fmt.Sprintf(
			"the daemon reads as many sandbox paths as it may at once (%d): try again later", g.max)}
	}
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.n--
			g.mu.Unlock()
			leave()
			g.sem.Release(1)
		})
	}, nil
}

// acquire takes a place on the host, waiting up to g.wait for one.
func (g *readGate) acquire(ctx context.Context) error {
	if g.sem.TryAcquire(1) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, g.wait)
	defer cancel()
	return g.sem.Acquire(wctx, 1)
}

func (g *readGate) refuse() {
	if g.refused != nil {
		g.refused()
	}
}

// outstanding is how many reads hold a place, in all and of user uid.
func (g *readGate) outstanding(uid string) (all, user int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n, g.byUser[uid]
}
