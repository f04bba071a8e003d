package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	skfs "skillfs/fs"
	"skillfs/skills"
)

// A session is bound read-only at a target either in the daemon's own mount
// namespace (PID 0: a plain bind mount) or inside the mount namespace of a
// sandbox process. The latter uses a detached clone of the session's subtree
// (open_tree) moved into place from a thread that joined the sandbox's
// namespace (move_mount): that is also how a restarted daemon replaces the
// dead mount a crash left inside a running sandbox.

// bindHere makes a read-only bind of src at target, creating target if missing.
func bindHere(src, target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("create %q: %w", target, err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %q at %q: %w", src, target, err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("make bind at %q read-only: %w", target, err)
	}
	return nil
}

// unbind removes a bind, lazily if it is busy; not mounted is fine.
func unbind(target string) error {
	err := unix.Unmount(target, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// namespaceOf identifies the mount namespace of a process.
func namespaceOf(pid int) (string, error) {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return "", fmt.Errorf("mount namespace of process %d: %w", pid, skills.ErrNotFound)
	}
	return ns, nil
}

// inNamespace runs fn on an OS thread that joined the mount namespace of
// pid. The thread is never given back to the Go scheduler: the runtime ends
// it when the goroutine returns, so no other goroutine runs in that namespace.
func inNamespace(pid int, fn func() error) error {
	nsfd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open mount namespace of process %d: %w", pid, skills.ErrNotFound)
	}
	defer unix.Close(nsfd)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- fmt.Errorf("unshare filesystem attributes: %w", err)
			return
		}
		if err := unix.Setns(nsfd, unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("join mount namespace of process %d: %w", pid, err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// bindInto binds src read-only at target inside the mount namespace of pid,
// replacing a dead mount left there by a crash. target must exist there.
func bindInto(src string, pid int, target string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone %q: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("make %q read-only: %w", src, err)
	}
	return inNamespace(pid, func() error {
		// A dead mount (ENOTCONN) is detached where the namespace allows
		// it; where it does not (a locked mount), the new one is stacked on
		// top. The sandbox's /proc may belong to another pid namespace, so
		// this thread cannot read its own mountinfo: statfs tells instead.
		var st unix.Statfs_t
		err := unix.Statfs(target, &st)
		if errors.Is(err, unix.ENOTCONN) {
			unix.Unmount(target, unix.MNT_DETACH)
		} else if err != nil {
			return fmt.Errorf("target %q in process %d's namespace: %w", target, pid, err)
		} else if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			return fmt.Errorf("target %q in process %d's namespace is not a directory: %w", target, pid, skills.ErrInvalid)
		}
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach at %q in process %d's namespace: %w", target, pid, err)
		}
		return nil
	})
}

// attach makes one bind.
func (d *Daemon) attach(id string, b skills.Bind) error {
	src := filepath.Join(d.mountRoot, id)
	if b.PID == 0 {
		return bindHere(src, b.Target)
	}
	return bindInto(src, b.PID, b.Target)
}

// detach removes one bind; a sandbox that is gone took its binds with it.
func detach(b skills.Bind) error {
	if b.PID == 0 {
		return unbind(b.Target)
	}
	if ns, err := namespaceOf(b.PID); err != nil || ns != b.NS {
		return nil
	}
	return inNamespace(b.PID, func() error { return unbind(b.Target) })
}

// Mount binds a session read-only at target — in the daemon's namespace, or
// (pid > 0) in the mount namespace of that process — and records it so that
// a restart re-attaches it.
func (d *Daemon) Mount(ctx context.Context, id, target string, pid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.Session(ctx, id); err != nil {
		return err
	}
	if !filepath.IsAbs(target) || pid < 0 {
		return fmt.Errorf("mount target %q must be an absolute path (and pid not negative): %w", target, skills.ErrInvalid)
	}
	b := skills.Bind{Target: filepath.Clean(target), PID: pid}
	if err := d.checkTarget(ctx, b); err != nil {
		return err
	}
	if pid > 0 {
		ns, err := namespaceOf(pid)
		if err != nil {
			return err
		}
		b.NS = ns
	}
	if err := d.attach(id, b); err != nil {
		return err
	}
	if err := d.cat.DB().AddBind(ctx, id, b); err != nil {
		detach(b)
		return err
	}
	d.log.Info("session bound", "session", id, "target", b.Target, "pid", b.PID)
	return nil
}

// checkTarget refuses a target that is already taken: another bind there
// would hide the first, and unmounting by path would then expose the wrong
// session. Targets inside the data directory are refused too.
func (d *Daemon) checkTarget(ctx context.Context, b skills.Bind) error {
	if b.PID == 0 {
		home := d.cat.Home()
		inside := func(p string) bool { return p == home || strings.HasPrefix(p, home+"/") || p == "/" }
		// mount(2) follows symlinks in the target: check where it lands too.
		real, err := filepath.EvalSymlinks(b.Target)
		if inside(b.Target) || err == nil && inside(real) {
			return fmt.Errorf("mount target %q: not inside the data directory or at /: %w", b.Target, skills.ErrInvalid)
		}
	}
	list, err := d.cat.DB().OpenSessions(ctx)
	if err != nil {
		return err
	}
	for _, s := range list {
		binds, _ := d.cat.DB().Binds(ctx, s.ID)
		for _, o := range binds {
			if o.Target == b.Target && (o.PID == b.PID || (o.PID != 0 && b.PID != 0 && o.NS == b.NS)) {
				return fmt.Errorf("mount target %q is taken by session %s: %w", b.Target, s.ID, skills.ErrExists)
			}
		}
	}
	if b.PID == 0 && isMountPoint(b.Target) {
		return fmt.Errorf("mount target %q is already a mount point: %w", b.Target, skills.ErrExists)
	}
	return nil
}

// isMountPoint tells a mount point by its device differing from its parent's.
func isMountPoint(path string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(path, &st) != nil || unix.Lstat(filepath.Dir(path), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// Unmount removes a session's bind at target (in pid's namespace if pid > 0).
func (d *Daemon) Unmount(ctx context.Context, id, target string, pid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.Session(ctx, id); err != nil {
		return err
	}
	binds, err := d.cat.DB().Binds(ctx, id)
	if err != nil {
		return err
	}
	target = filepath.Clean(target)
	for _, b := range binds {
		if b.Target != target || b.PID != pid {
			continue
		}
		if err := detach(b); err != nil {
			return fmt.Errorf("unmount %q: %w", target, err)
		}
		return d.cat.DB().RemoveBind(ctx, id, b)
	}
	return fmt.Errorf("session %s is not mounted at %q (pid %d): %w", id, target, pid, skills.ErrNotFound)
}

// rebind re-attaches the binds of restored sessions, replacing the dead
// mounts a crash left. A bind whose sandbox is gone (its process ended or
// now lives in another namespace) is forgotten.
func (d *Daemon) rebind(ctx context.Context) {
	list, err := d.cat.DB().OpenSessions(ctx)
	if err != nil {
		d.log.Error("list sessions to rebind", "err", err)
		return
	}
	for _, s := range list {
		binds, err := d.cat.DB().Binds(ctx, s.ID)
		if err != nil {
			continue
		}
		for _, b := range binds {
			if b.PID > 0 {
				if ns, err := namespaceOf(b.PID); err != nil || ns != b.NS {
					d.log.Info("sandbox gone: bind forgotten", "session", s.ID, "target", b.Target, "pid", b.PID)
					d.cat.DB().RemoveBind(ctx, s.ID, b)
					continue
				}
			} else {
				skfs.ClearStale(b.Target)
				unbind(b.Target)
			}
			if err := d.attach(s.ID, b); err != nil {
				d.log.Error("rebind session", "session", s.ID, "target", b.Target, "pid", b.PID, "err", err)
				continue
			}
			d.log.Info("session rebound", "session", s.ID, "target", b.Target, "pid", b.PID)
		}
	}
}

// unbindAll detaches every bind at shutdown, sandboxes' included, so the
// filesystem is really released; the records stay for the next start.
func (d *Daemon) unbindAll(ctx context.Context) {
	list, err := d.cat.DB().OpenSessions(ctx)
	if err != nil {
		return
	}
	for _, s := range list {
		binds, _ := d.cat.DB().Binds(ctx, s.ID)
		for _, b := range binds {
			if err := detach(b); err != nil {
				d.log.Warn("unmount bind", "target", b.Target, "pid", b.PID, "err", err)
			}
		}
	}
}
