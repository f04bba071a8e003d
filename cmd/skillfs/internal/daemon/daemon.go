// Package daemon is `skillfs serve`: it owns the shared FUSE mount, the
// sessions served in it and their binds (made by package fs/bind), this
// daemon as a host of its catalog, its health and its metrics. New builds
// it — the recorder of package activation as the mount's sink, the event
// hub of package events — and Serve serves it through the HTTP API of
// package server, on a Unix socket and the listeners configured.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/activation"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/catalog/content"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/cmd/skillfs/internal/server"
	skfs "skillfs/fs"
	"skillfs/fs/keeper"
	"skillfs/index"
	"skillfs/skills/git"
)

// Options configure a daemon.
type Options struct {
	MountRoot  string        // where the shared FUSE mount goes (default <home>/mnt)
	AgentPath  string        // where agents see the skills (default /home/gem/skills)
	TCPAddr    string        // optional loopback listener, needs Token
	Token      string        // bearer token for the TCP listener
	FlushEvery time.Duration // activation batch interval (default 500ms)
	Logger     *slog.Logger
	Ready      io.Writer // gets the readiness line
	Debug      bool      // FUSE debug logging
	// CountOpens has every open of a file reach the daemon, and counts every
	// open of a SKILL.md as an activation (fs.Options.Opens). By default
	// the kernel opens files without asking and a session's first read of
	// SKILL.md activates the skill.
	CountOpens bool
	// Passthrough lets the kernel read large files straight from the store
	// where it supports FUSE passthrough. Reads then bypass the daemon, so a
	// revoked skill's already-open handles keep reading; off by default.
	Passthrough bool
	UID, GID    uint32 // owner shown for every file (default root)
	// Setup runs once the data directory is locked for this daemon and
	// reconciled, before anything is served (serve registers the bundled
	// skills here).
	Setup func(context.Context) error
	// RequestTimeout makes the kernel abort the mount when a FUSE request
	// stays unanswered this long (see fs.Options.RequestTimeout); 0 leaves
	// the kernel's default.
	RequestTimeout time.Duration

	// Limits are the limits of the API's connections (server.Limits).
	server.Limits
	// EventRetention and EventRetainCount bound the event log: events
	// older than EventRetention go, and of the rest all but the newest
	// EventRetainCount (zero or less: DefaultEventRetention,
	// DefaultEventRetainCount). A client resuming from a pruned id is told
	// to resync.
	EventRetention   time.Duration
	EventRetainCount int64

	// DiffMemory bounds the bytes the comparisons of versions (diffs,
	// the diffstats of listings and updates) hold together (zero or less:
	// DefaultDiffMemory); one that cannot be granted soon is answered 503
	// busy (diffGate).
	DiffMemory int64

	// HostName is the human name this host registers under (default the
	// machine's host name); the host's id is its data directory's
	// (catalog.Catalog.HostID).
	HostName string
	// HeartbeatEvery is how often this host records that it is alive, and
	// HostGrace how long after its last heartbeat a host counts as gone
	// (zero or less: DefaultHeartbeatEvery, DefaultHostGrace).
	HeartbeatEvery time.Duration
	HostGrace      time.Duration
	// ReconcileEvery is how often the daemon looks for changes made
	// elsewhere (another host, a command that did not tell it) when
	// nothing wakes it (zero or less: DefaultReconcileEvery).
	ReconcileEvery time.Duration
	// Watch returns a channel that fires when another process may have
	// changed the catalog (default: the index's, index.DB.Watch, which
	// PostgreSQL's notifications feed); each fire makes the daemon look at
	// once rather than at its next periodic look.
	Watch func(context.Context) <-chan struct{}
	// Quotas bound what each user's sessions may install
	// (InstallForSession).
	Quotas Quotas
	// InstallAsRoot lets a session's install read a path in its sandbox
	// as a process running as root (uid 0); by default such a process is
	// refused (sandbox.Request.AllowRoot).
	InstallAsRoot bool
	// InstallGitHosts, when not empty, are the only hosts a session's
	// install reads a git source from, whatever their addresses; when
	// empty, any https host whose addresses are all public
	// (git.RemotePolicy).
	InstallGitHosts []git.Host
	// Caps bound the open sub-agent sessions of a session and the open
	// sessions of a user (CreateSession).
	Caps Caps
	// FsName is the mount's source in the mount table (fs.Options.FsName;
	// "" for the filesystem's own).
	FsName string
	// Keeper is the socket of the keeper (`skillfs keeper`) holding the
	// mount's FUSE connection, "" for none: with one, the mount and its
	// binds outlive the daemon (see keep.go), and a start whose keeper does
	// not answer fails.
	Keeper string
	// Handover, asked when the daemon stops with a keeper, says whether
	// the stop leaves the mount and its binds to the keeper for the next
	// start (true, and nil: the default) or ends them as without one.
	Handover func() bool

	// recorderIndex, for tests, wraps the index the activation recorder
	// sees (nil: the catalog's as it is).
	recorderIndex func(*index.DB) activation.Index
	// keepAlive and now, for tests: how often an idle event stream gets a
	// keep-alive (0: server.DefaultKeepAlive), and the time tokens are
	// judged by (nil: the machine's).
	keepAlive time.Duration
	now       func() time.Time
}

// Daemon is a running skillfs serve.
type Daemon struct {
	cat *catalog.Catalog
	// db is the index the daemon keeps its sessions, binds, hosts and
	// events in: the catalog's.
	db        *index.DB
	opts      Options
	fs        *skfs.Server
	rec       activationRecorder
	audit     readAudit
	events    *events.Hub
	http      *server.API
	metrics   *metrics
	diffs     *diffGate // what comparisons of versions hold together
	globs     globsGate // the globs requests running
	reads     *readGate // the reads of sandbox paths outstanding
	log       *slog.Logger
	mountRoot string
	readyBusy checks // readiness checks under way
	watchBusy checks // the watchdog's checks under way (its own, so a probe never fails a ping)
	lastErr   *atomic.Pointer[api.LoggedError]
	agentPath string
	softFDs   uint64 // the open file limit, which the API's connections fit into

	// This daemon as a host (see hosts.go): its id (the data directory's),
	// name, start time, the API address it advertises, and the grace after
	// which a host that stopped heartbeating is gone.
	host      string
	hostName  string
	started   time.Time
	apiAddr   string
	hostGrace time.Duration

	sockets apiSockets // the API sockets put into sandboxes, by bind
	// keeper holds the mount's connection (Options.Keeper); nil for none.
	keeper *keeper.Client
	// begun is when New began, mounted when the mount served: what the log
	// says a start took.
	begun, mounted time.Time
	// installs serialises the installs of each user on this host, so
	// that their quotas are checked against installs that do not run
	// meanwhile.
	installs content.KeyedLocks

	mu sync.Mutex // serialises session changes
	// followed is what the views of this host's sessions were last
	// reevaluated against (nil: nothing yet); guarded by mu.
	followed *readers
	// sessionsMatched is when the mount was last made to serve exactly what
	// the index says this host serves (see matchSessions); guarded by mu.
	sessionsMatched time.Time

	// What Close undoes, each at most once: the mount, the activation
	// journal and the lock of the data directory.
	unmount, closeJournal, release func()
	// endMount ends serving the mount, the first call only: keep leaves it
	// (a kept one) to the keeper, else it is unmounted.
	endMount func(keep bool)
}

// checks marks the checks of the daemon's health under way, one flag per
// check, so that one that hangs is not started again (see check).
type checks struct {
	mount, index, store atomic.Bool
}

// reconcile checks the data directory before it is served: a damaged index
// stops the start; versions the index cannot explain go to the quarantine
// and are reported, never deleted.
func reconcile(ctx context.Context, cat *catalog.Catalog, log *slog.Logger) error {
	r, err := cat.Reconcile(ctx)
	if err != nil {
		return err
	}
	for _, a := range r.Actions {
		log.Warn("data directory reconciled", "action", a)
	}
	if len(r.Missing) > 0 {
		log.Error("versions in the index have no content; sessions will not see them: run `skillfs check`", "count", len(r.Missing))
	}
	if len(r.Quarantine) > 0 {
		log.Warn("the quarantine holds versions the index did not explain; nothing was deleted: see `skillfs check`",
			"count", len(r.Quarantine), "path", filepath.Join(cat.Home(), "store", "quarantine"))
	}
	return nil
}

// Run serves until ctx is cancelled, then unmounts everything (with a
// keeper, unless Options.Handover says otherwise, leaves the mount and its
// binds to the keeper instead), flushes activations and returns nil. It
// returns an error when the mount is lost from under it (a restart then
// mounts again and re-attaches the binds).
func Run(ctx context.Context, cat *catalog.Catalog, opts Options) error {
	d, err := New(ctx, cat, opts)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Serve(ctx)
}

// New makes the daemon of the data directory cat opened: it locks the
// directory for this daemon, reconciles it, runs opts.Setup, opens the
// activation journal, mounts the shared filesystem and registers this
// host. Nothing is served over the API, and no work runs in the
// background, until Serve; Close undoes what New did.
func New(ctx context.Context, cat *catalog.Catalog, opts Options) (_ *Daemon, err error) {
	opts.defaults(cat.Home())
	if opts.TCPAddr != "" && opts.Token == "" {
		return nil, fmt.Errorf("a TCP listener needs a token")
	}
	// The last error logged is kept for `skillfs status`.
	lastErr := new(atomic.Pointer[api.LoggedError])
	d := &Daemon{cat: cat, db: cat.DB(), opts: opts, log: slog.New(errTap{opts.Logger.Handler(), lastErr}), lastErr: lastErr,
		mountRoot: opts.MountRoot, agentPath: opts.AgentPath, hostName: opts.HostName, hostGrace: opts.HostGrace, begun: time.Now()}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.release, err = catalog.LockServe(cat.Home()); err != nil {
		return nil, err
	}
	if opts.Keeper != "" {
		if d.keeper, err = DialKeeper(opts.Keeper); err != nil {
			return nil, err
		}
	}
	if err := reconcile(ctx, cat, d.log); err != nil {
		return nil, err
	}
	if opts.Setup != nil {
		if err := opts.Setup(ctx); err != nil {
			return nil, err
		}
	}
	if d.host = cat.HostID(); d.host == "" {
		return nil, fmt.Errorf("the data directory %s has no identity to serve as a host under", cat.Home())
	}
	d.started = time.Now().UTC()
	d.events = events.NewHub(d.db)
	d.metrics = newMetrics(d)
	d.diffs = newDiffGate(opts.DiffMemory, func() { d.metrics.http.Refused(server.LimitDiffs) })
	cat.LimitDiffs(d.diffs)
	d.reads = newReadGate(maxSandboxReads, maxSandboxReadsPerUser, func() { d.metrics.http.Refused(server.LimitSandboxReads) })
	if err := d.startRecorder(ctx); err != nil {
		return nil, err
	}
	soft, hard, err := skfs.RaiseFileLimit()
	if err != nil {
		d.log.Warn("open file limit", "soft", soft, "hard", hard, "err", err)
	} else {
		d.log.Info("open file limit", "soft", soft, "hard", hard)
	}
	d.softFDs = soft
	if err := d.mount(); err != nil {
		return nil, err
	}
	if err := d.register(ctx, ""); err != nil {
		return nil, err
	}
	d.http = server.New(server.Config{Sessions: d, Binds: d, Fleet: d, Queries: d, Health: d,
		Skills: cat, Drafts: cat, Curated: cat, Events: d.events, Installs: d, Credentials: d, Parents: d, SharedIndex: cat.Shared(),
		KeepAlive: opts.keepAlive, Metrics: d.metrics.http, Gatherer: d.metrics.reg, Log: d.log})
	return d, nil
}

// Close unmounts the shared filesystem (with a keeper: leaves it to the
// keeper, unless Serve unmounted it), closes the activation journal and
// unlocks the data directory, as far as New got; Serve has stopped
// serving first.
func (d *Daemon) Close() {
	for _, undo := range []*func(){&d.unmount, &d.closeJournal, &d.release} {
		if *undo != nil {
			(*undo)()
			*undo = nil
		}
	}
}

// Serve takes over the sessions this host serves, serves the API and
// follows the catalog until ctx is cancelled, then stops serving and
// flushes activations; it returns an error when the mount is lost from
// under it. The daemon is to be closed after.
func (d *Daemon) Serve(ctx context.Context) error {
	if err := d.resume(ctx); err != nil {
		return err
	}
	srv, err := d.listen(ctx)
	if err != nil {
		return err
	}
	flushCtx, stopFlush := context.WithCancel(context.Background())
	var flushing sync.WaitGroup
	flushing.Go(func() { d.flushActivations(flushCtx, d.opts.FlushEvery) })
	flushing.Go(func() { d.flushReads(flushCtx, d.opts.FlushEvery) })
	flushing.Go(func() { d.pruneEvents(flushCtx, d.opts.EventRetention, d.opts.EventRetainCount) })
	d.announce(srv)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go d.watchdog(watchCtx, watchdogEvery, d.log)
	watch := d.opts.Watch
	if watch == nil {
		watch = d.db.Watch
	}
	wake := watch(watchCtx)
	var following sync.WaitGroup
	following.Go(func() { d.follow(watchCtx, d.opts.ReconcileEvery, wake) })
	following.Go(func() { d.heartbeat(watchCtx, d.opts.HeartbeatEvery) })
	if d.keeper != nil {
		following.Go(func() { d.keeper.Watch(watchCtx, keeperWatchEvery, d.log, d.fs.Rekeep) })
	}

	var lost error
	select {
	case <-ctx.Done():
	case <-d.fs.Done():
		// Serving a dead mount helps nobody: exit, so a restart mounts
		// again and re-attaches the binds.
		lost = fmt.Errorf("skill filesystem mount at %q lost", d.mountRoot)
		d.log.Error("skill filesystem mount lost", "mountpoint", d.mountRoot)
	}

	d.log.Info("shutting down")
	stopWatch()
	following.Wait() // no view changes under the shutdown
	if err := notify("STOPPING=1"); err != nil {
		d.log.Warn("tell the service manager the daemon is stopping", "err", err)
	}
	d.events.CloseAll()
	srv.Shutdown()
	keep := d.keeper != nil && lost == nil && (d.opts.Handover == nil || d.opts.Handover())
	if keep {
		// The binds stay, on the connection the keeper holds, for the
		// next start; the API sockets end with the process (the next
		// start makes them again, as after a crash).
		d.sockets.stopAll()
	} else {
		d.unbindAll(context.Background())
	}
	// Opens keep arriving until the filesystem stops serving: flush after,
	// and fail any open still arriving (a sandbox may hold the connection);
	// with a keeper, they wait for the next start.
	d.endMount(keep)
	stopFlush()
	flushing.Wait()
	d.audit.Close() // a loss is logged; the activations below decide the exit
	if err := d.rec.Close(); err != nil {
		return errors.Join(lost, fmt.Errorf("flush activations: %w", err))
	}
	return lost
}

// resume takes over what this host serves after a (re)start: the open
// sessions of no host, then every open session of this host, served again,
// and their binds.
func (d *Daemon) resume(ctx context.Context) error {
	if n, err := d.db.AdoptSessions(ctx, d.host); err != nil {
		return err
	} else if n > 0 {
		d.log.Info("open sessions of no host taken over", "count", n)
	}
	if err := d.restore(ctx); err != nil {
		return err
	}
	// Requests waiting for sessions that did not come back are answered
	// now (a resumed mount; nothing to do on a fresh one).
	d.fs.RestoreDone()
	if d.fs.Resumed() {
		d.log.Info("resumed mount serving its sessions again", "sessions", d.fs.NumSessions(),
			"since_start", time.Since(d.begun).Round(time.Millisecond), "since_mount", time.Since(d.mounted).Round(time.Millisecond))
	}
	if err := d.dropStale(ctx); err != nil {
		d.log.Warn("remove the binds of sessions no longer served here", "err", err)
	}
	d.rebind(ctx)
	return nil
}

// listen serves the API on its listeners and registers the TCP address,
// if any, as the one this host advertises.
func (d *Daemon) listen(ctx context.Context) (*server.Servers, error) {
	srv, err := d.http.Listen(server.Listeners{Socket: filepath.Join(d.cat.Home(), api.SocketName),
		TCPAddr: d.opts.TCPAddr, Token: d.opts.Token, Limits: d.opts.Limits, SoftFDLimit: d.softFDs})
	if err != nil {
		return nil, err
	}
	if srv.TCPAddr() != "" {
		if err := d.register(ctx, srv.TCPAddr()); err != nil {
			srv.Shutdown()
			return nil, err
		}
	}
	d.log.Info("serving as a host", "host", d.host, "name", d.hostName, "shared_index", d.cat.Shared(),
		"heartbeat_every", d.opts.HeartbeatEvery, "grace", d.opts.HostGrace, "reconcile_every", d.opts.ReconcileEvery)
	return srv, nil
}

// announce logs that the daemon serves, prints the readiness line and
// tells the service manager.
func (d *Daemon) announce(srv *server.Servers) {
	sockConns, sockStreams, tcpConns, tcpStreams := srv.Caps()
	attrs := []any{"mount", d.mountRoot, "socket", srv.Socket(), "sessions", d.fs.NumSessions(),
		"socket_conns", sockConns, "socket_streams", sockStreams, "diff_memory_mib", d.opts.DiffMemory >> 20}
	line := fmt.Sprintf("skillfs ready: mount %s socket %s", d.mountRoot, srv.Socket())
	if tcp := srv.TCPAddr(); tcp != "" {
		attrs = append(attrs, "listen", tcp, "max_conns", tcpConns, "tcp_streams", tcpStreams)
		line += " listen " + tcp
	}
	d.log.Info("serving", attrs...)
	if d.opts.Ready != nil {
		fmt.Fprintln(d.opts.Ready, line)
	}
	if err := notify("READY=1\nSTATUS=serving " + d.mountRoot); err != nil {
		d.log.Warn("tell the service manager the daemon is ready", "err", err)
	}
}

// defaults fills unset options.
func (opts *Options) defaults(home string) {
	if opts.MountRoot == "" {
		opts.MountRoot = filepath.Join(home, "mnt")
	}
	if opts.AgentPath == "" {
		opts.AgentPath = "/home/gem/skills"
	}
	if opts.FlushEvery == 0 {
		opts.FlushEvery = 500 * time.Millisecond
	}
	if opts.EventRetention <= 0 {
		opts.EventRetention = DefaultEventRetention
	}
	if opts.EventRetainCount <= 0 {
		opts.EventRetainCount = DefaultEventRetainCount
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HostName == "" {
		opts.HostName, _ = os.Hostname()
	}
	if opts.HeartbeatEvery <= 0 {
		opts.HeartbeatEvery = DefaultHeartbeatEvery
	}
	if opts.HostGrace <= 0 {
		opts.HostGrace = DefaultHostGrace
	}
	if opts.ReconcileEvery <= 0 {
		opts.ReconcileEvery = DefaultReconcileEvery
	}
	if opts.DiffMemory <= 0 {
		opts.DiffMemory = DefaultDiffMemory
	}
	opts.Caps = opts.Caps.withDefaults()
	opts.Limits.Defaults()
}

// mount mounts the shared filesystem, clearing a dead mount a crash left
// (with a keeper: takes back the connection it holds, see keep.go);
// d.endMount ends it.
func (d *Daemon) mount() error {
	opts := d.opts
	fo := skfs.Options{Sink: d.rec, Logger: d.log, Debug: opts.Debug,
		Passthrough: opts.Passthrough, Opens: opts.CountOpens, UID: opts.UID, GID: opts.GID, RequestTimeout: opts.RequestTimeout,
		RequestTimeoutRecord: filepath.Join(d.cat.Home(), "fuse-timeout.restore"), AuditReads: true, Content: d.cat, FsName: opts.FsName}
	if d.keeper != nil {
		// The mount root may hold the kept connection, which nobody
		// serves until Mount resumed it: it is not looked into (Mount
		// clears a dead mount itself when it mounts anew).
		if err := prepareKeptRoot(opts.MountRoot); err != nil {
			return err
		}
		fo.Keeper, fo.StateDir = d.keeper, filepath.Join(d.cat.Home(), stateDirName)
	} else {
		// A mount left to a keeper has its state there (fs.Options.StateDir),
		// removed when it is unmounted.
		if names, _ := os.ReadDir(filepath.Join(d.cat.Home(), stateDirName)); len(names) > 0 {
			d.log.Warn("the last daemon left its mount to a keeper and this one has none (--keeper): "+
				"if the keeper still holds it, the check for a stale mount waits until the kernel's request timeout ends it, and its readers fail",
				"mountpoint", opts.MountRoot, "state", filepath.Join(d.cat.Home(), stateDirName))
		}
		if err := skfs.ClearStale(opts.MountRoot); err != nil {
			return fmt.Errorf("prepare the mount root: %w", err)
		}
		if err := os.MkdirAll(opts.MountRoot, 0o755); err != nil {
			return fmt.Errorf("create mount root: %w", err)
		}
	}
	srv, err := skfs.Mount(opts.MountRoot, fo)
	if err != nil {
		return fmt.Errorf("mount %q: %w", opts.MountRoot, err)
	}
	d.fs = srv
	d.mounted = time.Now()
	if d.keeper != nil {
		d.log.Info("mount kept by the keeper", "keeper", opts.Keeper, "resumed", srv.Resumed(),
			"since_start", d.mounted.Sub(d.begun).Round(time.Millisecond))
	}
	d.audit = activation.NewReadAudit(d.db, srv.TakeReads, d.log)
	d.log.Info("kernel caching", "entry_timeout", "1h", "attr_timeout", "1h", "keep_cache", true,
		"passthrough_supported", srv.PassthroughSupported(), "passthrough_enabled", opts.Passthrough && srv.PassthroughSupported())
	if opts.Passthrough && !srv.PassthroughSupported() {
		d.log.Warn("passthrough asked for, but the kernel does not offer it: reads go through the daemon")
	}
	var once sync.Once
	d.endMount = func(keep bool) {
		once.Do(func() {
			if keep {
				// Readers wait for the next start.
				if err := srv.Detach(); err != nil {
					d.log.Error("detach the mount (left to the keeper)", "mountpoint", opts.MountRoot, "err", err)
					return
				}
				d.log.Info("mount detached: left to the keeper with its binds, readers wait for the next start",
					"mountpoint", opts.MountRoot, "keeper", opts.Keeper)
				return
			}
			if err := srv.Unmount(); err != nil {
				d.log.Error("unmount", "mountpoint", opts.MountRoot, "err", err)
			}
		})
	}
	// A start that fails after the mount leaves a kept one to the keeper
	// for the next start, as a stop does.
	d.unmount = func() { d.endMount(d.keeper != nil) }
	return nil
}
