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
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/internal/catalog"
	skfs "skillfs/fs"
	"skillfs/skills"
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
	// MaxConns caps the open TCP connections; further clients wait in the
	// kernel's accept queue. The Unix socket is not capped: only root can
	// reach it.
	MaxConns int
}

// Daemon is a running skillfs serve.
type Daemon struct {
	cat       *catalog.Catalog
	fs        *skfs.Server
	rec       *recorder
	events    *hub
	log       *slog.Logger
	mountRoot string
	agentPath string

	mu sync.Mutex // serialises session changes
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
// activations and returns nil. If the mount ends first (its connection
// aborted, or unmounted from outside) it shuts down the same way and
// returns an error.
func Run(ctx context.Context, cat *catalog.Catalog, opts Options) error {
	if opts.MountRoot == "" {
		opts.MountRoot = filepath.Join(cat.Home(), "mnt")
	}
	if opts.AgentPath == "" {
		opts.AgentPath = "/home/gem/skills"
	}
	if opts.FlushEvery == 0 {
		opts.FlushEvery = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.netDefaults()
	if opts.TCPAddr != "" && opts.Token == "" {
		return fmt.Errorf("a TCP listener needs a token")
	}
	log := opts.Logger
	// One daemon per data directory: a second one would steal the socket
	// and re-point the binds while the first still serves.
	lock, err := os.OpenFile(filepath.Join(cat.Home(), "serve.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open serve lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("another skillfs serve is running on %q: %w", cat.Home(), skills.ErrExists)
	}
	if err := reconcile(ctx, cat, log); err != nil {
		return err
	}
	if opts.Setup != nil {
		if err := opts.Setup(ctx); err != nil {
			return err
		}
	}
	d := &Daemon{cat: cat, events: newHub(), log: log, mountRoot: opts.MountRoot, agentPath: opts.AgentPath}
	d.rec = newRecorder(cat.DB(), d.events, log)
	spill, spilled, reserveErr, err := openSpill(filepath.Join(cat.Home(), SpillName))
	if err != nil {
		return err
	}
	defer spill.close()
	if reserveErr != nil {
		log.Warn("activation spill not reserved: opens the index cannot take at shutdown may be lost on a full disk", "err", reserveErr)
	}
	d.rec.useSpill(ctx, spill, spilled)
	if soft, hard, err := skfs.RaiseFileLimit(); err != nil {
		log.Warn("open file limit", "soft", soft, "hard", hard, "err", err)
	} else {
		log.Info("open file limit", "soft", soft, "hard", hard)
	}

	if err := skfs.ClearStale(opts.MountRoot); err != nil {
		return fmt.Errorf("prepare the mount root: %w", err)
	}
	if err := os.MkdirAll(opts.MountRoot, 0o755); err != nil {
		return fmt.Errorf("create mount root: %w", err)
	}
	srv, err := skfs.Mount(opts.MountRoot, skfs.Options{Sink: d.rec, Logger: log, Debug: opts.Debug, Passthrough: opts.Passthrough, UID: opts.UID, GID: opts.GID, RequestTimeout: opts.RequestTimeout})
	if err != nil {
		return fmt.Errorf("mount %q: %w", opts.MountRoot, err)
	}
	d.fs = srv
	log.Info("kernel caching", "entry_timeout", "1h", "attr_timeout", "1h", "keep_cache", true,
		"passthrough_supported", srv.PassthroughSupported(), "passthrough_enabled", opts.Passthrough && srv.PassthroughSupported())
	if opts.Passthrough && !srv.PassthroughSupported() {
		log.Warn("passthrough asked for, but the kernel does not offer it: reads go through the daemon")
	}
	unmounted := false
	unmount := func() {
		if unmounted {
			return
		}
		unmounted = true
		if err := srv.Unmount(); err != nil {
			log.Error("unmount", "mountpoint", opts.MountRoot, "err", err)
		}
	}
	defer unmount() // on early errors
	if err := d.restore(ctx); err != nil {
		return err
	}
	d.rebind(ctx)

	sock := filepath.Join(cat.Home(), SocketName)
	os.Remove(sock)
	old := unix.Umask(0o177) // the socket is created 0600, never wider even for a moment
	ln, err := net.Listen("unix", sock)
	unix.Umask(old)
	if err != nil {
		return fmt.Errorf("listen on %q: %w", sock, err)
	}
	defer os.Remove(sock)
	httpSrv := apiServer(d.routes(""), opts)
	var wg sync.WaitGroup
	serve := func(s *http.Server, l net.Listener) {
		defer wg.Done()
		if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("api server", "err", err)
		}
	}
	wg.Add(1)
	go serve(httpSrv, ln)
	var tcpSrv *http.Server
	tcpAddr := ""
	if opts.TCPAddr != "" {
		tl, err := net.Listen("tcp", opts.TCPAddr)
		if err != nil {
			httpSrv.Close()
			return fmt.Errorf("listen on %s: %w", opts.TCPAddr, err)
		}
		if a, ok := tl.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			tl.Close()
			httpSrv.Close()
			return fmt.Errorf("listen on %s: only loopback addresses are allowed", opts.TCPAddr)
		}
		tcpAddr = tl.Addr().String() // the port chosen when asked for port 0
		tcpSrv = apiServer(d.routes(opts.Token), opts)
		wg.Add(1)
		go serve(tcpSrv, limitListener(tl, opts.MaxConns))
	}

	flushCtx, stopFlush := context.WithCancel(context.Background())
	wg.Add(1)
	go func() { defer wg.Done(); d.rec.run(flushCtx, opts.FlushEvery) }()

	attrs := []any{"mount", opts.MountRoot, "socket", sock, "sessions", len(srv.Sessions())}
	ready := fmt.Sprintf("skillfs ready: mount %s socket %s", opts.MountRoot, sock)
	if tcpAddr != "" {
		attrs = append(attrs, "listen", tcpAddr, "max_conns", opts.MaxConns)
		ready += " listen " + tcpAddr
	}
	log.Info("serving", attrs...)
	if opts.Ready != nil {
		fmt.Fprintln(opts.Ready, ready)
	}
	var lost error
	select {
	case <-ctx.Done():
	case <-srv.Done():
		// Serving a dead mount helps nobody: exit, so a restart mounts
		// again and re-attaches the binds.
		lost = fmt.Errorf("skill filesystem mount at %q lost", opts.MountRoot)
		log.Error("skill filesystem mount lost", "mountpoint", opts.MountRoot)
	}

	log.Info("shutting down")
	d.events.closeAll()
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	httpSrv.Shutdown(shutCtx)
	if tcpSrv != nil {
		tcpSrv.Shutdown(shutCtx)
	}
	d.unbindAll(context.Background())
	// Opens keep arriving until the filesystem stops serving: flush after,
	// and fail any open still arriving (a sandbox may hold the connection).
	unmount()
	stopFlush()
	wg.Wait()
	if err := d.rec.close(); err != nil {
		return errors.Join(lost, fmt.Errorf("flush activations: %w", err))
	}
	return lost
}
