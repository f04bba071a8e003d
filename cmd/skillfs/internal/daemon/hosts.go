package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// A daemon is one host of its catalog: it registers in the index when it
// starts and heartbeats while it runs, so that the hosts sharing an index
// can tell which of them serve. A host whose last heartbeat is older than
// the grace is gone: its sessions may be moved to another host.
const (
	DefaultHeartbeatEvery = 2 * time.Second
	DefaultHostGrace      = 10 * time.Second
)

// clock is the time hosts are judged by: the index's (see index.DB.Clock),
// so heartbeats of hosts whose clocks disagree compare; this machine's
// when the index cannot say.
func (d *Daemon) clock(ctx context.Context) time.Time {
	if t, err := d.db.Clock(ctx); err == nil {
		return t
	}
	return time.Now().UTC()
}

// alive says whether a host last seen at seen is alive at now.
func (d *Daemon) alive(seen, now time.Time) bool { return now.Sub(seen) <= d.hostGrace }

// Hosts lists the hosts registered in the index, by name.
func (d *Daemon) Hosts(ctx context.Context) ([]api.HostInfo, error) {
	list, err := d.db.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	now := d.clock(ctx)
	out := make([]api.HostInfo, len(list))
	for i, h := range list {
		out[i] = api.HostInfo{Host: h, Alive: d.alive(h.LastSeen, now), Self: h.ID == d.host}
	}
	return out, nil
}

// register records this daemon as a host, started now, with the API
// address it advertises (tcp, "" for none).
func (d *Daemon) register(ctx context.Context, tcp string) error {
	now := d.clock(ctx)
	h := skills.Host{ID: d.host, Name: d.hostName, API: tcp, Mount: d.mountRoot, StartedAt: d.started, LastSeen: now}
	if err := d.db.RegisterHost(ctx, h); err != nil {
		return err
	}
	d.apiAddr = tcp
	return nil
}

// heartbeat records every interval that this host is alive, until ctx
// ends, registering it again if its row went away. A failure is logged
// once until a heartbeat goes through again.
func (d *Daemon) heartbeat(ctx context.Context, every time.Duration) {
	failing := false
	periodically(ctx, every, func() {
		err := d.db.Heartbeat(ctx, d.host, d.clock(ctx))
		if errors.Is(err, skills.ErrNotFound) {
			err = d.register(ctx, d.apiAddr)
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			d.log.Error("heartbeat: other hosts will take this one for gone after the grace", "grace", d.hostGrace, "err", err)
			failing = true
		case err == nil && failing:
			d.log.Info("heartbeat recorded again")
			failing = false
		}
	})
}

// served checks that this host serves session s, which a change to its
// view needs. Otherwise it says which host does, and whether that host is
// gone, in which case the session may be moved here.
func (d *Daemon) served(ctx context.Context, s *skills.Session) error {
	if s.Host == d.host {
		return nil
	}
	h, err := d.db.Host(ctx, s.Host)
	switch {
	case errors.Is(err, skills.ErrNotFound):
		return fmt.Errorf("session %s is served by host %q, which is not registered: take it over here with `skillfs session move %s`: %w",
			s.ID, s.Host, s.ID, skills.ErrElsewhere)
	case err != nil:
		return err
	}
	now := d.clock(ctx)
	ago := now.Sub(h.LastSeen).Round(time.Second)
	if !d.alive(h.LastSeen, now) {
		return fmt.Errorf("session %s is served by host %s (%s), which is gone (last seen %s ago): take it over here with `skillfs session move %s`: %w",
			s.ID, h.Name, h.ID, ago, s.ID, skills.ErrElsewhere)
	}
	where := ""
	if h.API != "" {
		where = ", API " + h.API
	}
	return fmt.Errorf("session %s is served by host %s (%s%s): change it there: %w", s.ID, h.Name, h.ID, where, skills.ErrElsewhere)
}
