package fs

import (
	"sync"
	"sync/atomic"
	"time"

	"skillfs/skills"
)

// readCounter counts the reads of one file node (a file of a skill in one
// session) since they were last taken (Server.TakeReads).
type readCounter struct {
	reads   atomic.Int64
	firstAt atomic.Int64 // unix nanoseconds of the first read of the batch
}

// readAudit is the set of file nodes read since the last TakeReads. A read
// costs one atomic add; only the first read of a node in a batch takes the
// clock and a short lock.
type readAudit struct {
	mu    sync.Mutex
	dirty []*fileNode
	take  sync.Mutex // one TakeReads at a time
}

// countRead records one read of n that reached the daemon.
func (a *readAudit) countRead(n *fileNode) {
	if n.audit.reads.Add(1) != 1 {
		return
	}
	// The batch of n starts: until it is taken, reads stays above zero, so
	// this is the only store of firstAt that the batch sees.
	n.audit.firstAt.Store(time.Now().UnixNano())
	a.mu.Lock()
	a.dirty = append(a.dirty, n)
	a.mu.Unlock()
}

// TakeReads returns the reads that reached the daemon since the last call,
// one entry per file of a skill in a session (several when the kernel
// dropped the file's node and looked it up again), and starts counting
// anew. Without Options.AuditReads it returns nothing.
func (s *Server) TakeReads() []skills.FileRead {
	a := &s.audit
	a.take.Lock()
	defer a.take.Unlock()
	a.mu.Lock()
	dirty := a.dirty
	a.dirty = nil
	a.mu.Unlock()
	out := make([]skills.FileRead, 0, len(dirty))
	for _, n := range dirty {
		// firstAt first: while reads is above zero no new batch of n can
		// start and store another time.
		first := n.audit.firstAt.Load()
		reads := n.audit.reads.Swap(0)
		if reads == 0 {
			continue
		}
		out = append(out, skills.FileRead{Session: n.g.session, Slug: n.g.skill.Slug,
			Path: n.t.entries[n.idx].rel, FirstAt: time.Unix(0, first).UTC(), Reads: reads})
	}
	return out
}
