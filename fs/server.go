// Package fs serves the skill views of agent sessions as one read-only FUSE
// filesystem. The mount's root cannot be listed; each session is a directory
// named by its (unguessable) id holding one directory per readable skill,
// each showing the files of the version the session pinned. The package knows
// nothing of the catalog or of policy: it serves the views it is handed and
// reports opens of a skill's SKILL.md to a Sink.
package fs

import (
	"context"
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

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// Sink receives activations. Opened is called synchronously when a session
// first reads a skill's top-level SKILL.md, before any of its bytes reach
// the reader, and again whenever the kernel fetches the file from its start
// (after dropping its cached copy); with Options.Opens, from every open of
// it instead, after the open has otherwise succeeded. If it returns an error
// the read (or open) fails with EIO and nothing is activated. An
// implementation makes the first activation durable before returning.
//
// Only if the kernel drops the connection while Opened runs (the daemon was
// too slow for the request timeout, see Options.RequestTimeout) does the
// open stop waiting for it; Opened then still completes in the background.
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
	// Debug logs every FUSE request to Logger at Debug level.
	Debug bool
	// FsName is the source shown in /proc/mounts (default "skillfs").
	FsName string
	// OwnerOnly restricts access to the mounting user. By default other
	// users (the sandboxes' agents) may read the mount.
	OwnerOnly bool
	// Opens has the kernel ask the daemon on every open and close of a
	// file (an OPEN and a RELEASE request), and activations count opens of
	// SKILL.md. By default the kernel opens files without asking (its
	// no-open mode, set for the whole connection by the first open), keeps
	// their pages cached across opens and skips FLUSH: a warm open, read
	// and close never reaches the daemon, and activation is recorded on a
	// session's first read of SKILL.md instead (each session has inodes
	// of its own, so that read always reaches the daemon). Passthrough
	// implies Opens.
	Opens bool
	// Passthrough lets the kernel read backing files directly where it
	// supports FUSE passthrough. Reads then bypass the daemon, so a handle
	// opened before a revocation keeps reading until it is closed. It costs
	// the daemon no descriptor: the kernel keeps its own reference to the
	// backing file of each file with opens (see passthrough.go); without
	// it, reads share at most one descriptor per file being read.
	Passthrough bool
	// RequestTimeout, if positive, asks the kernel (Linux 6.14 or later) to
	// abort the connection when a request stays unanswered this long, so
	// a hung daemon fails readers (ECONNABORTED, then ENOTCONN) instead of
	// hanging them. The kernel rounds it up to whole seconds, to at least
	// 15 s, checks every 15 s, and caps it at fs.fuse.max_request_timeout.
	// The mount is then dead until it is made again. Zero leaves the
	// kernel's default (fs.fuse.default_request_timeout) in force.
	RequestTimeout time.Duration
	// RequestTimeoutRecord names a file that, while RequestTimeout is set
	// as the kernel's default (for the length of Mount), records the
	// default it replaced. A process killed meanwhile leaves it behind; the
	// next Mount given the same file puts the previous default back if the
	// kernel still holds ours. Empty: no record, and a crash at that moment
	// leaves our timeout to every FUSE mount made afterwards on the host.
	RequestTimeoutRecord string

	// Content, when set, vouches for the version directories: a backing
	// file that changed since its version was verified is not served
	// until the version verifies again (see Content). nil: files are
	// served as the store holds them, checked for type and size only.
	Content Content

	// AuditReads counts, per session, the reads of every file that reach
	// the daemon (reads the kernel serves from its page cache, or with
	// Passthrough from the backing file, never do) and when the first of
	// them came, for TakeReads. A read costs a map lookup under one lock
	// shared by every read of the mount.
	AuditReads bool

	// Keeper, when set, keeps a duplicate of the connection's descriptor
	// (see Keeper; what survives what: resume.go): Mount takes back the
	// connection it holds for this mountpoint, if it can (Resumed), and
	// else mounts anew, clearing a dead mount left there itself: a caller
	// must not touch the mountpoint before (ClearStale, stat, statfs hang
	// on a kept connection nobody serves). A resumed server serves the
	// node ids the previous one handed out; the caller sets every session
	// that comes back (SetSession), then calls RestoreDone. The mount is
	// made by fs itself, as root (no fusermount).
	Keeper Keeper
	// StateDir holds what a server taking a connection back needs from
	// the one that served it before (required with Keeper; made 0700 if
	// missing): the INIT exchange and the node-id journal (journal.go).
	StateDir string

	// kernelWritable leaves the mount writable at the VFS level so tests can
	// prove the daemon itself refuses every mutation.
	kernelWritable bool
	// kernelExport leaves the kernel's decoding of file handles in place,
	// as kernels before 6.10 do, so tests can check that the generations
	// alone keep handles of other sessions unguessable.
	kernelExport bool
}

// Server is a mounted skill filesystem.
type Server struct {
	opts  Options
	log   *slog.Logger
	mnt   string
	fuse  *fuse.Server
	ids   nodeTable // the owners of node ids: sessions and grants
	trees treeCache
	// present holds the version directories seen to exist (VersionDir).
	present sync.Map
	nextID  atomic.Uint64
	start   time.Time
	fds     *fdCache
	// requests counts what the kernel asked, by kind (Requests).
	requests requestCounts
	// audit holds the file nodes read since the last TakeReads.
	audit readAudit
	// timeout is the request timeout the kernel applies; 0 for none.
	timeout time.Duration
	// backingRefused is set once the kernel refused to register a backing
	// file (Passthrough): it will not change its mind.
	backingRefused atomic.Bool
	// done is closed when the filesystem is no longer served.
	done chan struct{}

	// With a keeper (resume.go): the connection kept, the node-id journal
	// (nil if it could not be written), what a resumed server waits on
	// (nil on a fresh mount) and the name only this server answers.
	kept    *keptConn
	jrnl    *journal
	restore *restoreState
	probe   string

	update sync.Mutex // serialises view changes with their kernel notifications

	mu       sync.RWMutex
	sessions map[string]*session

	unmountMu sync.Mutex
	unmounted bool
}

// session is the live view of one session. Its readable set is kept as
// given (view); the grant of a skill, with its share of the version's tree,
// is made when the kernel or a reader first reaches the skill, so a session
// of 10,000 skills costs a map of them until it is walked.
type session struct {
	srv     *Server
	id      string
	ino     uint64 // its directory's node id and inode number
	gen     uint32 // the generation of its directory (random)
	created time.Time
	gone    atomic.Bool
	kernel  kernelRefs // lookups of its directory the kernel holds

	mu      sync.RWMutex
	view    map[string]Skill  // every readable skill, by slug
	slugs   []string          // the view's slugs, sorted
	grants  map[string]*grant // by slug: the skills of view reached so far
	changes uint64            // counts the changes of view
	listed  []fuse.DirEntry   // the listing of view once made; nil before
}

// entries returns the session's listing, made once per view: a large
// directory is read in many requests, each listing it again.
func (ss *session) entries() []fuse.DirEntry {
	ss.mu.RLock()
	list, slugs, gen := ss.listed, ss.slugs, ss.changes
	ss.mu.RUnlock()
	if list != nil {
		return list
	}
	list = make([]fuse.DirEntry, 0, len(slugs))
	for _, slug := range slugs {
		if g := ss.grant(slug); g != nil { // nil: revoked meanwhile
			list = append(list, fuse.DirEntry{Name: slug, Mode: syscall.S_IFDIR, Ino: g.ino(0)})
		}
	}
	ss.mu.Lock()
	if ss.changes == gen {
		ss.listed = list
	}
	ss.mu.Unlock()
	return list
}

// grant returns the session's grant of slug, made at first use; nil when
// the session cannot read slug.
func (ss *session) grant(slug string) *grant {
	ss.mu.RLock()
	g := ss.grants[slug]
	_, readable := ss.view[slug]
	ss.mu.RUnlock()
	if g != nil || !readable {
		return g
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if g := ss.grants[slug]; g != nil {
		return g
	}
	sk, ok := ss.view[slug]
	if !ok {
		return nil
	}
	g = ss.srv.newGrant(ss.id, sk, nil)
	ss.grants[slug] = g
	return g
}

// listing returns the session's slugs (sorted; shared, read only).
func (ss *session) listing() []string {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return ss.slugs
}

// grant is one skill of one session at one version. Its id makes the node
// ids (and inode numbers) of everything below it unique to that session;
// the tree it shares with every other grant of the version has the rest.
type grant struct {
	id      uint64
	gen     uint32 // the generation of its nodes (random)
	session string
	skill   Skill
	ref     *treeRef
	lease   *lease
	// activated is set once a read of the skill's SKILL.md in this
	// session was recorded (no-open mode); actMu makes concurrent first
	// readers wait for that one record.
	activated atomic.Bool
	actMu     sync.Mutex
	kernel    kernelRefs // the nodes of it the kernel holds
	backings  backings   // with Passthrough: registrations of its files with opens
}

// revoked reports whether the session lost the skill.
func (g *grant) revoked() bool { return g.lease.revoked.Load() }

// lease is a session's right to one skill, across the versions a refresh
// moves it through: handles on an earlier version keep reading until the
// skill itself is revoked.
type lease struct {
	revoked atomic.Bool
	// retired holds the grants of earlier versions that the kernel may
	// still hold nodes of, to drop their names and cached pages on
	// revocation. Guarded by Server.update.
	retired []*grant
}

func (g *grant) ino(idx int32) uint64 { return g.id<<inoShift | uint64(idx+1) }

const (
	defaultTimeout = time.Hour
	defaultFsName  = "skillfs"
	maxRequest     = 1 << 20
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
	if opts.Passthrough {
		opts.Opens = true // the kernel registers a backing file on OPEN
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
		fds:      newFdCache(defaultMaxFds, defaultFdIdle),
		done:     make(chan struct{}),
	}
	s.trees.content = opts.Content

	mountOpts := []string{"default_permissions"}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !opts.kernelWritable {
		// The kernel then answers EROFS itself before asking the daemon.
		mountOpts = append(mountOpts, "ro")
		flags |= unix.MS_RDONLY
	}
	// Have O_TRUNC reach Open, so a truncating open is refused before it
	// could count as an activation; and refuse the kernel's decoding of
	// file handles (open_by_handle_at), where it lets a filesystem say so.
	caps := uint64(fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_NO_EXPORT_SUPPORT)
	if opts.kernelExport {
		caps &^= fuse.CAP_NO_EXPORT_SUPPORT
	}
	mo := &fuse.MountOptions{
		FsName:            opts.FsName,
		Name:              "skillfs",
		Options:           mountOpts,
		AllowOther:        !opts.OwnerOnly,
		DirectMount:       true,
		DirectMountFlags:  flags,
		ExtraCapabilities: caps,
		// Requests of up to 1 MiB: fewer round trips for a cold read,
		// and larger pages in the kernel's cache for warm ones.
		MaxWrite: maxRequest,
		Debug:    opts.Debug,
		Logger:   slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		PanicHandler: func(v any) fuse.Status {
			logger.Error("skill filesystem request panicked", "panic", v)
			return fuse.EIO
		},
	}
	if opts.Keeper != nil {
		mo.MaxWrite = min(mo.MaxWrite, kernelMaxWrite())
		if err := s.mountKept(mo); err != nil {
			return nil, fmt.Errorf("mount skill filesystem at %q: %w", abs, err)
		}
	} else if err := s.mountPlain(mo); err != nil {
		return nil, fmt.Errorf("mount skill filesystem at %q: %w", abs, err)
	}
	logger.Info("skill filesystem mounted", "mountpoint", abs, "fsname", opts.FsName, "resumed", s.Resumed(),
		"file_handles", map[bool]string{true: "refused", false: "by generation"}[s.HandlesRefused()])
	return s, nil
}

// fs is what go-fuse serves.
func (s *Server) fs() fuse.RawFileSystem { return &counting{&nodeFS{s}, &s.requests} }

// mountPlain mounts through go-fuse, for a mount without a keeper.
func (s *Server) mountPlain(mo *fuse.MountOptions) error {
	var srv *fuse.Server
	var err error
	s.timeout, err = withRequestTimeout(s.opts.RequestTimeout, s.opts.RequestTimeoutRecord, s.log, func() error {
		srv, err = fuse.NewServer(s.fs(), s.mnt, mo)
		if err != nil {
			return err
		}
		s.fuse = srv
		go srv.Serve()
		return srv.WaitMount()
	})
	if err != nil {
		return err
	}
	go func() {
		srv.Wait()
		s.fds.close()
		close(s.done)
	}()
	return nil
}

// RequestTimeout returns the time after which the kernel aborts the
// connection if a request is still unanswered, or 0 if it never does.
func (s *Server) RequestTimeout() time.Duration { return s.timeout }

// activate reports an open of a skill's SKILL.md to the sink. It waits for
// the sink as long as the request is alive: an interrupted open (the caller
// got a signal) still waits, since the sink's answer decides the open. Once
// the kernel has dropped the connection nobody awaits the answer, and a
// hung sink must not keep the server from ending (see Done).
func (s *Server) activate(ctx context.Context, session, slug string) error {
	res := make(chan error, 1)
	go func() { res <- s.opts.Sink.Opened(session, slug) }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if s.connectionLost() {
			return fmt.Errorf("record activation of %q in session %q: %w", slug, session, errConnectionLost)
		}
		select {
		case err := <-res:
			return err
		case <-tick.C:
		}
	}
}

// errConnectionLost says the kernel no longer serves the mount.
var errConnectionLost = errors.New("FUSE connection lost")

// connectionLost reports whether the kernel has dropped the connection:
// statfs of the mount then fails at once, without reaching the daemon.
func (s *Server) connectionLost() bool {
	var st unix.Statfs_t
	return isDead(unix.Statfs(s.mnt, &st))
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

// NumSessions returns how many sessions are served.
func (s *Server) NumSessions() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.sessions)
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

// checkView validates a view before anything changes and returns it by
// slug.
func (s *Server) checkView(v View) (map[string]Skill, error) {
	view := make(map[string]Skill, len(v))
	for _, sk := range v {
		switch {
		case !validName(sk.Slug) || strings.HasPrefix(sk.Slug, HiddenPrefix):
			return nil, fmt.Errorf("check view: slug %q is not a valid name: %w", sk.Slug, skills.ErrInvalid)
		case sk.Dir == "":
			return nil, fmt.Errorf("check view: skill %q has no version directory: %w", sk.Slug, skills.ErrInvalid)
		}
		if _, dup := view[sk.Slug]; dup {
			return nil, fmt.Errorf("check view: slug %q appears twice: %w", sk.Slug, skills.ErrInvalid)
		}
		dir, err := s.VersionDir(sk.Dir)
		if err != nil {
			return nil, fmt.Errorf("check view: skill %q: %w", sk.Slug, err)
		}
		sk.Dir = dir // the copy every view of the version shares
		view[sk.Slug] = sk
	}
	return view, nil
}

// VersionDir checks that dir, a version directory, exists and is a
// directory, and returns the copy of its name every view of it shares. A
// version is immutable and its content is not removed while a view may hold
// it, so a directory found once is not looked at again: a view of 10,000
// skills costs no 10,000 stats per session, and 10,000 sessions of a few
// versions hold a few copies of their names.
func (s *Server) VersionDir(dir string) (string, error) {
	if canon, ok := s.present.Load(dir); ok {
		return canon.(string), nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return "", fmt.Errorf("version directory %q: %w", dir, skills.ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("version directory: %w", err)
	case !fi.IsDir():
		return "", fmt.Errorf("version directory %q is not a directory: %w", dir, skills.ErrInvalid)
	}
	canon, _ := s.present.LoadOrStore(dir, dir)
	return canon.(string), nil
}

// newGrant grants a skill to a session, under an existing lease when the
// session moves to another version of it.
func (s *Server) newGrant(session string, sk Skill, l *lease) *grant {
	if l == nil {
		l = &lease{}
	}
	g := &grant{
		id:      s.nextID.Add(1),
		gen:     randomGeneration(),
		session: session,
		skill:   sk,
		ref:     s.trees.acquire(sk.Dir),
		lease:   l,
	}
	if s.jrnl != nil {
		s.jrnl.add(journalRec{Op: recGrant, ID: g.id, Gen: g.gen, Session: session,
			Slug: sk.Slug, Dir: sk.Dir, Version: sk.Version})
	}
	s.ids.add(g.id, owner{g: g})
	return g
}

// journalSession records a session's directory, before its id can reach
// the kernel.
func (s *Server) journalSession(ss *session) {
	if s.jrnl != nil {
		s.jrnl.add(journalRec{Op: recSession, ID: ss.ino >> inoShift, Gen: ss.gen, Session: ss.id})
	}
}

// dropGrant ends the service of a grant (revoked, or its session moved to
// another version): its tree is no longer the view's, and its node ids stay
// known only while the kernel holds some.
func (s *Server) dropGrant(g *grant) {
	s.trees.release(g.ref)
	s.ids.drop(g.id, &g.kernel)
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
	view, err := s.checkView(v)
	if err != nil {
		return fmt.Errorf("set session %q: %w", id, err)
	}
	s.update.Lock()
	defer s.update.Unlock()

	slugs := make([]string, 0, len(v))
	for _, sk := range v {
		slugs = append(slugs, sk.Slug)
	}
	slices.Sort(slugs)

	ss := s.session(id)
	if ss == nil {
		if p := s.takePending(id); p != nil {
			s.restoreSession(p, view, slugs, false) // served before the connection was taken back
		} else {
			s.addSession(id, view, slugs)
		}
		return nil
	}
	c := s.replaceView(ss, view, slugs)
	s.forgetReplaced(ss, c)
	s.log.Info("session updated", "session", id, "skills", len(v),
		"added", len(c.added), "swapped", len(c.swapped), "revoked", len(c.revoked))
	return nil
}

// addSession serves a session not served yet. Called under s.update.
func (s *Server) addSession(id string, view map[string]Skill, slugs []string) {
	ss := &session{srv: s, id: id, ino: s.nextID.Add(1) << inoShift, gen: randomGeneration(), created: time.Now(),
		view: view, slugs: slugs, grants: make(map[string]*grant)}
	s.journalSession(ss)
	s.ids.add(ss.ino>>inoShift, owner{ss: ss})
	s.mu.Lock()
	s.sessions[id] = ss
	s.mu.Unlock()
	// A session served again under the id of one removed (moved back
	// to this host) must not be found as the dead one the kernel may
	// still hold by name.
	s.notifyEntry(fuse.FUSE_ROOT_ID, id)
	s.log.Debug("session added", "session", id, "skills", len(view))
}

// viewChange is what replacing a session's view changed.
type viewChange struct {
	added          []string // slugs new to the view
	revoked        []*grant // grants of skills gone from the view
	swapped        []*grant // the new grants of skills whose version changed
	retiring       []*grant // the grants swapped ones replace, index for index
	listingChanged bool     // a slug left the listing
}

// replaceView puts view in place of the session's, in one pass under the
// session's lock, so no grant made meanwhile by a lookup escapes the
// comparison. Called under s.update.
func (s *Server) replaceView(ss *session, view map[string]Skill, slugs []string) viewChange {
	var c viewChange
	ss.mu.Lock()
	defer ss.mu.Unlock()
	next := make(map[string]*grant, len(ss.grants))
	for _, slug := range slugs {
		if _, ok := ss.view[slug]; !ok {
			c.added = append(c.added, slug)
		}
	}
	for _, slug := range ss.slugs {
		if _, ok := view[slug]; !ok {
			c.listingChanged = true
		}
	}
	for slug, old := range ss.grants {
		sk, ok := view[slug]
		switch {
		case !ok:
			old.lease.revoked.Store(true)
			c.revoked = append(c.revoked, old)
		case old.skill.Dir == sk.Dir && old.skill.Version == sk.Version:
			next[slug] = old
		default:
			g := s.newGrant(ss.id, sk, old.lease)
			next[slug] = g
			c.swapped = append(c.swapped, g)
			c.retiring = append(c.retiring, old)
		}
	}
	ss.view, ss.slugs, ss.grants = view, slugs, next
	ss.changes++
	ss.listed = nil
	return c
}

// forgetReplaced makes the kernel forget what it cached of a view that
// changed. Nothing below a session's directory is held unless it is.
// Called under s.update.
func (s *Server) forgetReplaced(ss *session, c viewChange) {
	dirHeld := ss.kernel.held()
	for _, g := range c.revoked {
		if dirHeld {
			s.notifyEntry(ss.ino, g.skill.Slug)
		}
		s.unserve(g)
		s.unserve(g.lease.retired...)
		g.lease.retired = nil
	}
	for i, g := range c.swapped {
		if dirHeld {
			s.notifyEntry(ss.ino, g.skill.Slug)
		}
		// The kernel may go on reading the old version through what it
		// holds (handles, working directories): keep it for a revocation.
		g.lease.retired = append(g.lease.retired, c.retiring[i])
	}
	for _, g := range slices.Concat(c.revoked, c.retiring) {
		s.dropGrant(g)
	}
	for _, g := range c.swapped {
		// Versions nobody holds any more need no purge later.
		g.lease.retired = slices.DeleteFunc(g.lease.retired, func(r *grant) bool { return !r.kernel.held() })
	}
	if !dirHeld {
		return
	}
	for _, slug := range c.added {
		s.notifyEntry(ss.ino, slug)
	}
	if c.listingChanged || len(c.added)+len(c.swapped)+len(c.revoked) > 0 {
		// The kernel may cache the session's listing (see OpenDir).
		s.notifyContent(ss.ino)
	}
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
	ss.view, ss.slugs, ss.grants = nil, nil, nil
	ss.changes++
	ss.listed = nil
	ss.mu.Unlock()
	for _, g := range grants {
		g.lease.revoked.Store(true)
	}
	if ss.kernel.held() {
		// Its listing too: a process holding the session's directory (a
		// working directory, a bind of it) must not list it from the cache.
		s.notifyContent(ss.ino)
		s.notifyEntry(fuse.FUSE_ROOT_ID, id)
		for slug := range grants {
			s.notifyEntry(ss.ino, slug)
		}
	}
	for _, g := range grants {
		s.unserve(g)
		s.unserve(g.lease.retired...)
		g.lease.retired = nil
		s.dropGrant(g)
	}
	s.ids.drop(ss.ino>>inoShift, &ss.kernel)
	s.log.Info("session removed", "session", id)
}

// unserve makes the kernel drop what it holds of revoked grants: the cached
// pages of their files, so that reads of revoked content reach the daemon
// and fail, and the names below their directories, so that a name reached
// through a directory still held (a working directory, an open descriptor)
// is looked up again, and the lookup fails: without OPEN requests a cached
// name would otherwise open without the daemon being asked.
//
// Notifications must never be sent with locks a FUSE request needs: the
// kernel makes a notification wait for requests in flight on the same
// inodes.
func (s *Server) unserve(grants ...*grant) {
	for _, g := range grants {
		if !g.kernel.held() {
			continue
		}
		t, _, err := g.ref.get()
		if err != nil {
			continue // never walked, so never given to the kernel
		}
		handed := g.kernel.handed()
		for _, idx := range handed {
			s.notifyContent(g.ino(idx)) // a directory's cached listing as well as a file's pages
		}
		for _, idx := range handed {
			if idx != 0 {
				s.notifyEntry(g.ino(t.entries[idx].parent), t.entries[idx].name)
			}
		}
	}
}

// notifyEntry makes the kernel drop its cached name of an entry of
// directory parent (a node id); a name it does not hold is no error.
func (s *Server) notifyEntry(parent uint64, name string) {
	if st := s.fuse.EntryNotify(parent, name); st != fuse.OK && st != fuse.ENOENT {
		s.log.Debug("invalidate entry", "name", name, "status", st)
	}
}

// notifyContent makes the kernel drop the cached pages (or listing) of a
// node.
func (s *Server) notifyContent(nodeid uint64) {
	if st := s.fuse.InodeNotify(nodeid, 0, 0); st != fuse.OK && st != fuse.ENOENT {
		s.log.Debug("invalidate content", "node", nodeid, "status", st)
	}
}

// Unmount unmounts the filesystem. If files are still open it detaches the
// mount lazily (MNT_DETACH): the path is free at once and the kernel keeps
// serving open handles until they are closed; Wait returns after that.
// With a keeper it first drops the keeper's duplicate and the state: a real
// unmount ends the connection, nobody is to take it back. It also ends a
// mount that Detach left.
func (s *Server) Unmount() error {
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.unmounted && s.kept == nil {
		return nil
	}
	if s.kept != nil {
		// A real unmount ends the connection: nobody is to take it back.
		if err := s.opts.Keeper.Drop(s.kept.name); err != nil {
			s.log.Warn("drop the kept connection", "name", s.kept.name, "err", err)
		}
		removeState(s.opts.StateDir)
		if s.jrnl != nil {
			s.jrnl.close()
		}
	}
	err := unix.Unmount(s.mnt, 0)
	lazy := false
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(s.mnt, unix.MNT_DETACH)
		lazy = true
	}
	if errors.Is(err, unix.EPERM) && s.kept == nil {
		// Not privileged: the setuid helper can still unmount a mount it made.
		err = s.fuse.Unmount()
	}
	if errors.Is(err, unix.EINVAL) && !s.mounted() {
		err = nil // unmounted from outside already
	}
	if err != nil {
		return fmt.Errorf("unmount skill filesystem at %q: %w", s.mnt, err)
	}
	s.unmounted = true
	if !lazy {
		// Binds of the mount in other mount namespaces (sandboxes) keep the
		// connection alive after our unmount; don't wait for them forever.
		// The kernel ends the connection when this process exits.
		select {
		case <-s.done:
		case <-time.After(UnmountWait):
			s.log.Warn("skill filesystem still held by other mount namespaces; it ends when this process exits",
				"mountpoint", s.mnt)
		}
	}
	s.log.Info("skill filesystem unmounted", "mountpoint", s.mnt, "lazy", lazy)
	return nil
}

// UnmountWait bounds how long Unmount waits for the kernel to release the
// connection after the mount point is gone.
var UnmountWait = 2 * time.Second

// mounted reports whether the mount point is still a mount point.
func (s *Server) mounted() bool {
	at, err := mountsAt(s.mnt)
	return err != nil || len(at) > 0
}

// Wait blocks until the filesystem is no longer served: after Unmount, or
// when the mount was removed from outside or its connection aborted (see
// Options.RequestTimeout).
func (s *Server) Wait() { <-s.done }

// Done returns a channel closed when the filesystem is no longer served, as
// Wait returns. A server whose mount ends without Unmount has lost it.
func (s *Server) Done() <-chan struct{} { return s.done }

// ViewFS returns the view of a session as an io/fs.FS, with the same hiding
// and confinement rules as the mount and sharing its version trees. It
// follows the session as the mount does: skills revoked later fail to open
// through it, skills granted later appear.
func (s *Server) ViewFS(id string) (iofs.FS, error) {
	ss := s.session(id)
	if ss == nil {
		return nil, fmt.Errorf("view of session %q: %w", id, skills.ErrNotFound)
	}
	return &viewFS{list: ss.listing, grant: ss.grant}, nil
}

// Requests returns how many requests of each kind (Req*) the kernel has
// sent since the mount was made.
func (s *Server) Requests() map[string]uint64 { return s.requests.snapshot() }

// RequestErrors returns how many requests of each kind (Req*) were answered
// with an error, by errno name ("ENOENT"; "other" for an errno without a
// name), leaving out kinds and errnos never answered. Some are expected
// answers: ENOENT to the LOOKUP of a missing name; ENOSYS to the first
// OPEN, FLUSH and OPENDIR of a mount that does not count opens, to the first
// STATX and to the first request of each extended attribute kind (the
// kernel then stops asking); ENOTTY to every IOCTL.
func (s *Server) RequestErrors() map[string]map[string]uint64 { return s.requests.errors() }

// HandlesRefused reports whether the kernel refuses to decode file handles
// of the mount (open_by_handle_at), as Linux 6.10 and later do when asked.
// Where it does not, a handle opens only a node the kernel holds, and only
// with that node's generation: random, 32 bits.
func (s *Server) HandlesRefused() bool {
	return !s.opts.kernelExport && s.fuse.KernelSettings().Flags64()&fuse.CAP_NO_EXPORT_SUPPORT != 0
}

// PassthroughSupported reports whether the kernel offered FUSE passthrough
// when the mount was set up (Options.Passthrough only helps where it did).
func (s *Server) PassthroughSupported() bool {
	return s.fuse.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0
}
