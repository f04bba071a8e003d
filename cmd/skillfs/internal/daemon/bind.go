package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	skfs "skillfs/fs"
	"skillfs/fs/bind"
	"skillfs/skills"
)

// A session is bound read-only at a target in the daemon's own mount
// namespace or in a sandbox's (see package bind), and the bind recorded in
// the index, so that a restart re-attaches it.

// binder makes and removes the binds of the daemon's mount, fenced off from
// the data directory and the mount itself.
func (d *Daemon) binder() bind.Binder {
	return bind.Binder{Home: d.cat.Home(), MountRoot: d.mountRoot, Log: d.log}
}

// detach removes one bind of session id, its API socket first (see
// closeSocket).
func (d *Daemon) detach(id string, b skills.Bind) error {
	d.closeSocket(id, b)
	return d.binder().Detach(b)
}

// Bind binds a session read-only at req.Target — in the daemon's
// namespace, or (req.PID > 0) in the mount namespace of that process — with
// the session's API socket at req.APISocket in the same namespace when set
// (see openSocket), and records it so that a restart re-attaches both. It
// returns the bind as recorded, with the target and the socket's folder
// resolved in that namespace.
func (d *Daemon) Bind(ctx context.Context, id string, req skills.Bind) (skills.Bind, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.servedSession(ctx, id); err != nil {
		return skills.Bind{}, err
	}
	if !filepath.IsAbs(req.Target) || req.PID < 0 {
		return skills.Bind{}, fmt.Errorf("mount target %q must be an absolute path (and pid not negative): %w", req.Target, skills.ErrInvalid)
	}
	if req.APISocket != "" && !filepath.IsAbs(req.APISocket) {
		return skills.Bind{}, fmt.Errorf("api socket %q must be an absolute path: %w", req.APISocket, skills.ErrInvalid)
	}
	b, err := d.binder().Attach(id, skills.Bind{Target: filepath.Clean(req.Target), PID: req.PID}, func(b skills.Bind) error {
		return d.checkTaken(ctx, b)
	})
	if err != nil {
		return skills.Bind{}, err
	}
	if req.APISocket != "" {
		b.APISocket = filepath.Clean(req.APISocket)
		if b, err = d.openSocket(id, b, ""); err != nil {
			if derr := d.binder().Detach(b); derr != nil {
				d.log.Error("remove a bind whose api socket could not be made", "session", id, "target", b.Target, "pid", b.PID, "err", derr)
			}
			return skills.Bind{}, err
		}
	}
	if err := d.db.AddBind(ctx, id, d.host, b); err != nil {
		if derr := d.detach(id, b); derr != nil {
			d.log.Error("remove a bind that could not be recorded", "session", id, "target", b.Target, "pid", b.PID, "err", derr)
		}
		return skills.Bind{}, err
	}
	d.log.Info("session bound", "session", id, "target", b.Target, "pid", b.PID, "api_socket", b.APISocket)
	return b, nil
}

// checkTaken refuses a target that another open session of this host is
// bound at in the same namespace: another bind there would hide the first,
// and unmounting by path would then expose the wrong session. (Other hosts'
// binds are in their machines' namespaces.)
func (d *Daemon) checkTaken(ctx context.Context, b skills.Bind) error {
	self, err := bind.NamespaceOf(os.Getpid())
	if err != nil {
		return err
	}
	nsOf := func(b skills.Bind) string {
		if b.PID == 0 {
			return self
		}
		return b.NS
	}
	all, err := d.db.OpenBinds(ctx, d.host, nil)
	if err != nil {
		return err
	}
	for id, binds := range all {
		for _, o := range binds {
			if o.Target == b.Target && (o.PID == b.PID || nsOf(o) == nsOf(b)) {
				return fmt.Errorf("mount target %q is taken by session %s: %w", b.Target, id, skills.ErrExists)
			}
		}
	}
	return nil
}

// Unbind removes a session's bind at target (in pid's namespace if pid > 0).
// target may be the path given to Bind or the resolved one it recorded.
func (d *Daemon) Unbind(ctx context.Context, id, target string, pid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.servedSession(ctx, id); err != nil {
		return err
	}
	binds, err := d.db.Binds(ctx, id)
	if err != nil {
		return err
	}
	target = filepath.Clean(target)
	find := func(target string) (skills.Bind, bool) {
		for _, b := range binds {
			if b.Target == target && b.PID == pid {
				return b, true
			}
		}
		return skills.Bind{}, false
	}
	b, ok := find(target)
	if !ok && filepath.IsAbs(target) && pid >= 0 {
		// A path that does not resolve is not where anything is bound.
		if resolved, err := bind.Resolve(pid, target); err == nil {
			b, ok = find(resolved)
		}
	}
	if !ok {
		return fmt.Errorf("session %s is not mounted at %q (pid %d): %w", id, target, pid, skills.ErrNotFound)
	}
	if err := d.detach(id, b); err != nil {
		return fmt.Errorf("unmount %q: %w", b.Target, err)
	}
	return d.db.RemoveBind(ctx, id, b)
}

// rebind re-attaches the binds of restored sessions, replacing the dead
// mounts a crash left. A bind whose sandbox is gone (its process ended or
// now lives in another namespace) is forgotten; one whose sandbox cannot be
// looked up (any other error) is kept for the next start. A live mount found
// at a target is left alone: the previous daemon's binds died with it, so a
// live one belongs to someone else (another daemon serving a copy of the
// data directory, an operator's mount).
func (d *Daemon) rebind(ctx context.Context) {
	all, err := d.db.OpenBinds(ctx, d.host, nil)
	if err != nil {
		d.log.Error("list binds to rebind", "err", err)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		for _, b := range all[id] {
			if d.fs.Resumed() && d.keepBind(ctx, id, b) {
				continue
			}
			if b.PID > 0 {
				ns, err := bind.NamespaceOf(b.PID)
				if err != nil && !errors.Is(err, skills.ErrNotFound) {
					// Nothing known of the sandbox: keep the record for the
					// next start.
					d.log.Error("look up a sandbox: session not rebound there, bind kept",
						"session", id, "target", b.Target, "pid", b.PID, "err", err)
					continue
				}
				if err != nil || ns != b.NS {
					d.log.Info("sandbox gone: bind forgotten", "session", id, "target", b.Target, "pid", b.PID)
					if err := d.db.RemoveBind(ctx, id, b); err != nil {
						d.log.Error("forget bind", "session", id, "target", b.Target, "pid", b.PID, "err", err)
					}
					continue
				}
			} else if err := bind.Bounded(fmt.Sprintf("bind target %q", b.Target), func() error {
				return skfs.ClearStale(b.Target)
			}); err != nil {
				d.log.Warn("bind target holds a live mount or cannot be cleared: session not rebound there",
					"session", id, "target", b.Target, "err", err)
				continue
			}
			got, err := d.binder().Attach(id, skills.Bind{Target: b.Target, PID: b.PID, NS: b.NS}, nil)
			if err != nil {
				d.log.Error("rebind session", "session", id, "target", b.Target, "pid", b.PID, "err", err)
				continue
			}
			got.APISocket, got.SocketID = b.APISocket, b.SocketID
			got = d.reopenSocket(id, b, got)
			d.updateBind(ctx, id, b, got)
			d.log.Info("session rebound", "session", id, "target", got.Target, "pid", got.PID, "api_socket", got.APISocket)
		}
	}
}

// reopenSocket makes the API socket of bind b (now got) again, if it had
// one, and returns got with it. The socket file a crash left is this
// daemon's to replace; anything else there stays, and so does the record,
// for the next start.
func (d *Daemon) reopenSocket(id string, b, got skills.Bind) skills.Bind {
	if b.APISocket == "" {
		return got
	}
	made, err := d.openSocket(id, got, b.SocketID)
	if err != nil {
		d.log.Error("api socket not made again: the session's view is rebound without it",
			"session", id, "api_socket", b.APISocket, "pid", b.PID, "err", err)
		return got
	}
	return made
}

// keepBind, on a resumed mount, keeps bind b of session id if it is still
// in place (it is on the connection the keeper held, so it never stopped
// being valid): only its API socket, which died with the process, is made
// again. It reports whether it kept it; a bind not in place is rebound as
// after a crash.
func (d *Daemon) keepBind(ctx context.Context, id string, b skills.Bind) bool {
	kept, err := d.keptBind(b)
	if err != nil || !kept {
		if err != nil && !errors.Is(err, skills.ErrNotFound) {
			d.log.Warn("is a bind of the resumed mount in place? rebinding it", "session", id, "target", b.Target, "pid", b.PID, "err", err)
		}
		return false
	}
	got := d.reopenSocket(id, b, b)
	d.updateBind(ctx, id, b, got)
	d.log.Info("bind kept across the restart", "session", id, "target", b.Target, "pid", b.PID, "api_socket", got.APISocket)
	return true
}

// updateBind records bind b of session id as rebound: now, resolved and
// with its socket made again.
func (d *Daemon) updateBind(ctx context.Context, id string, b, now skills.Bind) {
	if now == b {
		return
	}
	if now.Target != b.Target { // recorded before targets were resolved
		if err := d.db.RemoveBind(ctx, id, b); err != nil {
			d.log.Error("update bind record", "session", id, "target", b.Target, "err", err)
			return
		}
	}
	if err := d.db.AddBind(ctx, id, d.host, now); err != nil {
		d.log.Error("update bind record", "session", id, "target", now.Target, "err", err)
	}
}

// unbindAll detaches every bind at shutdown, sandboxes' included, so the
// filesystem is really released, and removes their API sockets; the
// records stay for the next start. With
// nothing to return an error to at shutdown, failures are logged.
func (d *Daemon) unbindAll(ctx context.Context) {
	all, err := d.db.OpenBinds(ctx, d.host, nil)
	if err != nil {
		d.log.Error("list binds to unbind", "err", err)
		return
	}
	for id, binds := range all {
		for _, b := range binds {
			if err := d.detach(id, b); err != nil {
				d.log.Warn("unmount bind", "target", b.Target, "pid", b.PID, "err", err)
			}
		}
	}
}
