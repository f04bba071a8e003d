package fs

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// Restoring the owners of a resumed connection. The journal names every
// owner the kernel may hold ids of; until the daemon says again what each
// session sees (SetSession), a request reaching an owner of that session
// waits, since the answer depends on it: the skill may have been revoked,
// the session removed, while no server ran. SetSession brings the session's
// owners back under their ids: a grant whose version the view still holds
// serves on, one whose skill moved to another version is retired as a
// refresh leaves it (handles open on it read on), one whose skill left the
// view is revoked. RestoreDone answers the rest as removed sessions.
//
// How many lookups of a resumed owner's nodes the kernel holds is not
// known (the dead server counted them), but which nodes it may hold is:
// the journal records each as the kernel is first given it and as it
// forgets it. Each such node counts as held until the kernel forgets it:
// it sends a node's whole count when it evicts it, so one FORGET releases
// it. A revocation makes the kernel drop those nodes, and an owner no
// longer served leaves the node table (and the journal) once the kernel
// holds none of them. (A FORGET the dead server had read but not yet
// journaled is lost with it: that node stays held for the connection's
// life. One the kernel forgets while its session is not restored yet is
// applied once it is.)

// restoreState is what a resumed server waits on.
type restoreState struct {
	wait time.Duration // bound of one request's wait
	done chan struct{} // closed by RestoreDone

	mu      sync.Mutex
	pending map[string]*pendingSession // by session id
	seen    map[uint64]map[uint64]bool // the slots of each owner the kernel may hold (journalState)
}

// pendingSession is a session of the previous server, not set again yet.
type pendingSession struct {
	id     string
	dir    *journalRec   // its directory; nil if it had left the table
	grants []journalRec  // its grants in the table
	ready  chan struct{} // closed once its owners are back in the table
	// guarded by restoreState.mu:
	restored bool     // its owners are back in the table
	forgot   []uint64 // nodes the kernel forgot before
}

// noteForget keeps a FORGET of a node of pending session p for when its
// owners are back, or applies it if they are already.
func (s *Server) noteForget(p *pendingSession, nodeid uint64) {
	r := s.restore
	r.mu.Lock()
	if !p.restored {
		p.forgot = append(p.forgot, nodeid)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	s.ids.forget(nodeid, 1)
}

// restoreWaitMax bounds how long a request waits for its session to be set
// again; at most half the request timeout, so that the kernel does not
// abort the connection meanwhile.
var restoreWaitMax = 30 * time.Second

// loadOwners puts the journal's owners in the node table, waiting for
// their sessions.
func (s *Server) loadOwners(js journalState) {
	wait := restoreWaitMax
	if s.timeout > 0 {
		wait = min(wait, s.timeout/2)
	}
	r := &restoreState{wait: wait, done: make(chan struct{}), pending: make(map[string]*pendingSession), seen: js.seen}
	for _, rec := range js.owners {
		if rec.Op != recSession && rec.Op != recGrant {
			continue
		}
		p := r.pending[rec.Session]
		if p == nil {
			p = &pendingSession{id: rec.Session, ready: make(chan struct{})}
			r.pending[rec.Session] = p
		}
		if rec.Op == recSession {
			p.dir = &rec
		} else {
			p.grants = append(p.grants, rec)
		}
		s.ids.add(rec.ID, owner{p: p})
	}
	s.nextID.Store(js.maxID)
	s.restore = r
	s.ids.pendingForget = s.noteForget
	s.log.Info("resumed node ids", "sessions", len(r.pending), "owners", len(js.owners),
		"held_nodes", js.held(), "next", js.maxID+1)
}

// takePending removes and returns the pending session id, if any.
func (s *Server) takePending(id string) *pendingSession {
	r := s.restore
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[id]
	delete(r.pending, id)
	return p
}

// pendingOf returns the pending session id, if any.
func (s *Server) pendingOf(id string) *pendingSession {
	r := s.restore
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[id]
}

// awaitSession waits until p's owners are back, RestoreDone, or the bound.
func (s *Server) awaitSession(p *pendingSession) {
	r := s.restore
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case <-p.ready:
	case <-r.done:
	case <-t.C:
		s.log.Warn("a request waited too long for its session to be restored; answered as gone",
			"session", p.id, "waited", r.wait)
	}
}

// awaitOwner resolves owner id once it is no longer pending; false if it
// still is (the wait timed out).
func (s *Server) awaitOwner(id uint64, p *pendingSession) (owner, bool) {
	s.awaitSession(p)
	o, ok := s.ids.get(id)
	if !ok || o.p != nil {
		return owner{}, false
	}
	return o, true
}

// errNotResumed is what Detach answers on a mount without a keeper.
var errNotResumed = errors.New("detach: the mount has no keeper")

// restoreSession brings the owners of pending session p back under the
// view given (gone: the session did not come back). Called under s.update.
func (s *Server) restoreSession(p *pendingSession, view map[string]Skill, slugs []string, gone bool) {
	ss := &session{srv: s, id: p.id, created: time.Now(), view: view, slugs: slugs, grants: make(map[string]*grant)}
	if p.dir != nil {
		ss.ino, ss.gen = p.dir.ID<<inoShift, p.dir.Gen
		ss.kernel.old = maps.Clone(s.restore.seen[p.dir.ID])
	} else {
		ss.ino, ss.gen = s.nextID.Add(1)<<inoShift, randomGeneration()
		s.journalSession(ss)
	}
	var revoked, retired []*grant
	for _, rec := range p.grants {
		g := &grant{id: rec.ID, gen: rec.Gen, session: p.id, lease: &lease{},
			skill: Skill{Slug: rec.Slug, Dir: rec.Dir, Version: rec.Version}}
		g.kernel.old = maps.Clone(s.restore.seen[rec.ID])
		sk, inView := view[rec.Slug]
		bad := s.checkGrantDir(rec.Dir)
		switch {
		case bad != nil:
			// Nothing to serve of it: it is gone, as a revoked one.
			s.log.Warn("a grant of the journal names no version directory: revoked", "session", p.id,
				"slug", rec.Slug, "err", bad)
			g.ref = &treeRef{dir: rec.Dir, bad: bad}
			g.lease.revoked.Store(true)
			revoked = append(revoked, g)
		case gone || !inView:
			g.lease.revoked.Store(true)
			revoked = append(revoked, g)
		case sk.Dir == rec.Dir && sk.Version == rec.Version && ss.grants[rec.Slug] == nil:
			g.skill = sk // the name every view of the version shares
			ss.grants[rec.Slug] = g
		default:
			retired = append(retired, g)
		}
		if g.ref == nil {
			g.ref = s.trees.acquire(g.skill.Dir)
		}
		s.ids.add(g.id, owner{g: g})
	}
	for _, g := range retired {
		cur := ss.grants[g.skill.Slug]
		if cur == nil {
			cur = s.newGrant(p.id, view[g.skill.Slug], nil)
			ss.grants[g.skill.Slug] = cur
		}
		g.lease = cur.lease
		cur.lease.retired = append(cur.lease.retired, g)
	}
	if gone {
		ss.gone.Store(true)
		ss.view, ss.slugs = nil, nil
	} else {
		s.mu.Lock()
		s.sessions[p.id] = ss
		s.mu.Unlock()
	}
	s.ids.add(ss.ino>>inoShift, owner{ss: ss})
	s.restore.mu.Lock()
	p.restored = true
	forgot := p.forgot
	p.forgot = nil
	s.restore.mu.Unlock()
	for _, nodeid := range forgot {
		s.ids.forget(nodeid, 1) // a FORGET releases the node whatever its count
	}
	// Requests waiting on these owners go on now; only then may the
	// kernel be told to drop what it caches (it waits for requests in
	// flight on the same nodes).
	close(p.ready)

	s.notifyContent(ss.ino) // its listing may have changed meanwhile
	if gone {
		s.notifyEntry(fuse.FUSE_ROOT_ID, p.id)
	}
	for _, g := range revoked {
		s.notifyEntry(ss.ino, g.skill.Slug)
		s.unserve(g)
		s.dropGrant(g)
	}
	for _, g := range retired {
		s.notifyEntry(ss.ino, g.skill.Slug)
		s.dropGrant(g)
	}
	if gone {
		s.ids.drop(ss.ino>>inoShift, &ss.kernel)
	}
	s.log.Debug("session restored", "session", p.id, "gone", gone, "grants", len(p.grants),
		"revoked", len(revoked), "retired", len(retired))
}

// checkGrantDir checks the version directory of a journal's grant before
// any tree is walked of it: an absolute clean path, an existing directory.
func (s *Server) checkGrantDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("version directory %q is not an absolute clean path: %w", dir, skills.ErrInvalid)
	}
	_, err := s.VersionDir(dir)
	return err
}

// Resumed reports whether Mount took back a connection a keeper held
// instead of mounting anew.
func (s *Server) Resumed() bool { return s.kept != nil && s.kept.resumed }

// RestoreDone tells a resumed server that every session that was to come
// back has been set again (SetSession): requests for nodes of sessions that
// did not come back stop waiting and are answered as gone, as those of a
// removed session are. A no-op on a fresh mount, and when called again.
func (s *Server) RestoreDone() {
	r := s.restore
	if r == nil {
		return
	}
	s.update.Lock()
	defer s.update.Unlock()
	r.mu.Lock()
	left := r.pending
	r.pending = nil
	r.mu.Unlock()
	if left == nil {
		return
	}
	for _, p := range left {
		s.restoreSession(p, nil, nil, true)
	}
	close(r.done)
	s.log.Info("restore done", "sessions_gone", len(left))
}

// Detach stops serving without unmounting: the keeper's duplicate keeps the
// connection, and with it every bind of the mount, until the next Mount
// with the same keeper takes it back. Requests made meanwhile wait. The
// server is done after it (Done is closed), as after Unmount.
func (s *Server) Detach() error {
	if s.kept == nil {
		return errNotResumed
	}
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.unmounted {
		return nil
	}
	if err := s.detach(); err != nil {
		return err
	}
	s.unmounted = true
	if err := s.jrnl.finish(); err != nil {
		s.log.Error("skill filesystem detached, but its state is not written: the next start will not resume it",
			"mountpoint", s.mnt, "state", s.opts.StateDir, "err", err)
		return fmt.Errorf("detach: %w: %v", ErrNotResumable, err)
	}
	s.log.Info("skill filesystem detached: the keeper holds its connection", "mountpoint", s.mnt)
	return nil
}

// ErrNotResumable is what Detach answers when it stopped serving but the
// state a next server resumes from is not written: the next Mount will
// mount anew.
var ErrNotResumable = errors.New("the mount's state is not written: the next start will not resume it")

// Rekeep hands the keeper a duplicate of the connection again: for a
// Keeper that lost what it held (it restarted while the daemon ran), so
// that a later crash of the daemon is survived again. Without a keeper, or
// once the server stopped, it does nothing.
func (s *Server) Rekeep() error {
	if s.kept == nil {
		return nil
	}
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.unmounted {
		return nil
	}
	fd, err := unix.FcntlInt(uintptr(s.kept.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("keep the connection again: %w", err)
	}
	f := os.NewFile(uintptr(fd), "/dev/fuse")
	defer f.Close()
	if err := s.opts.Keeper.Put(s.kept.name, f); err != nil {
		return fmt.Errorf("keep the connection again: %w", err)
	}
	return nil
}
