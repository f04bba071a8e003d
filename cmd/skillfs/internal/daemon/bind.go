package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	skfs "skillfs/fs"
	"skillfs/skills"
)

// bind makes a read-only bind of src at target, creating target if missing.
func bind(src, target string) error {
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

// unbind removes a bind, lazily if it is busy.
func unbind(target string) error {
	err := unix.Unmount(target, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil // not mounted
	}
	return err
}

// Mount binds a session read-only at target and remembers it, so a restart
// re-attaches it.
func (d *Daemon) Mount(ctx context.Context, id, target string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.Session(ctx, id); err != nil {
		return err
	}
	if !filepath.IsAbs(target) {
		return fmt.Errorf("mount target %q must be an absolute path: %w", target, skills.ErrInvalid)
	}
	target = filepath.Clean(target)
	if err := bind(filepath.Join(d.mountRoot, id), target); err != nil {
		return err
	}
	if err := d.cat.DB().AddMount(ctx, id, target); err != nil {
		unbind(target)
		return err
	}
	d.log.Info("session bound", "session", id, "target", target)
	return nil
}

// Unmount removes a session's bind at target.
func (d *Daemon) Unmount(ctx context.Context, id, target string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.Session(ctx, id); err != nil {
		return err
	}
	target = filepath.Clean(target)
	mounts, err := d.cat.DB().Mounts(ctx, id)
	if err != nil {
		return err
	}
	found := false
	for _, m := range mounts {
		found = found || m == target
	}
	if !found {
		return fmt.Errorf("session %s is not mounted at %q: %w", id, target, skills.ErrNotFound)
	}
	if err := unbind(target); err != nil {
		return fmt.Errorf("unmount %q: %w", target, err)
	}
	return d.cat.DB().RemoveMount(ctx, id, target)
}

// rebind re-attaches the binds of restored sessions; a bind left dead by a
// crash ("transport endpoint is not connected") is cleared first.
func (d *Daemon) rebind(ctx context.Context) {
	list, err := d.cat.DB().OpenSessions(ctx)
	if err != nil {
		d.log.Error("list sessions to rebind", "err", err)
		return
	}
	for _, s := range list {
		mounts, err := d.cat.DB().Mounts(ctx, s.ID)
		if err != nil {
			continue
		}
		for _, t := range mounts {
			skfs.ClearStale(t)
			unbind(t)
			if err := bind(filepath.Join(d.mountRoot, s.ID), t); err != nil {
				d.log.Error("rebind session", "session", s.ID, "target", t, "err", err)
				continue
			}
			d.log.Info("session rebound", "session", s.ID, "target", t)
		}
	}
}

// unbindAll detaches every bind at shutdown; the records stay so the next
// start re-attaches them.
func (d *Daemon) unbindAll(ctx context.Context) {
	list, err := d.cat.DB().OpenSessions(ctx)
	if err != nil {
		return
	}
	for _, s := range list {
		mounts, _ := d.cat.DB().Mounts(ctx, s.ID)
		for _, t := range mounts {
			if err := unbind(t); err != nil {
				d.log.Warn("unmount bind", "target", t, "err", err)
			}
		}
	}
}
