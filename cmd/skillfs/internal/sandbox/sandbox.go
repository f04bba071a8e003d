// Package sandbox reads a file tree, a ZIP or a SKILL.md at a path as a
// sandboxed process sees it, and copies it into the daemon's space: the path
// is resolved in the process's mount namespace and under its root, and every
// file is opened with the process's own credentials (its filesystem uid and
// gid and its groups, no capabilities), never root's. What the process
// cannot read is refused; what it cannot see does not exist.
//
// The reading runs on a thread of its own, locked to its goroutine and never
// unlocked, so it ends with it: that thread leaves the daemon's filesystem
// attributes (unshare CLONE_FS), joins the process's mount namespace
// (setns), and takes the process's credentials with raw system calls, which
// change that thread alone (setgroups, setfsgid, setfsuid, capset; the
// real and effective ids stay the daemon's, so that no process of the
// sandbox's uid may signal or trace the thread). Paths resolve with openat2
// RESOLVE_IN_ROOT under a descriptor of the process's root, with no magic
// links (/proc/PID/root and /proc/PID/fd are refused),
// so neither ".." nor an absolute symlink nor /proc leads outside what the
// process sees. Below the path named, nothing is followed: every entry is
// looked at without following it, opened with O_NOFOLLOW and O_NONBLOCK
// and checked again on the descriptor (regular files and directories only;
// a FIFO, device or socket is refused and never opened), and every
// descriptor, the path named's first, is asked which filesystem it is on:
// nothing on one of the kernel's own (proc, sysfs, debugfs, securityfs,
// cgroup and the like, see kernelFS) is read, since the reading thread is
// the daemon's (a /proc that shows the daemon's pid namespace has the
// daemon at /proc/self). Symlinks are
// copied as links, for the import to resolve inside the copy as it does in
// every source (a link leaving the folder is left out with a warning).
//
// The descriptors are handed to a goroutine of the daemon's that copies
// them, counting the bytes as they are read against the import limits (a
// file's declared size is checked first: a 2 GiB sparse file is refused
// before a byte of it is read).
//
// Whom is read as is checked first (Creds.Check): never a process whose
// uids or gids differ among themselves (a setuid program), nor one running
// as root unless the caller allows it. The caller bounds how many reads
// may be outstanding (Request.Done tells when one truly ended: a read of
// a filesystem that hangs outlives the call).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"skillfs/fs/bind"
	"skillfs/skills"
)

// Kinds of what a path names.
const (
	KindFolder   = "folder"   // a skill folder (or a folder of skills)
	KindZip      = "zip"      // a ZIP archive
	KindManifest = "manifest" // a lone SKILL.md
)

// Copy is what Read copied.
type Copy struct {
	Kind string // KindFolder, KindZip or KindManifest
	// Path is the copy in the destination: the folder, or the file (named
	// upload.zip or SKILL.md).
	Path string
	// Name is the base name of the path in the sandbox.
	Name     string
	Files    int
	Bytes    int64
	Warnings []string // entries left out
}

// Request says what to read, and as whom.
type Request struct {
	PID int // the sandboxed process
	// NS, when set, is the mount namespace the process must be in
	// ("mnt:[inode]", as skills.Bind.NS records it): a process that is in
	// another (its pid reused) is not the sandbox's.
	NS   string
	Path string // absolute, as the process sees it
	// Dst is an empty directory of the daemon's the copy goes into.
	Dst    string
	Limits skills.Limits
	// AllowRoot reads as a process whose filesystem uid is 0 (root's);
	// without it, such a process is refused.
	AllowRoot bool
	// Done, when set, is called once, when nothing of the read runs any
	// more: at once when Read returns before it started reading, else
	// when both its reading thread and its copier returned, which may be
	// long after Read returned (a filesystem of the sandbox that hangs).
	Done func()
}

// junk are names an import leaves out; they are not read.
var junk = []string{".git", ".DS_Store", "__MACOSX"}

// Read copies what r.Path names in process r.PID's view into r.Dst (see the
// package's doc). A path that is relative, names nothing the process can
// see, or that the process may not read is an error naming it; so is a
// special file anywhere in a folder, and a limit hit. On any error r.Dst
// holds nothing the caller should keep. When ctx ends before the reading
// does (a filesystem in the sandbox that hangs), Read returns; the thread
// reading stays until its call returns and writes nothing more.
func Read(ctx context.Context, r Request) (*Copy, error) {
	done := r.Done
	if done == nil {
		done = func() {}
	}
	if !path.IsAbs(r.Path) {
		done()
		return nil, fmt.Errorf("path %q: give it absolute, as the sandbox sees it: %w", r.Path, skills.ErrInvalid)
	}
	if strings.IndexByte(r.Path, 0) >= 0 {
		done()
		return nil, fmt.Errorf("path %q: %w", r.Path, skills.ErrInvalid)
	}
	p, err := openProcess(r.PID, r.NS, r.AllowRoot)
	if err != nil {
		done()
		return nil, err
	}
	// The thread and the copier each end the read's count when they return.
	var running atomic.Int32
	running.Store(2)
	ended := func() {
		if running.Add(-1) == 0 {
			done()
		}
	}
	lim := r.Limits.WithDefaults()
	w := &writer{dst: r.Dst, budget: skills.NewBudget(lim), display: r.Path}
	items := make(chan item)
	stop := make(chan struct{})
	walked := make(chan error, 1)
	go bind.OwnThread(func() {
		defer ended()
		defer p.close()
		defer close(items)
		walked <- p.walk(r.Path, lim, items, stop)
	})
	copied := make(chan error, 1)
	go func() {
		defer ended()
		copied <- w.run(items)
	}()
	var werr error
	select {
	case werr = <-copied:
	case <-ctx.Done():
		w.abandon()
		close(stop)
		return nil, fmt.Errorf("read %q in the sandbox: %w", r.Path, ctx.Err())
	}
	close(stop)
	if werr == nil {
		werr = <-walked // the walk's own error, once it sent everything
	}
	if werr != nil {
		return nil, werr
	}
	w.res.Name = path.Base(path.Clean(r.Path))
	return &w.res, nil
}

// process is a sandboxed process, held by descriptors opened while it was
// known to be that process.
type process struct {
	pid    int
	nsfd   int // its mount namespace
	rootfd int // its root directory (O_PATH)
	creds  Creds
}

func (p *process) close() {
	unix.Close(p.nsfd)
	unix.Close(p.rootfd)
}

// openProcess opens what reading as process pid needs: its mount
// namespace, its root and its credentials, and checks after that the
// process is still the one the pidfd names (its pid not reused meanwhile)
// and in the namespace ns, when given. A process whose credentials are not
// one user's, or root's unless allowRoot, is refused (Creds.Check).
func openProcess(pid int, ns string, allowRoot bool) (*process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("process %d: no sandbox to read in: %w", pid, skills.ErrInvalid)
	}
	gone := func(err error) error {
		if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("process %d of the sandbox is gone: %w", pid, skills.ErrNotFound)
		}
		return fmt.Errorf("process %d of the sandbox: %w", pid, err)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, gone(err)
	}
	defer unix.Close(pidfd)
	proc := "/proc/" + strconv.Itoa(pid)
	nsfd, err := unix.Open(proc+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, gone(err)
	}
	p := &process{pid: pid, nsfd: nsfd, rootfd: -1}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		return nil, gone(err)
	}
	if ns != "" && ns != fmt.Sprintf("mnt:[%d]", st.Ino) {
		return nil, fmt.Errorf("process %d is in another mount namespace than the sandbox's: %w", pid, skills.ErrNotFound)
	}
	if p.rootfd, err = unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, gone(err)
	}
	status, err := skills.ReadRegular(proc+"/status", "process status", 1<<20, false)
	if err != nil {
		return nil, gone(err)
	}
	if p.creds, err = ParseStatus(status); err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	if err := p.creds.Check(pid, allowRoot); err != nil {
		return nil, err
	}
	// Still alive: the namespace, root and status opened were its own.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return nil, gone(err)
	}
	ok = true
	return p, nil
}

// become makes the calling thread, locked to its goroutine, one of the
// process's: in its mount namespace, with its credentials and no
// capabilities. Raw system calls: the libc and Go wrappers change every
// thread of the daemon.
func (p *process) become() error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare filesystem attributes: %w", err)
	}
	if err := unix.Setns(p.nsfd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("join the mount namespace of process %d: %w", p.pid, err)
	}
	groups := make([]uint32, len(p.creds.Groups))
	for i, g := range p.creds.Groups {
		groups[i] = uint32(g)
	}
	var gp uintptr
	if len(groups) > 0 {
		gp = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), gp, 0); e != 0 {
		return fmt.Errorf("take the groups of process %d: %w", p.pid, e)
	}
	// The filesystem ids only: what files are checked against. The real,
	// effective and saved ids stay the daemon's, so that no process of
	// that uid may signal or trace the thread (which shares the daemon's
	// memory) while it reads.
	if err := setfsid(unix.SYS_SETFSGID, p.creds.GID); err != nil {
		return fmt.Errorf("take the gid of process %d: %w", p.pid, err)
	}
	if err := setfsid(unix.SYS_SETFSUID, p.creds.UID); err != nil {
		return fmt.Errorf("take the uid of process %d: %w", p.pid, err)
	}
	// No capabilities at all, DAC_OVERRIDE and DAC_READ_SEARCH among them,
	// which a filesystem id of 0 would keep (capset changes the calling
	// thread alone).
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// setfsid sets the calling thread's filesystem uid or gid (trap
// SYS_SETFSUID or SYS_SETFSGID) and checks it took: the call answers the
// id before, and no error.
func setfsid(trap uintptr, id int) error {
	unix.RawSyscall(trap, uintptr(id), 0, 0)
	now, _, _ := unix.RawSyscall(trap, ^uintptr(0), 0, 0) // -1: change nothing, answer the id
	if int(uint32(now)) != id {
		return fmt.Errorf("the filesystem id is %d, not %d: %w", uint32(now), id, unix.EPERM)
	}
	return nil
}

// item is one entry of the tree, handed from the reading thread to the
// writer: a directory, a regular file (its descriptor, which the writer
// closes) or a symlink (its target).
type item struct {
	rel  string // slash path below the root; "." for the root
	kind string // "dir", "file", "link"
	file *os.File
	exec bool   // a file with its owner's execute bit
	link string // a link's target
	warn string // nothing to copy: an entry left out
	top  string // the root is a file: KindZip or KindManifest
}

// walk runs on a thread of its own (bind.OwnThread) that becomes one of
// the process's: it resolves at, and sends what it
// finds to items until stop closes.
func (p *process) walk(at string, lim skills.Limits, items chan<- item, stop <-chan struct{}) error {
	if err := p.become(); err != nil {
		return err
	}
	send := func(it item) bool {
		select {
		case items <- it:
			return true
		case <-stop:
			if it.file != nil {
				it.file.Close()
			}
			return false
		}
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	pfd, err := openat2(p.rootfd, at, how)
	if err != nil {
		return pathError(at, err)
	}
	var st unix.Stat_t
	err = kernelFSCheck(pfd, at)
	if err == nil {
		err = unix.Fstat(pfd, &st)
		if err != nil {
			err = pathError(at, err)
		}
	}
	unix.Close(pfd)
	if err != nil {
		return err
	}
	kind := st.Mode & unix.S_IFMT
	if kind != unix.S_IFDIR && kind != unix.S_IFREG {
		return &skills.SpecialFileError{Path: at, Kind: fileKind(st.Mode)}
	}
	top := ""
	if kind == unix.S_IFREG {
		if top = fileKindOf(at); top == "" {
			return fmt.Errorf("%q is neither a folder, a ZIP (.zip) nor a SKILL.md: %w", at, skills.ErrInvalid)
		}
		if err := topSize(at, top, st.Size, lim); err != nil {
			return err // the size it declares: not a byte read
		}
	}
	// Opened again to read, and checked to be what was looked at.
	flags := uint64(unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC)
	if top == "" {
		flags |= unix.O_DIRECTORY
	}
	fd, err := openat2(p.rootfd, at, &unix.OpenHow{Flags: flags, Resolve: how.Resolve})
	if err != nil {
		return pathError(at, err)
	}
	f, err := checked(fd, at, st)
	if err != nil {
		return err
	}
	if top != "" {
		send(item{rel: ".", kind: "file", file: f, top: top})
		return nil
	}
	w := &walker{send: send, budget: skills.NewBudget(lim), at: at}
	defer f.Close()
	if !send(item{rel: ".", kind: "dir"}) {
		return nil
	}
	return w.dir(f, ".")
}

// topSize checks the size a lone file declares against its limit: the
// total for a ZIP, the manifest's for a SKILL.md.
func topSize(at, top string, size int64, lim skills.Limits) error {
	if top == KindZip && size > lim.MaxTotalBytes {
		return &skills.LimitError{Limit: skills.LimitTotalBytes, Value: size, Max: lim.MaxTotalBytes, Path: at}
	}
	if top == KindManifest && size > lim.MaxManifest {
		return &skills.LimitError{Limit: skills.LimitManifest, Value: size, Max: lim.MaxManifest, Path: at}
	}
	return nil
}

// checked wraps fd as a file once fstat says it is the entry st described
// (same device, inode and type), on no filesystem of the kernel's.
func checked(fd int, display string, st unix.Stat_t) (*os.File, error) {
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		unix.Close(fd)
		return nil, pathError(display, err)
	}
	if now.Dev != st.Dev || now.Ino != st.Ino || now.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		unix.Close(fd)
		return nil, fmt.Errorf("%q changed while it was read: %w", display, skills.ErrInvalid)
	}
	if err := kernelFSCheck(fd, display); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), display), nil
}

// kernelFS are the filesystems of the kernel's own interfaces, by their
// magic numbers (statfs f_type): none holds a skill, and what they show
// depends on who reads (the reading thread is the daemon's: /proc/self is
// the daemon, its memory map and descriptors among it), so nothing on them
// is read, not even opened past a look at its filesystem.
var kernelFS = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "proc",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.SELINUX_MAGIC:       "selinuxfs",
	unix.SMACK_MAGIC:         "smackfs",
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.BPF_FS_MAGIC:        "bpf",
	unix.PSTOREFS_MAGIC:      "pstore",
	unix.EFIVARFS_MAGIC:      "efivarfs",
	unix.BINFMTFS_MAGIC:      "binfmt_misc",
	unix.NSFS_MAGIC:          "nsfs",
	0x62656570:               "configfs",
	0x65735543:               "fusectl",
}

// kernelFSCheck refuses fd (which display names) when it is on one of
// the kernel's filesystems (kernelFS), with ErrUnsafePath.
func kernelFSCheck(fd int, display string) error {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return pathError(display, err)
	}
	if name, ok := kernelFS[int64(sfs.Type)]; ok {
		return fmt.Errorf("%q is on %s, a filesystem of the kernel's, not a file of the sandbox's: nothing there is read: %w",
			display, name, skills.ErrUnsafePath)
	}
	return nil
}

// fileKindOf is what a file at path is by its name: KindZip, KindManifest,
// or "".
func fileKindOf(p string) string {
	base := path.Base(p)
	switch {
	case strings.EqualFold(path.Ext(base), ".zip"):
		return KindZip
	case base == skills.ManifestName || base == "skill.md":
		return KindManifest
	}
	return ""
}

// walker walks a folder on the process's thread.
type walker struct {
	send   func(item) bool
	budget *skills.Budget
	at     string // the folder as the sandbox names it
}

// display names rel in messages: the path in the sandbox.
func (w *walker) display(rel string) string { return path.Join(w.at, rel) }

// dir sends every entry of the open directory d (at rel), depth first, in
// the order of their names. It closes nothing it did not open.
func (w *walker) dir(d *os.File, rel string) error {
	names, err := readNames(d, w.budget.Limits.MaxEntries)
	if err != nil {
		return pathError(w.display(rel), err)
	}
	dfd := int(d.Fd())
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		return pathError(w.display(rel), err)
	}
	for _, name := range names {
		crel := path.Join(rel, name)
		if isJunk(name) {
			if !w.send(item{rel: crel, warn: fmt.Sprintf("%s: left out", crel)}) {
				return nil
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return pathError(w.display(crel), err)
		}
		if st.Dev != dst.Dev && st.Mode&unix.S_IFMT != unix.S_IFLNK {
			// A filesystem mounted here: looked at before anything of
			// it is opened to read.
			if err := w.mountCheck(dfd, name, crel); err != nil {
				return err
			}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if err := w.budget.File(crel); err != nil {
				return err
			}
			target, err := readlinkat(dfd, name)
			if err != nil {
				return pathError(w.display(crel), err)
			}
			if !w.send(item{rel: crel, kind: "link", link: w.relink(crel, target)}) {
				return nil
			}
		case unix.S_IFREG:
			if err := w.budget.File(crel); err != nil {
				return err
			}
			if err := w.budget.Size(crel, st.Size); err != nil {
				return err // the size it declares: not a byte read
			}
			f, err := w.open(dfd, name, crel, st, unix.O_NOCTTY)
			if err != nil {
				return err
			}
			if !w.send(item{rel: crel, kind: "file", file: f, exec: st.Mode&0o100 != 0}) {
				return nil
			}
		case unix.S_IFDIR:
			if err := w.budget.Dir(crel); err != nil {
				return err
			}
			sub, err := w.open(dfd, name, crel, st, unix.O_DIRECTORY)
			if err != nil {
				return err
			}
			if !w.send(item{rel: crel, kind: "dir"}) {
				sub.Close()
				return nil
			}
			err = w.dir(sub, crel)
			sub.Close()
			if err != nil {
				return err
			}
		default:
			return &skills.SpecialFileError{Path: crel, Kind: fileKind(st.Mode)}
		}
	}
	return nil
}

// mountCheck refuses the entry name of the directory dfd (at crel), the
// root of another filesystem, when that is one of the kernel's: opened
// with O_PATH, which opens nothing of the file itself.
func (w *walker) mountCheck(dfd int, name, crel string) error {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathError(w.display(crel), err)
	}
	defer unix.Close(fd)
	return kernelFSCheck(fd, w.display(crel))
}

// open opens the entry name of the directory dfd (at crel), which st
// describes, without following it or waiting (a FIFO swapped in is not
// waited on), and checks on the descriptor that it is still that entry.
func (w *walker) open(dfd int, name, crel string, st unix.Stat_t, flags int) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, pathError(w.display(crel), err)
	}
	return checked(fd, w.display(crel), st)
}

// relink is a link's target as the copy keeps it: an absolute target inside
// the folder read (as the sandbox names it) made relative, so that the
// import finds it inside the copy; any other target as it is written (the
// import leaves out one that leads outside).
func (w *walker) relink(rel, target string) string {
	if !path.IsAbs(target) {
		return target
	}
	root := path.Clean(w.at)
	t := path.Clean(target)
	if t != root && !strings.HasPrefix(t, root+"/") {
		return target
	}
	r, err := filepath.Rel(path.Join(root, path.Dir(rel)), t)
	if err != nil {
		return target
	}
	return filepath.ToSlash(r)
}

func isJunk(name string) bool {
	for _, j := range junk {
		if name == j {
			return true
		}
	}
	return false
}

// readNames reads the names of an open directory, at most max of them,
// sorted.
func readNames(d *os.File, max int) ([]string, error) {
	var names []string
	for {
		batch, err := d.Readdirnames(256)
		names = append(names, batch...)
		if len(names) > max {
			return nil, &skills.LimitError{Limit: skills.LimitEntries, Value: int64(len(names)), Max: int64(max), Path: d.Name()}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if len(batch) == 0 {
			break
		}
	}
	slices.Sort(names)
	return names, nil
}

// readlinkat reads a link's target, at most a path's length.
func readlinkat(dfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax+1)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	if n > unix.PathMax {
		return "", fmt.Errorf("link target longer than %d bytes: %w", unix.PathMax, skills.ErrInvalid)
	}
	return string(buf[:n]), nil
}

// openat2 is unix.Openat2, retried while the kernel asks (EAGAIN: a rename
// raced the resolution).
func openat2(dirfd int, p string, how *unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, p, how)
		if err == unix.EAGAIN && i < 16 {
			continue
		}
		return fd, err
	}
}

// pathError names an error of the sandbox's view of p: what it cannot see
// does not exist (ErrNotFound), what it may not read is ErrPermission, a
// magic link or a link loop is an unsafe path.
func pathError(p string, err error) error {
	var le *skills.LimitError
	if errors.As(err, &le) {
		return err
	}
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%q does not exist in the sandbox: %w", p, skills.ErrNotFound)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%q: the sandbox may not read it: %w", p, skills.ErrPermission)
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%q leads through a link the sandbox's view does not allow: %w", p, skills.ErrUnsafePath)
	}
	return fmt.Errorf("read %q in the sandbox: %w", p, err)
}

// fileKind names a file type for messages, as skills.FileKind does.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "special file"
}

// writer copies the items into the destination, in the daemon's space.
type writer struct {
	dst     string
	display string // the path in the sandbox
	budget  *skills.Budget
	res     Copy

	mu        sync.Mutex // held while anything is created under dst
	abandoned bool
}

// abandon stops the writer creating anything more: the caller removes dst.
func (w *writer) abandon() {
	w.mu.Lock()
	w.abandoned = true
	w.mu.Unlock()
}

// errAbandoned ends a copy whose caller gave up.
var errAbandoned = errors.New("the caller stopped waiting")

// create runs fn, which creates something under dst, unless the caller
// gave up.
func (w *writer) create(fn func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abandoned {
		return errAbandoned
	}
	return fn()
}

// run copies every item until items closes or an error; it drains and
// closes what it does not copy.
func (w *writer) run(items <-chan item) error {
	var err error
	for it := range items {
		if err == nil {
			err = w.put(it)
		}
		if it.file != nil {
			it.file.Close()
		}
	}
	return err
}

func (w *writer) put(it item) error {
	if it.warn != "" {
		w.res.Warnings = append(w.res.Warnings, it.warn)
		return nil
	}
	if it.top != "" {
		name, max := "upload.zip", w.budget.Limits.MaxTotalBytes
		if it.top == KindManifest {
			name, max = skills.ManifestName, w.budget.Limits.MaxManifest
		}
		w.res.Kind, w.res.Path = it.top, filepath.Join(w.dst, name)
		w.budget.Limits.MaxFileBytes = max
		return w.copyFile(it, w.res.Path, path.Base(w.display))
	}
	dst := filepath.Join(w.dst, "tree", filepath.FromSlash(it.rel))
	switch it.kind {
	case "dir":
		if it.rel == "." {
			w.res.Kind, w.res.Path = KindFolder, dst
		}
		return w.create(func() error { return os.Mkdir(dst, 0o700) })
	case "link":
		return w.create(func() error { return os.Symlink(it.link, dst) })
	}
	return w.copyFile(it, dst, it.rel)
}

// copyFile copies a file's bytes, counted as they are read.
func (w *writer) copyFile(it item, dst, rel string) error {
	mode := os.FileMode(0o600)
	if it.exec {
		mode = 0o700
	}
	var out *os.File
	if err := w.create(func() (err error) {
		out, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		return err
	}); err != nil {
		return err
	}
	n, err := w.budget.CopyCounted(out, it.file, rel)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var le *skills.LimitError
		if errors.As(err, &le) {
			if it.top == KindManifest {
				le.Limit = skills.LimitManifest
			} else if it.top == KindZip {
				le.Limit = skills.LimitTotalBytes
			}
			return fmt.Errorf("%s: %w", w.display, err)
		}
		return pathError(path.Join(w.display, rel), err)
	}
	w.res.Files++
	w.res.Bytes += n
	return nil
}
