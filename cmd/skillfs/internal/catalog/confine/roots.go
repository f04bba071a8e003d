package confine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// Import roots: the folders of the daemon's machine that a source named
// through the API may read (serve --import-root, none by default). The
// daemon runs as root and whoever reaches the API merely says whom it acts
// for, so even an admin's or a superadmin's draft reads a local path only
// inside a root the operator chose; the command line, an operator at a
// shell working on the data directory itself, reads any path.
//
// Containment is decided on what the kernel reaches, not on how the path
// is spelled: the path is resolved (symbolic links followed, as the read
// that follows will), the object it names is opened (O_PATH: nothing is
// read, no permission is needed) and its ancestors are walked up through
// ".." on the descriptors, each compared by device and inode with the
// roots, as bind targets are. A link inside a root that leads out of it
// therefore leads out, a bind mount of another folder into a root is
// inside it (the operator made it), and a root replaced since the start
// (another inode) holds nothing. openat2's RESOLVE_BENEATH would confine the
// resolution as well, but it refuses every absolute symbolic link, also one
// that stays inside the root, and what it opens would still be read again by
// path afterwards; the walk refuses exactly what lies outside.
//
// /proc, /sys and /dev (and anything on a filesystem of the kernel's own
// such as proc, sysfs or devpts, wherever it is mounted) are never read
// through the API: a root in them is refused at start, and a path in them
// is refused even under a root that holds them ("/").
//
// A refusal is one answer for every path outside the roots, whether it
// exists or not, and never holds a byte of what it names.

// importRoot is one configured root.
type importRoot struct {
	path string // as configured, absolute and clean
	id   fileID
}

// ImportRoots are the folders whose contents a source named through the API
// may be (see OpenImportRoots). The zero value and nil hold none.
type ImportRoots struct {
	roots []importRoot
	// never are the identities of /proc, /sys and /dev, and neverDev the
	// devices of those that are mount points of their own: nothing on
	// them, or below them, is read through the API.
	never    []fileID
	neverDev []uint64
}

// kernelDirs are the folders never read through the API.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// kernelFS are the types (statfs magic) of the kernel's own filesystems,
// never read through the API wherever they are mounted.
var kernelFS = []int64{
	unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.DEVPTS_SUPER_MAGIC, unix.CGROUP_SUPER_MAGIC,
	unix.CGROUP2_SUPER_MAGIC, unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC,
	unix.BPF_FS_MAGIC, unix.EFIVARFS_MAGIC, unix.PSTOREFS_MAGIC, unix.BINFMTFS_MAGIC, unix.SELINUX_MAGIC,
}

// maxAncestors bounds the walk up from a path to the filesystem's root.
const maxAncestors = 4096

// ErrKernelRoot marks an import root that is, or lies in, /proc, /sys or
// /dev (or a filesystem of the kernel's own).
var ErrKernelRoot = errors.New("the daemon never reads /proc, /sys or /dev through the API")

// OpenImportRoots checks the folders an operator configured as import roots
// and records each by device and inode. A path that is not an existing
// directory is refused, and so is one that is, or lies in, /proc, /sys or
// /dev (ErrKernelRoot), each naming the path; nothing is read.
func OpenImportRoots(paths []string) (*ImportRoots, error) {
	r := &ImportRoots{}
	var rootSt unix.Stat_t
	if err := unix.Stat("/", &rootSt); err != nil {
		return nil, fmt.Errorf("import roots: stat /: %w", err)
	}
	for _, d := range kernelDirs {
		var st unix.Stat_t
		if unix.Stat(d, &st) != nil {
			continue
		}
		r.never = append(r.never, statID(&st))
		if st.Dev != rootSt.Dev {
			r.neverDev = append(r.neverDev, uint64(st.Dev))
		}
	}
	for _, p := range paths {
		root, err := r.open(p)
		if err != nil {
			return nil, err
		}
		r.roots = append(r.roots, root)
	}
	return r, nil
}

// open checks one configured root.
func (r *ImportRoots) open(p string) (importRoot, error) {
	if strings.TrimSpace(p) == "" {
		return importRoot{}, fmt.Errorf("import root %q: want a folder: %w", p, skills.ErrInvalid)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return importRoot{}, fmt.Errorf("import root %q: %w", p, err)
	}
	if inKernelDir(abs) {
		return importRoot{}, fmt.Errorf("import root %q: %w", p, ErrKernelRoot)
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return importRoot{}, fmt.Errorf("import root %q: %w", p, skills.ErrNotFound)
		}
		return importRoot{}, fmt.Errorf("import root %q is not a folder (%v): %w", p, err, skills.ErrInvalid)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return importRoot{}, fmt.Errorf("import root %q: %w", p, err)
	}
	if _, err := r.walkUp(fd); errors.Is(err, errKernel) {
		return importRoot{}, fmt.Errorf("import root %q: %w", p, ErrKernelRoot)
	} else if err != nil {
		return importRoot{}, fmt.Errorf("import root %q: %w", p, err)
	}
	return importRoot{path: abs, id: statID(&st)}, nil
}

// Paths are the roots as configured (absolute).
func (r *ImportRoots) Paths() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.roots))
	for i, root := range r.roots {
		out[i] = root.path
	}
	return out
}

// errKernel and errOutsideRoots are why a path is not read through the API;
// the answer to the caller does not tell them apart.
var (
	errKernel       = errors.New("in /proc, /sys or /dev")
	errOutsideRoots = errors.New("outside the import roots")
)

// Contains reports (nil) whether the absolute path p, resolved, lies inside
// one of the roots and not in /proc, /sys or /dev. A path that does not
// exist is judged by the deepest folder on its way that does: inside a
// root its absence is the caller's to learn (the read fails as it would),
// outside it is refused as an existing one is.
func (r *ImportRoots) Contains(p string) error {
	if r == nil || len(r.roots) == 0 {
		return errOutsideRoots
	}
	if inKernelDir(p) {
		return errKernel // also a magic link such as /proc/self/root, wherever it leads
	}
	fd, err := r.openResolved(p)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	in, err := r.walkUp(fd)
	if err != nil {
		return err
	}
	if !in {
		return errOutsideRoots
	}
	return nil
}

// openResolved opens (O_PATH) the folder that holds what p names, every
// symbolic link resolved: p itself when it is a folder, the folder of the
// file it resolves to otherwise, or, when p does not exist, the deepest
// existing folder on its way. A file of the kernel's own (one bind-mounted
// from /proc) is errKernel; a symbolic link that leads nowhere is refused,
// wherever it points.
func (r *ImportRoots) openResolved(p string) (int, error) {
	for q := p; ; q = filepath.Dir(q) {
		fd, err := unix.Open(q, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			var lst unix.Stat_t
			if unix.Lstat(q, &lst) == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, errOutsideRoots // a dangling link: where it leads is not looked at
			}
			if q == "/" || q == "." {
				return -1, errOutsideRoots
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, errOutsideRoots
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return fd, nil
		}
		kernel := r.kernel(fd, &st)
		unix.Close(fd)
		if kernel {
			return -1, errKernel
		}
		return folderOf(q, &st)
	}
}

// folderOf opens (O_PATH) the folder holding the file (with st) that q
// resolved to: the folder of q's real path, whose entry must be that very
// file (else it moved meanwhile, and is refused).
func folderOf(q string, st *unix.Stat_t) (int, error) {
	real, err := filepath.EvalSymlinks(q)
	if err != nil {
		return -1, errOutsideRoots
	}
	dir, err := unix.Open(filepath.Dir(real), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errOutsideRoots
	}
	var est unix.Stat_t
	if err := unix.Fstatat(dir, filepath.Base(real), &est, unix.AT_SYMLINK_NOFOLLOW); err != nil || statID(&est) != statID(st) {
		unix.Close(dir)
		return -1, errOutsideRoots
	}
	return dir, nil
}

// inKernelDir reports whether the absolute path p is spelled as /proc,
// /sys or /dev or a path below them.
func inKernelDir(p string) bool {
	p = filepath.Clean(p)
	for _, d := range kernelDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// walkUp walks from the folder open as fd up through "..", by descriptor,
// to the filesystem's root: in is whether it meets a root on the way;
// errKernel when it meets /proc, /sys, /dev or a filesystem of the
// kernel's own first. fd stays open.
func (r *ImportRoots) walkUp(fd int) (in bool, err error) {
	cur := fd
	defer func() {
		if cur != fd {
			unix.Close(cur)
		}
	}()
	for range maxAncestors {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return false, err
		}
		if r.kernel(cur, &st) {
			return false, errKernel
		}
		id := statID(&st)
		for _, root := range r.roots {
			if root.id == id {
				return true, nil
			}
		}
		parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil {
			unix.Close(parent)
			return false, err
		}
		if cur != fd {
			unix.Close(cur)
		}
		cur = parent
		if statID(&pst) == id {
			return false, nil // the filesystem's root: no root on the way
		}
	}
	return false, fmt.Errorf("more than %d folders deep: %w", maxAncestors, errOutsideRoots)
}

// kernel reports whether the folder open as fd, with st, is /proc, /sys or
// /dev, on one of their devices, or on a filesystem of the kernel's own.
func (r *ImportRoots) kernel(fd int, st *unix.Stat_t) bool {
	id := statID(st)
	for _, n := range r.never {
		if n == id {
			return true
		}
	}
	for _, d := range r.neverDev {
		if d == id.dev {
			return true
		}
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return true // cannot tell: not read
	}
	for _, m := range kernelFS {
		if int64(fs.Type) == m {
			return true
		}
	}
	return false
}
