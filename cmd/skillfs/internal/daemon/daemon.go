// Package daemon is `skillfs serve`: it owns the shared FUSE mount, the
// sessions served in it, the activation recorder and the HTTP API on a Unix
// socket.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/internal/activation"
	"skillfs/cmd/skillfs/internal/catalog"
	skfs "skillfs/fs"
)

// SocketName is the API socket inside the data directory.
const SocketName = "skillfs.sock"

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

	// Limits of the API's connections, on the socket and the TCP listener
	// alike; zero or less picks the Default… constant. The event streams
	// are bound by none of the timeouts while their client keeps reading.
	HeaderTimeout time.Duration // to read a request's header
	ReadTimeout   time.Duration // to read a request's body, from the end of its header
	WriteTimeout  time.Duration // for each write of a response to complete
	IdleTimeout   time.Duration // a kept-alive connection waiting for its next request
	// EventRetention and EventRetainCount bound the event log: events
	// older than EventRetention go, and of the rest all but the newest
	// EventRetainCount (zero or less: DefaultEventRetention,
	// DefaultEventRetainCount). A client resuming from a pruned id is told
	// to resync.
	EventRetention   time.Duration
	EventRetainCount int64

	// MaxConns and MaxSocketConns cap the open connections of the TCP
	// listener and of the Unix socket (see capListener), MaxStreams the
	// event streams of each (at most half its connections; one over is
	// answered 503 busy); zero or less picks the Default… constant. Both
	// caps are lowered to leave FDReserve descriptors of the open file
	// limit to the mount, the store and the index (fitConns).
	MaxConns       int
	MaxSocketConns int
	MaxStreams     int
	FDReserve      int
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
}

// Daemon is a running skillfs serve.
type Daemon struct {
	cat       *catalog.Catalog
	fs        *skfs.Server
	rec       activationRecorder
	audit     readAudit
	events    *hub
	metrics   *metrics
	diffs     *diffGate // what comparisons of versions hold together
	log       *slog.Logger
	mountRoot string
	listeners atomic.Pointer[[]*listenerLimits] // the API's, for the metrics
	readyBusy [3]atomic.Bool                    // readiness checks under way: mount, index, store
	watchBusy atomic.Bool                       // the watchdog's mount check under way (its own, so a probe never fails a ping)
	watchIdx  atomic.Bool                       // the watchdog's check of the index's files under way
	lastErr   *atomic.Pointer[LoggedError]
	agentPath string

	// This daemon as a host (see hosts.go): its id (the data directory's),
	// name, start time, the API address it advertises, and the grace after
	// which a host that stopped heartbeating is gone.
	host      string
	hostName  string
	started   time.Time
	api       string
	hostGrace time.Duration

	mu sync.Mutex // serialises session changes
	// followed is what the views of this host's sessions were last
	// reevaluated against (nil: nothing yet); guarded by mu.
	followed *readers
	// sessionsMatched is when the mount was last made to serve exactly what
	// the index says this host serves (see matchSessions); guarded by mu.
	sessionsMatched time.Time
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

// Run serves until ctx is cancelled, then unmounts everything, flushes
// activations and returns nil. It returns an error when the mount is lost
// from under it (a restart then mounts again and re-attaches the binds).
func Run(ctx context.Context, cat *catalog.Catalog, opts Options) error {
	opts.defaults(cat.Home())
	if opts.TCPAddr != "" && opts.Token == "" {
		return fmt.Errorf("a TCP listener needs a token")
	}
	// The last error logged is kept for `skillfs status`.
	lastErr := new(atomic.Pointer[LoggedError])
	log := slog.New(errTap{opts.Logger.Handler(), lastErr})
	release, err := catalog.LockServe(cat.Home())
	if err != nil {
		return err
	}
	defer release()
	if err := reconcile(ctx, cat, log); err != nil {
		return err
	}
	if opts.Setup != nil {
		if err := opts.Setup(ctx); err != nil {
			return err
		}
	}
	if cat.HostID() == "" {
		return fmt.Errorf("the data directory %s has no identity to serve as a host under", cat.Home())
	}
	d := &Daemon{cat: cat, events: newHub(cat.DB()), log: log, mountRoot: opts.MountRoot, agentPath: opts.AgentPath, lastErr: lastErr,
		host: cat.HostID(), hostName: opts.HostName, started: time.Now().UTC(), hostGrace: opts.HostGrace}
	d.metrics = newMetrics(d)
	d.diffs = newDiffGate(opts.DiffMemory, func() { d.metrics.refused(limitDiffs) })
	cat.LimitDiffs(d.diffs)
	closeJournal, err := d.startRecorder(ctx)
	if err != nil {
		return err
	}
	defer closeJournal()
	soft, hard, err := skfs.RaiseFileLimit()
	if err != nil {
		log.Warn("open file limit", "soft", soft, "hard", hard, "err", err)
	} else {
		log.Info("open file limit", "soft", soft, "hard", hard)
	}
	unmount, err := d.mount(opts)
	if err != nil {
		return err
	}
	defer unmount() // on early errors
	if err := d.register(ctx, ""); err != nil {
		return err
	}
	if n, err := cat.DB().AdoptSessions(ctx, d.host); err != nil {
		return err
	} else if n > 0 {
		log.Info("open sessions of no host taken over", "count", n)
	}
	if err := d.restore(ctx); err != nil {
		return err
	}
	if err := d.dropStale(ctx); err != nil {
		log.Warn("remove the binds of sessions no longer served here", "err", err)
	}
	d.rebind(ctx)
	api, err := d.listen(opts, soft)
	if err != nil {
		return err
	}
	if api.tcpAddr != "" {
		if err := d.register(ctx, api.tcpAddr); err != nil {
			api.shutdown()
			return err
		}
	}
	log.Info("serving as a host", "host", d.host, "name", d.hostName, "shared_index", cat.Shared(),
		"heartbeat_every", opts.HeartbeatEvery, "grace", opts.HostGrace, "reconcile_every", opts.ReconcileEvery)
	flushCtx, stopFlush := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() { defer close(flushed); d.flushActivations(flushCtx, opts.FlushEvery) }()
	audited := make(chan struct{})
	go func() { defer close(audited); d.flushReads(flushCtx, opts.FlushEvery) }()
	pruned := make(chan struct{})
	go func() { defer close(pruned); d.pruneEvents(flushCtx, opts.EventRetention, opts.EventRetainCount) }()
	api.ready(opts, d.fs.NumSessions())
	if err := notify("READY=1\nSTATUS=serving " + opts.MountRoot); err != nil {
		log.Warn("tell the service manager the daemon is ready", "err", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go d.watchdog(watchCtx, watchdogEvery, log)
	watch := opts.Watch
	if watch == nil {
		watch = cat.DB().Watch
	}
	wake := watch(watchCtx)
	followed := make(chan struct{})
	go func() { defer close(followed); d.follow(watchCtx, opts.ReconcileEvery, wake) }()
	beating := make(chan struct{})
	go func() { defer close(beating); d.heartbeat(watchCtx, opts.HeartbeatEvery) }()

	var lost error
	select {
	case <-ctx.Done():
	case <-d.fs.Done():
		// Serving a dead mount helps nobody: exit, so a restart mounts
		// again and re-attaches the binds.
		lost = fmt.Errorf("skill filesystem mount at %q lost", opts.MountRoot)
		log.Error("skill filesystem mount lost", "mountpoint", opts.MountRoot)
	}

	log.Info("shutting down")
	stopWatch()
	<-followed // no view changes under the shutdown
	<-beating
	if err := notify("STOPPING=1"); err != nil {
		log.Warn("tell the service manager the daemon is stopping", "err", err)
	}
	d.events.closeAll()
	api.shutdown()
	d.unbindAll(context.Background())
	// Opens keep arriving until the filesystem stops serving: flush after,
	// and fail any open still arriving (a sandbox may hold the connection).
	unmount()
	stopFlush()
	<-flushed
	<-pruned
	<-audited
	d.audit.Close() // a loss is logged; the activations below decide the exit
	if err := d.rec.Close(); err != nil {
		return errors.Join(lost, fmt.Errorf("flush activations: %w", err))
	}
	return lost
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
	opts.netDefaults()
}

// mount mounts the shared filesystem, clearing a dead mount a crash left,
// and returns the function that unmounts it (once).
func (d *Daemon) mount(opts Options) (unmount func(), err error) {
	if err := skfs.ClearStale(opts.MountRoot); err != nil {
		return nil, fmt.Errorf("prepare the mount root: %w", err)
	}
	if err := os.MkdirAll(opts.MountRoot, 0o755); err != nil {
		return nil, fmt.Errorf("create mount root: %w", err)
	}
	srv, err := skfs.Mount(opts.MountRoot, skfs.Options{Sink: d.rec, Logger: d.log, Debug: opts.Debug,
		Passthrough: opts.Passthrough, Opens: opts.CountOpens, UID: opts.UID, GID: opts.GID, RequestTimeout: opts.RequestTimeout,
		RequestTimeoutRecord: filepath.Join(d.cat.Home(), "fuse-timeout.restore"), AuditReads: true, Content: d.cat})
	if err != nil {
		return nil, fmt.Errorf("mount %q: %w", opts.MountRoot, err)
	}
	d.fs = srv
	d.audit = activation.NewReadAudit(d.cat.DB(), srv.TakeReads, d.log)
	d.log.Info("kernel caching", "entry_timeout", "1h", "attr_timeout", "1h", "keep_cache", true,
		"passthrough_supported", srv.PassthroughSupported(), "passthrough_enabled", opts.Passthrough && srv.PassthroughSupported())
	if opts.Passthrough && !srv.PassthroughSupported() {
		d.log.Warn("passthrough asked for, but the kernel does not offer it: reads go through the daemon")
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := srv.Unmount(); err != nil {
				d.log.Error("unmount", "mountpoint", opts.MountRoot, "err", err)
			}
		})
	}, nil
}

// apiServers are the API's listeners: the Unix socket, and optionally a
// loopback TCP address.
type apiServers struct {
	log     *slog.Logger
	sock    string
	tcpAddr string
	caps    connCaps
	unix    *http.Server
	tcp     *http.Server
	wg      sync.WaitGroup
}

// listen serves the API on the socket (created 0600) and, when asked, on
// loopback TCP behind the token, each with its caps of connections and
// event streams, fitted into the open file limit soft.
func (d *Daemon) listen(opts Options, soft uint64) (*apiServers, error) {
	a := &apiServers{log: d.log, sock: filepath.Join(d.cat.Home(), SocketName)}
	tcpConns := 0
	if opts.TCPAddr != "" {
		tcpConns = opts.MaxConns
	}
	a.caps = fitConns(soft, opts.FDReserve, opts.MaxSocketConns, tcpConns)
	if a.caps.lowered {
		d.log.Warn("the open file limit leaves the API fewer connections than asked for: raise the limit (LimitNOFILE=) or lower --fd-reserve",
			"open_file_limit", soft, "fd_reserve", opts.FDReserve, "socket_conns", a.caps.socket, "tcp_conns", a.caps.tcp,
			"asked_socket", opts.MaxSocketConns, "asked_tcp", tcpConns)
	}
	os.Remove(a.sock)
	old := unix.Umask(0o177) // the socket is created 0600, never wider even for a moment
	ln, err := net.Listen("unix", a.sock)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", a.sock, err)
	}
	a.unix = apiServer(d.routes(""), opts)
	a.serve(a.unix, d.capped(a.unix, ln, "socket", a.caps.socket, opts.MaxStreams))
	if opts.TCPAddr == "" {
		return a, nil
	}
	tl, err := net.Listen("tcp", opts.TCPAddr)
	if err == nil {
		if addr, ok := tl.Addr().(*net.TCPAddr); !ok || !addr.IP.IsLoopback() {
			tl.Close()
			err = fmt.Errorf("only loopback addresses are allowed")
		}
	}
	if err != nil {
		a.shutdown()
		return nil, fmt.Errorf("listen on %s: %w", opts.TCPAddr, err)
	}
	a.tcpAddr = tl.Addr().String() // the port chosen when asked for port 0
	a.tcp = apiServer(d.routes(opts.Token), opts)
	a.serve(a.tcp, d.capped(a.tcp, tl, "tcp", a.caps.tcp, opts.MaxStreams))
	return a, nil
}

// capped puts listener l of s behind its caps and keeps its limits for the
// metrics.
func (d *Daemon) capped(s *http.Server, l net.Listener, name string, conns, streams int) net.Listener {
	lim, capped := serveCapped(s, l, name, conns, streamsFor(conns, streams))
	var all []*listenerLimits
	if old := d.listeners.Load(); old != nil {
		all = append(all, *old...)
	}
	all = append(all, lim)
	d.listeners.Store(&all)
	return capped
}

func (a *apiServers) serve(s *http.Server, l net.Listener) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("api server", "err", err)
		}
	}()
}

// ready logs that the daemon serves and prints the readiness line.
func (a *apiServers) ready(opts Options, sessions int) {
	attrs := []any{"mount", opts.MountRoot, "socket", a.sock, "sessions", sessions,
		"socket_conns", a.caps.socket, "socket_streams", streamsFor(a.caps.socket, opts.MaxStreams), "diff_memory_mib", opts.DiffMemory >> 20}
	line := fmt.Sprintf("skillfs ready: mount %s socket %s", opts.MountRoot, a.sock)
	if a.tcpAddr != "" {
		attrs = append(attrs, "listen", a.tcpAddr, "max_conns", a.caps.tcp, "tcp_streams", streamsFor(a.caps.tcp, opts.MaxStreams))
		line += " listen " + a.tcpAddr
	}
	a.log.Info("serving", attrs...)
	if opts.Ready != nil {
		fmt.Fprintln(opts.Ready, line)
	}
}

// shutdown stops both servers, waits for them and removes the socket.
func (a *apiServers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range []*http.Server{a.unix, a.tcp} {
		if s != nil {
			s.Shutdown(ctx)
		}
	}
	a.wg.Wait()
	os.Remove(a.sock)
}
