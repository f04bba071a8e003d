package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/catalog/confine"
	"skillfs/cmd/skillfs/internal/daemon"
	"skillfs/skills"
)

// examples are the bundled skills `serve` registers as builtins.
//
//go:embed all:examples
var examples embed.FS

func (c *cli) serveCmd() *cobra.Command {
	cmd := leaf("serve", "run the daemon (one per data directory): the FUSE mount and the API", 0, 0)
	fs := cmd.Flags()
	mountRoot := fs.String("mount-root", "", "the `DIR` where the shared FUSE mount goes (default <home>/mnt)")
	agentPath := fs.String("agent-path", "/home/gem/skills", "the `PATH` where agents see their skills (used in prompts)")
	tcp := fs.String("listen", "", "also serve the API on this loopback TCP `ADDR` (needs --token-file)")
	tokenFile := fs.String("token-file", "", "the `FILE` holding the bearer token for --listen")
	withExamples := fs.Bool("examples", true, "register the bundled example skills as builtins")
	owner := fs.String("owner", "0:0", "`UID:GID` shown as the owner of every file in the mount")
	passthrough := fs.Bool("passthrough", false, "let the kernel read files straight from the store where it can (open handles then survive revocation; implies --count-opens)")
	countOpens := fs.Bool("count-opens", false, "have every open of a file reach the daemon, and count every open of SKILL.md as an activation (slower opens; by default the first read activates)")
	reqTimeout := fs.Duration("fuse-request-timeout", 60*time.Second, "abort the mount when the daemon leaves a FUSE request unanswered this long, on Linux 6.14 or later")
	eventRetention := fs.Duration("event-retention", daemon.DefaultEventRetention, "keep events to resume from (Last-Event-ID) this long")
	eventRetainCount := fs.Int64("event-retain-count", daemon.DefaultEventRetainCount, "and at most this many of the newest")
	hostName := fs.String("host-name", "", "the `NAME` this host registers under among the hosts of its catalog (default the machine's host name)")
	reconcileEvery := fs.Duration("reconcile-every", daemon.DefaultReconcileEvery, "look this often for catalog changes made elsewhere (another host, a command that did not tell the daemon) and apply them to the views served here")
	keeperSocket := fs.String("keeper", "", "mount through the keeper listening on this Unix socket `PATH` (skillfs keeper): the mount and every bind of it then outlive a restart or crash of serve, readers pausing meanwhile; SIGTERM leaves them to the keeper")
	var importRoots pathsFlag
	fs.Var(&importRoots, "import-root", "a `DIR` whose files sources named through the API may be, for admins (repeatable; also $"+importRootsEnv+", folders separated by ':'); "+
		"none by default: through the API only remote repositories and uploads are read; never in /proc, /sys or /dev")
	limits := addAPILimits(fs)
	quotas := addInstallQuotas(fs)
	caps := addSessionCaps(fs)
	config := fs.String("config", "", "read settings from this YAML `FILE` (default $"+configEnv+"): any flag of serve, and home, debug and log-format, by name; flags given on the command line win")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Every setting is checked before anything is touched: a start
		// that cannot serve must not create a data directory, install the
		// bundled skills or mount.
		if err := serveSettings(cmd, *config); err != nil {
			return err
		}
		if *tcp != "" && *tokenFile == "" {
			return usageErr(cmd, "--listen needs --token-file")
		}
		uid, gid, _ := parseOwner(*owner) // checked by serveSettings
		roots, err := openImportRoots(importRoots)
		if err != nil {
			return err
		}
		if err := preflight(); err != nil {
			return err
		}
		if *keeperSocket != "" {
			// Asked for a mount that outlives the daemon, and the keeper
			// does not answer: nothing is touched (the daemon checks again
			// once it holds the data directory).
			if _, err := daemon.DialKeeper(*keeperSocket); err != nil {
				return err
			}
		}
		var token string
		if *tcp != "" {
			t, err := readTokenFile(*tokenFile)
			if err != nil {
				return err
			}
			token = t
			if err := probeListen(*tcp); err != nil {
				return err
			}
		}
		home, err := c.homeDir()
		if err != nil {
			return err
		}
		log := c.logger()
		c.log = log
		if n, capped := capProcs(); capped {
			log.Info("threads running Go code capped; set GOMAXPROCS to choose", "gomaxprocs", n)
		}
		cat, err := c.open(home, catalog.Options{Logger: log, ImportRoots: roots})
		if err != nil {
			return err
		}
		defer cat.Close()
		if paths := roots.Paths(); len(paths) > 0 {
			log.Info("import roots: sources named through the API may read these folders", "roots", strings.Join(paths, ", "))
		}
		setup := func(context.Context) error {
			if !*withExamples {
				return nil
			}
			if err := c.syncExamples(cat); err != nil {
				return fmt.Errorf("register bundled skills: %w", err)
			}
			return nil
		}

		ctx, stopSignal, cancel := c.untilSignalled(log)
		defer cancel()
		opts := daemon.Options{
			MountRoot: *mountRoot, AgentPath: *agentPath, TCPAddr: *tcp, Token: token,
			Logger: log, Ready: c.stdout, Debug: c.debug, Passthrough: *passthrough, CountOpens: *countOpens, UID: uid, GID: gid,
			Setup:          setup,
			RequestTimeout: *reqTimeout,
			EventRetention: *eventRetention, EventRetainCount: *eventRetainCount,
			HostName: *hostName, ReconcileEvery: *reconcileEvery,
			Keeper: *keeperSocket,
			// SIGINT is a real stop even with a keeper: the mount and its
			// binds end (SIGTERM, the service manager's, hands them over).
			Handover: func() bool {
				sig := stopSignal()
				return sig == nil || sig != os.Interrupt
			},
		}
		limits.apply(&opts)
		quotas.apply(&opts)
		caps.apply(&opts)
		return daemon.Run(ctx, cat, opts)
	}
	return cmd
}

// untilSignalled is c.ctx until the first SIGINT or SIGTERM, which shuts
// down cleanly; a second one forces the exit. stopSignal answers the signal
// that stopped it (nil for a stop of another cause), once that is known.
// SIGHUP (a closed terminal, a log rotation) must not take the mounts down:
// the daemon logs to stderr, and its settings (flags and --config) hold for
// its life, so there is nothing to reopen or reload; the signal is logged
// and otherwise ignored.
func (c *cli) untilSignalled(log *slog.Logger) (ctx context.Context, stopSignal func() os.Signal, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-hups:
				log.Info("SIGHUP ignored: nothing to reload (logs go to stderr; settings are read at start: restart to change them)")
			case <-ctx.Done():
				return
			}
		}
	}()
	decided := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-ctx.Done():
			// c.ctx ends at the same signal (main's NotifyContext), and may
			// be seen ended before the signal reaches sigs: which signal it
			// was decides whether the mount is handed over or ended.
			if c.ctx.Err() != nil && context.Cause(c.ctx) != c.ctx.Err() {
				select {
				case sig = <-sigs:
				case <-time.After(time.Second):
				}
			}
		}
		if sig != nil {
			c.stopSignal.Store(&sig)
		}
		close(decided)
		cancel()
		if sig == nil {
			return
		}
		<-sigs
		fmt.Fprintln(c.stderr, "skillfs: second signal: exiting now")
		os.Exit(exitError)
	}()
	stopSignal = func() os.Signal {
		if ctx.Err() == nil {
			return nil // not stopped by a signal (yet)
		}
		<-decided // at most a second after ctx ended
		if sig := c.stopSignal.Load(); sig != nil {
			return *sig
		}
		return nil
	}
	return ctx, stopSignal, func() {
		signal.Stop(sigs)
		signal.Stop(hups)
		cancel()
	}
}

// importRootsEnv names the import roots of serve when neither --import-root
// nor the configuration file gives one: folders separated by ':', as in
// $PATH.
const importRootsEnv = "SKILLFS_IMPORT_ROOTS"

// openImportRoots checks the import roots given (else those of
// $SKILLFS_IMPORT_ROOTS): each an existing folder, none in /proc, /sys or
// /dev. A bad one is a usage error (exit 2) naming it, before anything is
// touched.
func openImportRoots(given []string) (*confine.ImportRoots, error) {
	paths, from := given, "--import-root"
	if len(paths) == 0 {
		for _, p := range filepath.SplitList(os.Getenv(importRootsEnv)) {
			if p != "" {
				paths = append(paths, p)
			}
		}
		from = "$" + importRootsEnv
	}
	roots, err := confine.OpenImportRoots(paths)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", from, err, errUsage)
	}
	return roots, nil
}

// pathsFlag collects a repeatable flag whose values are paths: one per
// use, commas and all (a folder's name may hold one). In the
// configuration file it is a list.
type pathsFlag []string

var _ pflag.SliceValue = (*pathsFlag)(nil)

func (p *pathsFlag) String() string { return strings.Join(*p, ",") }
func (p *pathsFlag) Type() string   { return "DIR" }
func (p *pathsFlag) Set(v string) error {
	*p = append(*p, v)
	return nil
}
func (p *pathsFlag) Append(v string) error     { return p.Set(v) }
func (p *pathsFlag) Replace(vs []string) error { *p = append(pathsFlag{}, vs...); return nil }
func (p *pathsFlag) GetSlice() []string        { return append([]string{}, *p...) }

// preflight checks what serving needs before the data directory is
// touched: a start that cannot mount must not create or open one.
func preflight() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("serve must run as root (it runs as uid %d): it mounts its FUSE filesystem itself and binds sessions into sandboxes' mount namespaces", uid)
	}
	var st unix.Stat_t
	if err := unix.Stat(fuseDevice, &st); err != nil {
		return fmt.Errorf("serve needs the FUSE device %s (load the fuse module; in a container, pass the device in): %w", fuseDevice, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(uint64(st.Rdev)) != 10 || unix.Minor(uint64(st.Rdev)) != 229 {
		return fmt.Errorf("serve needs the FUSE device: %s is not it (want character device 10:229)", fuseDevice)
	}
	f, err := os.OpenFile(fuseDevice, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("serve needs the FUSE device: open %s: %w (in a container, allow the device)", fuseDevice, err)
	}
	f.Close()
	return nil
}

// probeListen binds addr and lets it go, so that an address serve cannot
// listen on (one in use, one this machine does not have) stops it before it
// touches anything; the daemon binds it again once it serves.
func probeListen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	return l.Close()
}

// fuseDevice is the kernel's FUSE device.
const fuseDevice = "/dev/fuse"

// maxProcs caps the daemon's GOMAXPROCS when the environment does not set
// it. The FUSE server runs one reader per P (up to 16), each holding an OS
// thread while it waits for the kernel, and the index one connection per P:
// on a host of many cores that is dozens of threads for a daemon whose
// requests are short and mostly answered by the kernel's caches.
const maxProcs = 4

// capProcs applies maxProcs and returns the GOMAXPROCS in force and whether
// it was lowered.
func capProcs() (int, bool) {
	n := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || n <= maxProcs {
		return n, false
	}
	runtime.GOMAXPROCS(maxProcs)
	return maxProcs, true
}

// maxTokenFileBytes bounds the token file; a token is a line, not a file.
const maxTokenFileBytes = 4 << 10

// readTokenFile reads the bearer token from path, which must be a regular
// file of the user serve runs as that only they can read or write: anyone
// else who can read it holds the API, and anyone who can write it (its
// owner, who can also chmod it) chooses the token. The checks are made on
// the open descriptor, so the file checked is the file read; the open does
// not block on a FIFO, and at most maxTokenFileBytes are read.
func readTokenFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return "", fmt.Errorf("token file %q does not exist: %w", path, skills.ErrNotFound)
		}
		return "", fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %q is not a regular file (%v): %w", path, fi.Mode().Type(), skills.ErrSpecialFile)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("token file %q: no owner to check", path)
	}
	if euid := os.Geteuid(); int64(st.Uid) != int64(euid) {
		return "", fmt.Errorf("token file %q is owned by uid %d, not by uid %d that serve runs as: its owner could choose the token; run chown %d %q: %w",
			path, st.Uid, euid, euid, path, skills.ErrInvalid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %q has mode %04o: group and others must have no access; run chmod 600 %q: %w",
			path, perm, path, skills.ErrInvalid)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read token file %q: %w", path, err)
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("token file %q is larger than %d bytes: a token is one line: %w", path, maxTokenFileBytes, skills.ErrLimit)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %q is empty: %w", path, skills.ErrInvalid)
	}
	return token, nil
}

// syncExamples installs (or re-syncs) the bundled skills as builtins. Embedded
// files carry no modes, so a file starting with "#!" is made executable.
func (c *cli) syncExamples(cat *catalog.Catalog) error {
	dir, err := os.MkdirTemp("", "skillfs-examples-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	err = iofs.WalkDir(examples, "examples", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := examples.ReadFile(p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(string(data), "#!") {
			mode = 0o755
		}
		return os.WriteFile(dst, data, mode)
	})
	if err != nil {
		return err
	}
	res, err := cat.Import(c.ctx, catalog.ImportRequest{
		Source: filepath.Join(dir, "examples"), All: true, Builtin: true,
		As: catalog.Operator, Origin: "builtin:examples",
	})
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("%s: %s", res.Failed[0].Source, res.Failed[0].Error)
	}
	return nil
}
