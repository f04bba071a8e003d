package daemon

import (
	"context"
	"errors"
	"time"
)

// Changes made on another host (or by a command that did not tell this
// daemon) reach this host's views through follow: woken by the index when it
// can say that something changed (Options.Watch), and in any case every
// Options.ReconcileEvery, it checks cheaply whether anything its views
// depend on changed since it last looked, and if so does what a local
// change does. A missed wake is repaired by the next periodic look.

// DefaultReconcileEvery is how often a daemon looks for changes made
// elsewhere when nothing wakes it: a revocation made on another host
// reaches this host's views within about this long.
const DefaultReconcileEvery = time.Second

// follow keeps this host's views in step with the index until ctx ends,
// looking every interval and whenever wake fires (nil: never).
func (d *Daemon) follow(ctx context.Context, every time.Duration, wake <-chan struct{}) {
	failing := false
	periodicallyOr(ctx, every, wake, func() {
		err := d.catchUp(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			d.log.Error("follow changes made elsewhere: retried at the next look", "err", err)
			failing = true
		case err == nil && failing:
			d.log.Info("following changes made elsewhere again")
			failing = false
		}
	})
}

// catchUp applies what changed since this host last looked, if anything:
// skills (the in-memory catalog follows the index's change log) or users
// (their change mark) mean a reevaluation of every session served here, as
// after a local change; fewer sessions of this host in the index than the
// mount serves mean some were closed or moved elsewhere (matchSessions). Nothing
// changed costs two small queries, made without holding up session changes.
func (d *Daemon) catchUp(ctx context.Context) error {
	m, err := d.db.Marks(ctx, d.host)
	if err != nil {
		return err
	}
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Views change before the index records it: once begun, a change is
	// recorded even when the daemon is stopping meanwhile.
	ctx = context.WithoutCancel(ctx)
	var errs []error
	switch {
	case time.Since(d.sessionsMatched) > matchSessionsEvery:
		// Equal counts can hide a close elsewhere beside a session this
		// mount lacks: now and then the sessions themselves are compared.
		errs = append(errs, d.matchSessions(ctx))
	case m.Served != d.fs.NumSessions():
		// A session made or closed here since the look counts too: look
		// again now that none can be.
		if m, err = d.db.Marks(ctx, d.host); err != nil {
			return err
		}
		if m.Served != d.fs.NumSessions() {
			errs = append(errs, d.matchSessions(ctx))
		}
	}
	if f := d.followed; f == nil || f.set != set || f.mark != m.Users {
		_, err := d.reevaluate(ctx, false)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// matchSessionsEvery is how often catchUp compares the sessions this host
// serves with the index's, whatever the counts say.
const matchSessionsEvery = time.Minute

// matchSessions makes the mount serve the sessions the index says this host
// serves: the view of a session closed or moved elsewhere goes, with the
// binds this host made of it, and an open session of this host that the
// mount lacks (a close that failed half-way) is served again. The caller
// holds d.mu.
func (d *Daemon) matchSessions(ctx context.Context) error {
	r, err := d.lookAtReaders(ctx)
	if err != nil {
		return err
	}
	served := map[string]bool{}
	for _, id := range d.fs.Sessions() {
		served[id] = true
	}
	var errs []error
	for after := ""; ; {
		page, err := d.db.OpenSessionsPage(ctx, d.host, after, sessionPage)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, s := range page {
			if served[s.ID] {
				delete(served, s.ID)
				continue
			}
			if _, err := d.revoke(ctx, r, s, true); err != nil {
				errs = append(errs, err)
				continue
			}
			d.log.Warn("session of this host not served: served again", "session", s.ID)
		}
		if len(page) < sessionPage {
			break
		}
		after = page[len(page)-1].ID
	}
	for id := range served {
		d.fs.RemoveSession(id)
		d.rec.Forget(id)
		d.http.SessionChanged(id) // its token died with the close or move
		d.log.Info("session closed or moved elsewhere: no longer served here", "session", id)
	}
	if len(served) > 0 {
		d.events.Nudge() // their streams get the close or move from the log
	}
	errs = append(errs, d.dropStale(ctx))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d.sessionsMatched = time.Now()
	return nil
}

// dropStale detaches the binds this host made of sessions it no longer
// serves (closed, or moved to another host) and forgets them; those that
// cannot be detached now are kept for the next try.
func (d *Daemon) dropStale(ctx context.Context) error {
	stale, err := d.db.StaleBinds(ctx, d.host)
	if err != nil {
		return err
	}
	var errs []error
	for id, binds := range stale {
		detached := true
		for _, b := range binds {
			if err := d.detach(id, b); err != nil {
				d.log.Warn("unmount a bind of a session no longer served here: kept for the next try",
					"session", id, "target", b.Target, "pid", b.PID, "err", err)
				detached = false
			}
		}
		if !detached {
			continue
		}
		if err := d.db.ForgetBinds(ctx, id, d.host); err != nil {
			errs = append(errs, err)
			continue
		}
		d.log.Info("binds of a session no longer served here removed", "session", id, "binds", len(binds))
	}
	return errors.Join(errs...)
}
