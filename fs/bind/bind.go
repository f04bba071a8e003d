// Package bind makes and removes read-only binds of the directories of a
// FUSE mount, in this process's mount namespace or in a sandbox's, bounded
// against targets on hung filesystems. It owns the mount-namespace system
// calls: open_tree, move_mount, setns and the checks that keep a bind out of
// the data directory and the mount itself.
//
// A directory is bound read-only at a target either in the daemon's own
// mount namespace (PID 0) or inside the mount namespace of a sandbox
// process. Both attach a detached, read-only clone of the directory's
// subtree (open_tree) onto a descriptor of the target (move_mount); for a
// sandbox, from a thread that joined its namespace: that is also how a
// restarted daemon replaces the dead mount a crash left inside a running
// sandbox.
//
// The target is resolved and opened in the namespace the bind is made in,
// checked there by identity (device and inode, which a symlink or another
// bind of the same directory cannot disguise) against the data directory and
// the daemon's own mount, and the bind goes onto that open descriptor, so a
// symlink swapped in after the check cannot redirect it. The resolved path is
// what is recorded. A target that holds the data directory or the mount root
// (one of their parents) is refused too: a bind there would hide them.
//
// Everything that touches the target runs on a thread of its own and is
// waited for at most Timeout (see onTarget), so a target on a hung
// filesystem costs the caller an error, not the caller's lock.
package bind

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// Binder makes and removes the binds of the directories of one FUSE mount.
// Its zero Log logs nothing.
type Binder struct {
	Home      string       // the data directory: no bind reaches into it or covers it
	MountRoot string       // the FUSE mount whose directories are bound
	Log       *slog.Logger // what is undone or left alone with nobody to tell
}

func (m Binder) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// Attach binds the directory dir of the mount (a session's) read-only at
// b.Target, in this process's namespace (PID 0, creating the target if
// missing) or in that of process b.PID (the target must exist there; a dead
// mount left there by a crash is replaced). taken, if not nil, sees the bind
// with its resolved target before anything is mounted and can refuse it.
// Attach returns the bind as made: resolved target, and the namespace's
// name for a sandbox. The work on the target is bounded (onTarget): an
// attach that completes after Attach gave up is undone.
func (m Binder) Attach(dir string, b skills.Bind, taken func(skills.Bind) error) (skills.Bind, error) {
	// The target as given is checked first: a bind there already makes it
	// resolve into the mount, which would hide the clearer conflict. Then
	// again once resolved (and, for a sandbox, its namespace known).
	checkTaken := func(b skills.Bind) error {
		if taken == nil {
			return nil
		}
		return taken(b)
	}
	if err := checkTaken(b); err != nil {
		return b, err
	}
	f, err := m.fence()
	if err != nil {
		return b, err
	}
	procFD, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return b, fmt.Errorf("open /proc/self/fd: %w", err)
	}
	tree, err := readOnlyTree(filepath.Join(m.MountRoot, dir))
	if err != nil {
		unix.Close(procFD)
		return b, err
	}
	owned := []int{procFD, tree}
	nsfd := -1
	if b.PID > 0 {
		var ns string
		if nsfd, ns, err = namespaceFor(b); err != nil {
			closeAll(owned)
			return b, err
		}
		owned = append(owned, nsfd)
		b.NS = ns
	}
	a := attachment{Binder: m, bind: b, tree: tree, procFD: procFD, fence: f, taken: checkTaken}
	var made skills.Bind
	err = onTarget(fmt.Sprintf("mount target %q", b.Target), nsfd, b.PID, owned, func(gaveUp func() bool) (func(), error) {
		nb, err := a.attach(gaveUp)
		if err != nil {
			return nil, err
		}
		made = nb
		return func() {
			m.log().Warn("bind completed after its caller gave up: removed", "target", nb.Target, "pid", nb.PID)
			if err := m.removeBind(nb, f); err != nil {
				m.log().Error("remove a bind nobody recorded", "target", nb.Target, "pid", nb.PID, "err", err)
			}
		}, nil
	})
	if err != nil {
		return b, err
	}
	return made, nil
}

// namespaceFor opens the mount namespace of a sandbox's bind and names it,
// refused if it is not the one the bind was made in (b.NS, when known).
func namespaceFor(b skills.Bind) (int, string, error) {
	nsfd, ns, err := openNamespace(b.PID)
	if err != nil {
		return -1, "", err
	}
	if b.NS != "" && b.NS != ns {
		unix.Close(nsfd)
		return -1, "", fmt.Errorf("process %d is in another mount namespace than when bound: %w", b.PID, skills.ErrNotFound)
	}
	return nsfd, ns, nil
}

// attachment is an Attach under way, its descriptors open.
type attachment struct {
	Binder
	bind   skills.Bind
	tree   int // the detached read-only tree
	procFD int // this process's /proc/self/fd
	fence  *fence
	taken  func(skills.Bind) error
}

// attach opens the target and attaches the tree onto it, from the thread
// onTarget runs it on (in the sandbox's namespace for one), and returns the
// bind with its target resolved.
func (a *attachment) attach(gaveUp func() bool) (skills.Bind, error) {
	b := a.bind
	if b.PID > 0 {
		// A dead mount (ENOTCONN) is detached where the namespace
		// allows it; where it does not (a locked mount), the new one
		// is stacked on top. statfs reaches the filesystem's server,
		// where stat may be answered from the kernel's cache.
		var st unix.Statfs_t
		if err := unix.Statfs(b.Target, &st); isDeadMount(err) {
			unix.Unmount(b.Target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
	}
	t, err := openTarget(b.Target, b.PID == 0, a.fence, a.procFD)
	if err != nil {
		return b, inNamespace(b.PID, err)
	}
	defer unix.Close(t.fd)
	if b.PID == 0 {
		// Another bind there would hide this one or be hidden by it,
		// and unmounting by path would then remove the wrong one.
		// Rebinding after a crash cleared the dead mount first.
		if root, err := isMountRoot(t.fd); err != nil {
			return b, fmt.Errorf("mount target %q: %w", t.path, err)
		} else if root {
			return b, fmt.Errorf("mount target %q is already a mount point: %w", t.path, skills.ErrExists)
		}
	}
	nb := b
	nb.Target = t.path
	if gaveUp() {
		return b, errGaveUp
	}
	if err := elsewhere(func() error { return a.taken(nb) }); err != nil {
		return b, err
	}
	// move_mount wants the target in the calling thread's namespace:
	// this one.
	if err := attachTo(a.tree, t); err != nil {
		return b, inNamespace(b.PID, err)
	}
	return nb, nil
}

// inNamespace names errors of a sandbox's namespace (pid > 0) as such.
func inNamespace(pid int, err error) error {
	if pid > 0 && err != nil {
		return fmt.Errorf("in process %d's namespace: %w", pid, err)
	}
	return err
}

// Resolve resolves an existing path in the namespace a bind of pid is made
// in (pid 0: this process's), as Attach records targets.
func Resolve(pid int, path string) (string, error) {
	procFD, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open /proc/self/fd: %w", err)
	}
	owned := []int{procFD}
	nsfd := -1
	if pid > 0 {
		if nsfd, _, err = openNamespace(pid); err != nil {
			closeAll(owned)
			return "", err
		}
		owned = append(owned, nsfd)
	}
	var resolved string
	err = onTarget(fmt.Sprintf("mount target %q", path), nsfd, pid, owned, func(func() bool) (func(), error) {
		t, err := openTarget(path, false, nil, procFD)
		if err != nil {
			return nil, err
		}
		unix.Close(t.fd)
		resolved = t.path
		return nil, nil
	})
	if err != nil {
		return "", err
	}
	return resolved, nil
}

// removeBind removes the bind at b.Target in the calling thread's
// namespace; see Detach.
func (m Binder) removeBind(b skills.Bind, f *fence) error {
	var st unix.Stat_t
	err := unix.Lstat(b.Target, &st)
	switch {
	case isDeadMount(err):
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("stat bind target %q: %w", b.Target, err)
	case uint64(st.Dev) != f.fuseDev:
		m.log().Warn("bind target holds another filesystem: left alone", "target", b.Target, "pid", b.PID)
		return nil
	}
	return unbind(b.Target)
}

// Detach removes one bind; a sandbox that is gone took its binds with it.
// Only the mount's own filesystem is unmounted, or a dead mount: whatever
// else is now on top at the target (a mount someone made over the bind, or
// one found there by a rebind) is someone else's and stays. The work on the
// target is bounded (onTarget).
func (m Binder) Detach(b skills.Bind) error {
	f, err := m.fence()
	if err != nil {
		return err
	}
	nsfd := -1
	var owned []int
	if b.PID > 0 {
		var ns string
		nsfd, ns, err = openNamespace(b.PID)
		if errors.Is(err, skills.ErrNotFound) {
			return nil // the sandbox is gone
		}
		if err != nil {
			return err
		}
		if ns != b.NS {
			unix.Close(nsfd)
			return nil // the number now belongs to another process
		}
		owned = []int{nsfd}
	}
	return onTarget(fmt.Sprintf("bind target %q", b.Target), nsfd, b.PID, owned, func(func() bool) (func(), error) {
		return nil, m.removeBind(b, f)
	})
}

// Bounded runs fn, work on a bind target in this process's namespace (what
// names it in errors), on a thread of its own, and waits for it at most
// Timeout.
func Bounded(what string, fn func() error) error {
	return onTarget(what, -1, 0, nil, func(func() bool) (func(), error) {
		return nil, fn()
	})
}
