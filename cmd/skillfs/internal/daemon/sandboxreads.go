package daemon

import (
	"fmt"
	"sync"
	"time"

	"skillfs/cmd/skillfs/internal/server"
)

// The reads of paths in sandboxes that may be outstanding at once: on the
// whole host, and for one user. A read counts until its thread and its
// copier truly returned (sandbox.Request.Done), not until its install gave
// up waiting: a filesystem of the sandbox that never answers holds an OS
// thread and descriptors for as long as it hangs, so a user whose read is
// stuck installs no more paths until it ends, and such users together
// cannot take more than the host's count of threads.
const (
	maxSandboxReads        = 32
	maxSandboxReadsPerUser = 1
	sandboxReadRetry       = time.Minute
)

// readGate counts the outstanding reads of sandbox paths, in all and by
// user.
type readGate struct {
	max, perUser int
	refused      func() // counts a refusal (the metrics)

	mu     sync.Mutex
	n      int
	byUser map[string]int
}

func newReadGate(max, perUser int, refused func()) *readGate {
	return &readGate{max: max, perUser: perUser, refused: refused, byUser: make(map[string]int)}
}

// enter takes a place for a read as user uid, and returns what gives it
// back (once, whenever it is called); past either count, a
// server.BusyError.
func (g *readGate) enter(uid string) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	switch {
	case g.byUser[uid] >= g.perUser:
		err = &server.BusyError{RetryAfter: sandboxReadRetry, Msg: fmt.Sprintf(
			"user %q has a read of a sandbox's path still outstanding (a filesystem in the sandbox that does not answer holds it even after the install gave up): no path is read for them until it ends; try again later, or send the skill itself or a git source",
			uid)}
	case g.n >= g.max:
		err = &server.BusyError{RetryAfter: sandboxReadRetry, Msg: fmt.Sprintf(
			"the daemon reads as many sandbox paths as it may at once (%d): try again later", g.max)}
	}
	if err != nil {
		if g.refused != nil {
			g.refused()
		}
		return nil, err
	}
	g.n++
	g.byUser[uid]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.n--
			if g.byUser[uid]--; g.byUser[uid] <= 0 {
				delete(g.byUser, uid)
			}
		})
	}, nil
}

// outstanding is how many reads hold a place, in all and of user uid.
func (g *readGate) outstanding(uid string) (all, user int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n, g.byUser[uid]
}
