package fs

import (
	"sync"
	"time"

	"skillfs/skills"
)

// fileKey names a file of a skill in one session: an entry of a grant.
type fileKey struct {
	g   *grant
	idx int32
}

// fileReads counts the reads of one file since they were last taken.
type fileReads struct {
	key     fileKey
	reads   int64
	firstAt int64 // unix nanoseconds of the first read of the batch
}

// readAudit counts the reads of the files read since the last TakeReads,
// in the order they were first read. A read costs a short lock and a map
// lookup; only the first read of a file in a batch takes the clock. Nothing
// is kept per file that was not read in the batch.
type readAudit struct {
	mu    sync.Mutex
	index map[fileKey]int
	batch []fileReads
}

// countRead records one read of entry idx of g that reached the daemon.
func (a *readAudit) countRead(g *grant, idx int32) {
	k := fileKey{g, idx}
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.index[k]
	if !ok {
		if a.index == nil {
			a.index = make(map[fileKey]int)
		}
		i = len(a.batch)
		a.index[k] = i
		a.batch = append(a.batch, fileReads{key: k, firstAt: time.Now().UnixNano()})
	}
	a.batch[i].reads++
}

// TakeReads returns the reads that reached the daemon since the last call,
// one entry per file of a skill in a session, in the order of their first
// reads, and starts counting anew. Without Options.AuditReads it returns nothing.
func (s *Server) TakeReads() []skills.FileRead {
	a := &s.audit
	a.mu.Lock()
	batch := a.batch
	a.batch, a.index = nil, nil
	a.mu.Unlock()
	out := make([]skills.FileRead, 0, len(batch))
	for _, r := range batch {
		g := r.key.g
		t, _, err := g.ref.get()
		if err != nil {
			continue // read, so walked: unreachable
		}
		out = append(out, skills.FileRead{Session: g.session, Slug: g.skill.Slug,
			Path: t.entries[r.key.idx].rel, FirstAt: time.Unix(0, r.firstAt).UTC(), Reads: r.reads})
	}
	return out
}
