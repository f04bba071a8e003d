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

// Run serves until ctx is cancelled, then unmounts everything, flushes
// activations and returns nil.
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
	d := &Daemon{cat: cat, events: newHub(), log: log, mountRoot: opts.MountRoot, agentPath: opts.AgentPath}
	d.rec = newRecorder(cat.DB(), d.events, log)

	if err := skfs.ClearStale(opts.MountRoot); err != nil {
		return fmt.Errorf("prepare the mount root: %w", err)
	}
	if err := os.MkdirAll(opts.MountRoot, 0o755); err != nil {
		return fmt.Errorf("create mount root: %w", err)
	}
	srv, err := skfs.Mount(opts.MountRoot, skfs.Options{Sink: d.rec, Logger: log, Debug: opts.Debug, Passthrough: opts.Passthrough, UID: opts.UID, GID: opts.GID})
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
	<-ctx.Done()

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
		return fmt.Errorf("flush activations: %w", err)
	}
	return nil
}
