// Package fs serves the skill views of agent sessions as one read-only FUSE
// filesystem. The mount's root cannot be listed; each session is a directory
// named by its (unguessable) id holding one directory per readable skill,
// each showing the files of the version the session pinned. The package knows
// nothing of the catalog or of policy: it serves the views it is handed and
// reports opens of a skill's SKILL.md to a Sink.
package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// Sink receives activations. Opened is called synchronously from the open of
// a skill's top-level SKILL.md, after the open has otherwise succeeded; if it
// returns an error the open fails with EIO and nothing is activated. An
// implementation makes the first activation durable before returning.
type Sink interface {
	Opened(session, slug string) error
}

// Skill is one entry of a view: a slug served from a version directory.
type Skill struct {
	Slug    string
	Dir     string // the version's directory in the content store
	Version string // tree hash; the same slug and version means unchanged
}

// View is the readable set of a session, in any order; listings are sorted.
type View []Skill

// Options configure a mount. The zero value is usable.
type Options struct {
	// Sink receives activations; nil records none.
	Sink Sink
	// UID and GID own every file shown (default root).
	UID, GID uint32
	// EntryTimeout and AttrTimeout bound how long the kernel trusts names and
	// attributes. Content is immutable and every change of a view is pushed
	// to the kernel, so long timeouts are safe (default one hour).
	EntryTimeout time.Duration
	AttrTimeout  time.Duration
	// Logger receives lifecycle messages (Info) and per-operation ones
	// (Debug); default discards.
	Logger *slog.Logger
	// Debug logs every FUSE request at Debug level.
	Debug bool
	// FsName is the source shown in /proc/mounts (default "skillfs").
	FsName string
	// OwnerOnly restricts access to the mounting user. By default other
	// users (the sandboxes' agents) may read the mount.
	OwnerOnly bool
	// Passthrough lets the kernel read backing files directly where it
	// supports FUSE passthrough. Reads then bypass the daemon, so a handle
	// opened before a revocation keeps reading until it is closed.
	Passthrough bool

	// kernelWritable leaves the mount writable at the VFS level so tests can
	// prove the daemon itself refuses every mutation.
	kernelWritable bool
}

// Server is a mounted skill filesystem.
type Server struct {
	opts   Options
	log    *slog.Logger
	mnt    string
	fuse   *fuse.Server
	root   *rootNode
	trees  treeCache
	nextID atomic.Uint64
	start  time.Time

	update sync.Mutex // serialises view changes with their kernel notifications

	mu       sync.RWMutex
	sessions map[string]*session

	unmountMu sync.Mutex
	unmounted bool
}

// session is the live view of one session.
type session struct {
	id      string
	dirIno  uint64
	created time.Time
	gone    atomic.Bool

	mu     sync.RWMutex
	grants map[string]*grant // by slug
	slugs  []string          // sorted
}

func (ss *session) grant(slug string) *grant {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return ss.grants[slug]
}

// grant is one skill of one session at one version. Its id makes the inode
// numbers of everything below it unique to that session.
type grant struct {
	id      uint64
	session string
	skill   Skill
	ref     *treeRef
	revoked atomic.Bool
}

func (g *grant) ino(idx int32) uint64 { return g.id<<inoShift | uint64(idx+1) }

const (
	defaultTimeout = time.Hour
	defaultFsName  = "skillfs"
)

// Mount mounts an empty skill filesystem at mountpoint and starts serving it.
// Sessions are added with SetSession.
func Mount(mountpoint string, opts Options) (*Server, error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mount skill filesystem at %q: %w", mountpoint, err)
	}
	if opts.EntryTimeout <= 0 {
		opts.EntryTimeout = defaultTimeout
	}
	if opts.AttrTimeout <= 0 {
		opts.AttrTimeout = defaultTimeout
	}
	if opts.FsName == "" {
		opts.FsName = defaultFsName
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:     opts,
		log:      logger,
		mnt:      abs,
		sessions: make(map[string]*session),
		start:    time.Now(),
	}
	s.root = &rootNode{srv: s}

	mountOpts := []string{"default_permissions"}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !opts.kernelWritable {
		// The kernel then answers EROFS itself before asking the daemon.
		mountOpts = append(mountOpts, "ro")
		flags |= unix.MS_RDONLY
	}
	entry, attr := opts.EntryTimeout, opts.AttrTimeout
	fo := &fusefs.Options{
		MountOptions: fuse.MountOptions{
			FsName:           opts.FsName,
			Name:             "skillfs",
			Options:          mountOpts,
			AllowOther:       !opts.OwnerOnly,
			DirectMount:      true,
			DirectMountFlags: flags,
			Debug:            opts.Debug,
			Logger:           slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
			PanicHandler: func(v any) fuse.Status {
				logger.Error("skill filesystem request panicked", "panic", v)
				return fuse.EIO
			},
		},
		EntryTimeout:   &entry,
		AttrTimeout:    &attr,
		UID:            opts.UID,
		GID:            opts.GID,
		RootStableAttr: &fusefs.StableAttr{Ino: fuse.FUSE_ROOT_ID},
		Logger:         slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv, err := fusefs.Mount(abs, s.root, fo)
	if err != nil {
		return nil, fmt.Errorf("mount skill filesystem at %q: %w", abs, err)
	}
	s.fuse = srv
	logger.Info("skill filesystem mounted", "mountpoint", abs, "fsname", opts.FsName)
	return s, nil
}

// Mountpoint returns the absolute path the filesystem is mounted at.
func (s *Server) Mountpoint() string { return s.mnt }

// Sessions returns the ids of the sessions served, sorted.
func (s *Server) Sessions() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *Server) session(id string) *session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sessions[id]
}

// validName reports whether name can be one path component of the mount.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 &&
		!strings.ContainsAny(name, "/\x00")
}

// checkView validates a view before anything changes.
func checkView(v View) error {
	seen := make(map[string]bool, len(v))
	for _, sk := range v {
		switch {
		case !validName(sk.Slug) || strings.HasPrefix(sk.Slug, HiddenPrefix):
			return fmt.Errorf("check view: slug %q is not a valid name: %w", sk.Slug, skills.ErrInvalid)
		case seen[sk.Slug]:
			return fmt.Errorf("check view: slug %q appears twice: %w", sk.Slug, skills.ErrInvalid)
		case sk.Dir == "":
			return fmt.Errorf("check view: skill %q has no version directory: %w", sk.Slug, skills.ErrInvalid)
		}
		seen[sk.Slug] = true
		fi, err := os.Stat(sk.Dir)
		switch {
		case errors.Is(err, iofs.ErrNotExist):
			return fmt.Errorf("check view: version directory %q of skill %q: %w", sk.Dir, sk.Slug, skills.ErrNotFound)
		case err != nil:
			return fmt.Errorf("check view: version directory of skill %q: %w", sk.Slug, err)
		case !fi.IsDir():
			return fmt.Errorf("check view: version directory %q of skill %q is not a directory: %w", sk.Dir, sk.Slug, skills.ErrInvalid)
		}
	}
	return nil
}

func (s *Server) newGrant(session string, sk Skill) *grant {
	return &grant{
		id:      s.nextID.Add(1),
		session: session,
		skill:   sk,
		ref:     s.trees.acquire(sk.Dir),
	}
}

// SetSession creates or replaces the view of session id. On replacement,
// skills absent from v vanish at once: the kernel forgets their names and
// cached pages, and handles still open on them fail their next read with
// EACCES. Skills whose version changed are swapped to the new version under
// new inodes; handles open on the old version keep reading it (it is
// immutable and was permitted). Unchanged skills keep their inodes.
func (s *Server) SetSession(id string, v View) error {
	if !validName(id) {
		return fmt.Errorf("set session %q: not a valid name: %w", id, skills.ErrInvalid)
	}
	if err := checkView(v); err != nil {
		return fmt.Errorf("set session %q: %w", id, err)
	}
	s.update.Lock()
	defer s.update.Unlock()

	ss := s.session(id)
	if ss == nil {
		ss = &session{id: id, dirIno: s.nextID.Add(1) << inoShift, created: time.Now(), grants: make(map[string]*grant, len(v))}
		for _, sk := range v {
			ss.grants[sk.Slug] = s.newGrant(id, sk)
			ss.slugs = append(ss.slugs, sk.Slug)
		}
		slices.Sort(ss.slugs)
		s.mu.Lock()
		s.sessions[id] = ss
		s.mu.Unlock()
		s.log.Info("session added", "session", id, "skills", len(v))
		return nil
	}

	next := make(map[string]*grant, len(v))
	slugs := make([]string, 0, len(v))
	var added, swapped, revoked []string
	var dropped []*grant
	for _, sk := range v {
		slugs = append(slugs, sk.Slug)
		old := ss.grant(sk.Slug)
		switch {
		case old == nil:
			next[sk.Slug] = s.newGrant(id, sk)
			added = append(added, sk.Slug)
		case old.skill.Dir == sk.Dir && old.skill.Version == sk.Version:
			next[sk.Slug] = old
		default:
			next[sk.Slug] = s.newGrant(id, sk)
			swapped = append(swapped, sk.Slug)
			dropped = append(dropped, old)
		}
	}
	slices.Sort(slugs)
	ss.mu.Lock()
	for slug, g := range ss.grants {
		if next[slug] == nil {
			g.revoked.Store(true)
			revoked = append(revoked, slug)
			dropped = append(dropped, g)
		}
	}
	ss.grants, ss.slugs = next, slugs
	ss.mu.Unlock()
	for _, g := range dropped {
		s.trees.release(g.ref)
	}

	// The view has changed; now make the kernel forget what it cached.
	if dir := s.sessionInode(ss); dir != nil {
		for _, slug := range revoked {
			s.forget(dir, slug, true)
		}
		for _, slug := range swapped {
			s.forget(dir, slug, false)
		}
		for _, slug := range added {
			dir.NotifyEntry(slug)
		}
	}
	s.log.Info("session updated", "session", id, "skills", len(v),
		"added", len(added), "swapped", len(swapped), "revoked", len(revoked))
	return nil
}

// RemoveSession removes a session at once: its directory vanishes and
// handles still open below it fail their next read with EACCES.
func (s *Server) RemoveSession(id string) {
	s.update.Lock()
	defer s.update.Unlock()
	s.mu.Lock()
	ss := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if ss == nil {
		return
	}
	ss.gone.Store(true)
	ss.mu.Lock()
	grants := ss.grants
	ss.grants, ss.slugs = nil, nil
	ss.mu.Unlock()
	for _, g := range grants {
		g.revoked.Store(true)
		s.trees.release(g.ref)
	}
	s.forget(s.root.EmbeddedInode(), id, true)
	s.log.Info("session removed", "session", id)
}

// sessionInode returns the inode the kernel knows for a session, if any.
func (s *Server) sessionInode(ss *session) *fusefs.Inode {
	ch := s.root.GetChild(ss.id)
	if ch == nil {
		return nil
	}
	if d, ok := ch.Operations().(*sessionDir); !ok || d.sess != ss {
		return nil
	}
	return ch
}

// forget drops name from directory dir, in our tree and in the kernel's
// dentry cache. When purge is set, the page cache of every file below is
// dropped too, so reads of revoked content reach the daemon and fail. It must
// not run with locks a FUSE request might need: the kernel can make the
// notification wait for requests in flight.
func (s *Server) forget(dir *fusefs.Inode, name string, purge bool) {
	ch := dir.GetChild(name)
	if ch == nil {
		// Nothing cached by us; still clear a dentry the kernel may hold.
		dir.NotifyEntry(name)
		return
	}
	var files []*fusefs.Inode
	if purge {
		files = regularFiles(ch, files)
	}
	dir.RmChild(name)
	if errno := dir.NotifyDelete(name, ch); errno != 0 && errno != syscall.ENOENT && errno != syscall.ENOTEMPTY {
		s.log.Debug("invalidate entry", "name", name, "errno", errno)
	}
	for _, f := range files {
		if errno := f.NotifyContent(0, 0); errno != 0 && errno != syscall.ENOENT {
			s.log.Debug("invalidate file content", "errno", errno)
		}
	}
}

// regularFiles collects the file inodes known below n.
func regularFiles(n *fusefs.Inode, acc []*fusefs.Inode) []*fusefs.Inode {
	if !n.IsDir() {
		return append(acc, n)
	}
	for _, ch := range n.Children() {
		acc = regularFiles(ch, acc)
	}
	return acc
}

// Unmount unmounts the filesystem. If files are still open it detaches the
// mount lazily (MNT_DETACH): the path is free at once and the kernel keeps
// serving open handles until they are closed; Wait returns after that.
func (s *Server) Unmount() error {
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.unmounted {
		return nil
	}
	err := unix.Unmount(s.mnt, 0)
	lazy := false
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(s.mnt, unix.MNT_DETACH)
		lazy = true
	}
	if errors.Is(err, unix.EPERM) {
		// Not privileged: the setuid helper can still unmount a mount it made.
		err = s.fuse.Unmount()
	}
	if err != nil {
		return fmt.Errorf("unmount skill filesystem at %q: %w", s.mnt, err)
	}
	s.unmounted = true
	if !lazy {
		s.fuse.Wait()
	}
	s.log.Info("skill filesystem unmounted", "mountpoint", s.mnt, "lazy", lazy)
	return nil
}

// Wait blocks until the filesystem is no longer served: after Unmount, or
// when the mount was removed from outside.
func (s *Server) Wait() { s.fuse.Wait() }

// ViewFS returns the current view of a session as an io/fs.FS, with the same
// hiding and confinement rules as the mount and sharing its version trees.
// Skills revoked later fail to open through it too.
func (s *Server) ViewFS(id string) (iofs.FS, error) {
	ss := s.session(id)
	if ss == nil {
		return nil, fmt.Errorf("view of session %q: %w", id, skills.ErrNotFound)
	}
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	v := &viewFS{byslug: make(map[string]*grant, len(ss.slugs)), slugs: slices.Clone(ss.slugs)}
	for slug, g := range ss.grants {
		v.byslug[slug] = g
	}
	return v, nil
}
