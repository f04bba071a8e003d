package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// Move takes open session id over from the host serving it: this host
// serves its view with its pinned versions (the same pins, not resolved
// again), less what its user may no longer read (revoked, as a
// reevaluation would), and keeps its activations, which are in the index.
// It refuses while the serving host is alive (its heartbeat within the
// grace) unless force is set. The index records the move only if the
// session is still served by the host this read, so of two hosts taking the
// same session over, one does and the other is refused; a moved event is
// recorded with it. The old host's binds are dropped: it detaches them if
// it runs (see matchSessions).
//
// A move is allowed to whoever may close the session: the API trusts its
// caller as it does for every session call.
func (d *Daemon) Move(ctx context.Context, id string, force bool) (*api.Moved, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := refuseChildMove(s); err != nil {
		return nil, err
	}
	from := s.Host
	if from == d.host {
		return nil, fmt.Errorf("session %s is served by this host already: %w", id, skills.ErrInvalid)
	}
	if err := d.mayTakeOver(ctx, s, force); err != nil {
		return nil, err
	}
	dropped, err := d.db.Binds(ctx, id)
	if err != nil {
		return nil, err
	}
	r, err := d.lookAtReaders(ctx)
	if err != nil {
		return nil, err
	}
	lost, err := d.takeOver(ctx, r, s, from)
	if err != nil {
		return nil, err
	}
	dropped = append(dropped, d.moveChildren(ctx, r, id, from)...)
	out := &api.Moved{SessionInfo: *d.info(s, nil), From: from, Dropped: dropped}
	out.Skipped = lost
	if out.Skipped == nil {
		out.Skipped = []api.Skipped{}
	}
	if out.Dropped == nil {
		out.Dropped = []skills.Bind{}
	}
	if len(dropped) > 0 {
		out.Note = fmt.Sprintf("its %d bind(s) on host %s, and their API sockets, are dropped: bind the session again here (`skillfs session mount %s TARGET [--pid PID] [--api-socket PATH]`)",
			len(dropped), from, id)
	}
	return out, nil
}

// mayTakeOver refuses to take session s over from a host that is alive,
// unless force: that host still serves the session.
func (d *Daemon) mayTakeOver(ctx context.Context, s *skills.Session, force bool) error {
	h, err := d.db.Host(ctx, s.Host)
	now := d.clock(ctx)
	switch {
	case errors.Is(err, skills.ErrNotFound):
		return nil // never registered (a session from before hosts): no one serves it
	case err != nil:
		return err
	case force || !d.alive(h.LastSeen, now):
		return nil
	}
	return fmt.Errorf("session %s is served by host %s (%s), which is alive (last seen %s ago, within the %s grace): "+
		"move it once that host is gone, or with --force (force=true) if it no longer serves it: %w",
		s.ID, h.Name, h.ID, now.Sub(h.LastSeen).Round(time.Millisecond), d.hostGrace, skills.ErrElsewhere)
}

// takeOver serves session s here, less what its user may no longer read
// as r says, and records its move from host from; the caller holds d.mu.
func (d *Daemon) takeOver(ctx context.Context, r *readers, s *skills.Session, from string) ([]api.Skipped, error) {
	id := s.ID
	kept, gone := r.keep(s)
	// Served first, so that a session the index says is here is served; a
	// failed move takes the view away again.
	lost, err := d.serveView(r.set, id, kept)
	if err != nil {
		return nil, fmt.Errorf("serve session %s: %w", id, err)
	}
	err = d.events.Record(func(evs ...*skills.Event) error { return d.db.MoveSession(ctx, id, from, d.host, evs...) },
		api.Event{Type: skills.EventMoved, Session: id, Host: d.host, At: time.Now().UTC()})
	if err != nil {
		d.fs.RemoveSession(id)
		return nil, err
	}
	s.Host = d.host
	d.http.SessionChanged(id) // its token died with the move
	if err := d.recordRevoked(ctx, s, kept, gone); err != nil {
		// Its view is without them already; the next look records it.
		d.followed = nil
		d.log.Error("record what a moved session may no longer read", "session", id, "err", err)
	}
	d.log.Info("session moved here", "session", id, "from", from, "skills", len(kept))
	return lost, nil
}
