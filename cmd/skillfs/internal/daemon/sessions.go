package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	skfs "skillfs/fs"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
)

func fromSkipped(in []api.Skipped) []policy.Skipped {
	out := make([]policy.Skipped, len(in))
	for i, s := range in {
		out[i] = policy.Skipped{Slug: s.Slug, Reason: s.Reason, Via: s.Via}
	}
	return out
}

func toSkipped(in []policy.Skipped) []api.Skipped {
	out := make([]api.Skipped, len(in))
	for i, s := range in {
		out[i] = api.Skipped{Slug: s.Slug, Reason: s.Reason, Via: s.Via}
	}
	return out
}

// newID makes an unguessable session id: 128 random bits.
func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// closure computes what a user may read of the requested roots now, from
// the in-memory catalog set: only the requested skills and their
// dependencies are looked at, unless all is asked for. What is left out is
// reported as the user may be told it (policy.Disclose): a skill she may not
// read looks exactly like one that does not exist.
func closure(set *index.SkillSet, u skills.User, all bool, roots []string, managers ...skills.User) ([]skills.Pin, []policy.Skipped) {
	visible := func(s *skills.Skill) bool { return policy.Visible(u, s) }
	if all {
		roots = roots[:0:0]
		for _, s := range set.All() {
			if visible(s) {
				roots = append(roots, s.Slug)
			}
		}
	}
	readable, skipped := policy.Closure(roots, set.Get, visible)
	pins := make([]skills.Pin, len(readable))
	for i, slug := range readable {
		pins[i] = skills.Pin{Slug: slug, Version: set.Get(slug).Version}
	}
	return pins, policy.Disclose(u, set.Get, skipped, managers...)
}

// readableSet is closure for a session that is choosing its skills (created,
// or given a new list): naming skills of which the user may read none is an
// error wrapping skills.ErrNotFound that names them, so a typo does not open
// an empty session. A mix of readable and missing ones is no error; the
// missing ones are in the skipped list. Refresh uses closure, which never
// refuses: a session that exists keeps working when its skills go away.
func readableSet(set *index.SkillSet, u skills.User, all bool, roots []string, managers ...skills.User) ([]skills.Pin, []policy.Skipped, error) {
	pins, skipped := closure(set, u, all, roots, managers...)
	if all {
		return pins, skipped, nil
	}
	readable := make([]string, len(pins))
	for i, p := range pins {
		readable[i] = p.Slug
	}
	if err := policy.CheckRoots(roots, readable, skipped); err != nil {
		return nil, nil, fmt.Errorf("session for %q: %w", u.UID, err)
	}
	return pins, skipped, nil
}

// selection is a session's request checked against the catalog: the
// skills it names (roots), what its user may read of them with their
// dependencies (pins, at the current versions, and what was left out), and
// the skills to preload.
type selection struct {
	all     bool
	roots   []string
	stored  []string // the skill list as the session records it (slug or slug@<full hash>)
	pins    []skills.Pin
	skipped []policy.Skipped
	preload []string
}

// skippedSlugs are the slugs of skipped.
func skippedSlugs(skipped []policy.Skipped) []string {
	out := make([]string, len(skipped))
	for i, s := range skipped {
		out[i] = s.Slug
	}
	return out
}

// checkRequest refuses a request for both a skill list and all, before
// anything is looked up.
func checkRequest(all bool, requested []string) error {
	if all && len(requested) > 0 {
		return fmt.Errorf("give either a skill list or all, not both: %w", skills.ErrInvalid)
	}
	return nil
}

// selectSkills checks a request — a skill list or all, and the skills to
// preload — for user u against the catalog, and returns the catalog set it
// used. Creating a session and changing its skills both go through it.
// caller, when set, is told why the skills it manages were left out.
func (d *Daemon) selectSkills(ctx context.Context, u skills.User, caller string, all bool, requested, preload []string) (*index.SkillSet, *selection, error) {
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		return nil, nil, err
	}
	rq, err := d.readRequested(ctx, set, u, requested, false)
	if err != nil {
		return nil, nil, err
	}
	roots := rq.roots
	if len(roots) == 0 && len(rq.skipped) > 0 {
		// Every skill named asks for a version that does not exist.
		return nil, nil, policy.CheckRoots(skippedSlugs(rq.skipped), nil, rq.skipped)
	}
	var managers []skills.User
	if caller != "" && caller != u.UID {
		if m, err := d.db.User(ctx, caller); err == nil {
			managers = append(managers, m)
		}
	}
	pins, skipped, err := readableSet(set, u, all, roots, managers...)
	if err != nil {
		return nil, nil, err
	}
	pins = rq.pin(pins)
	skipped = append(rq.skipped, skipped...)
	pre := distinctNonEmpty(preload)
	for _, p := range pre {
		if !all && !slices.Contains(roots, p) {
			return nil, nil, fmt.Errorf("preload %q is not among the requested skills: %w", p, skills.ErrInvalid)
		}
		if !slices.ContainsFunc(pins, func(pin skills.Pin) bool { return pin.Slug == p }) {
			return nil, nil, fmt.Errorf("preload %q is not among the skills this session can read: %w", p, skills.ErrInvalid)
		}
	}
	return set, &selection{all: all, roots: roots, stored: rq.stored, pins: pins, skipped: skipped, preload: pre}, nil
}

// CreateSession pins the readable set of a new session and serves it, and
// answers its token, this once (withToken). The readable set is computed
// under the daemon's lock, so a revocation cannot land between computing
// it and serving it (and be pinned into the session until its next
// refresh).
func (d *Daemon) CreateSession(ctx context.Context, req api.CreateRequest) (*api.SessionInfo, error) {
	if err := checkRequest(req.All, req.Skills); err != nil {
		return nil, err
	}
	if err := checkClient(req); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	parent, err := d.parentFor(ctx, &req)
	if err != nil {
		return nil, err
	}
	u, err := d.db.User(ctx, req.User)
	if err != nil {
		return nil, fmt.Errorf("session user %q: %w", req.User, err)
	}
	if info, err := d.keyed(ctx, u.UID, req.Parent, req.Key); info != nil || err != nil {
		return info, err
	}
	if err := d.checkCaps(ctx, &skills.Session{UID: u.UID, Parent: req.Parent}); err != nil {
		return nil, err
	}
	set, sel, err := d.chooseSkills(ctx, u, parent, req)
	if err != nil {
		return nil, err
	}
	pins := sel.pins
	s := &skills.Session{ID: newID(), UID: u.UID, All: sel.all, Requested: sel.stored, Preload: sel.preload,
		Pins: pins, CreatedAt: time.Now().UTC(), Host: d.host, Key: req.Key, Labels: req.Labels, Parent: req.Parent}
	// The durable commit and serving the view overlap: the id is known to
	// no one until this returns, and whichever fails undoes the other.
	// Neither the commit nor the undoing of a half-made session stops
	// because the client went away.
	ctx = context.WithoutCancel(ctx)
	stored := make(chan error, 1)
	go func() { stored <- d.db.CreateSessionCapped(ctx, s, d.opts.Caps.index()) }()
	lost, serr := d.serveView(set, s.ID, pins)
	if err := <-stored; err != nil {
		if serr == nil {
			d.fs.RemoveSession(s.ID)
		}
		return d.keyTaken(ctx, capRefusal(err), s)
	}
	if serr != nil {
		if cerr := d.db.CloseSession(ctx, s.ID); cerr != nil {
			d.log.Error("close a session that could not be served", "session", s.ID, "err", cerr)
		}
		return nil, fmt.Errorf("serve session: %w", serr)
	}
	d.log.Info("session created", "session", s.ID, "user", u.UID, "skills", len(pins))
	info := d.info(s, nil)
	info.Skipped = append(toSkipped(sel.skipped), lost...)
	return d.withToken(ctx, info)
}

// serveView serves pins as the view of session id. The filesystem checks
// that every pinned version is in the store (once per version, see
// fs.VersionDir); if one is not (lost, in the quarantine, or with a shared
// index not fetched), the view is served without it, logged and reported,
// rather than keeping the whole session from being served.
func (d *Daemon) serveView(set *index.SkillSet, id string, pins []skills.Pin) ([]api.Skipped, error) {
	v := d.view(set, pins)
	err := d.fs.SetSession(id, v)
	if err == nil {
		return nil, nil
	}
	v, lost := d.present(v)
	if len(lost) == 0 {
		return nil, err
	}
	return lost, d.fs.SetSession(id, v)
}

// view is the view of pins, each version's directory this host's copy
// (catalog.EnsureVersion: with a shared index fetched and verified here
// first), "" for a version whose content cannot be had. Views of a version
// share its strings, so that ten thousand sessions of a few versions hold
// a few copies: the directory's through the filesystem, the slug's and
// version's from the catalog set while the pin is its skill's current
// version.
func (d *Daemon) view(set *index.SkillSet, pins []skills.Pin) skfs.View {
	v := make(skfs.View, 0, len(pins))
	for _, p := range pins {
		if set != nil {
			if sk := set.Get(p.Slug); sk != nil && sk.Version == p.Version {
				p = skills.Pin{Slug: sk.Slug, Version: sk.Version}
			}
		}
		dir, err := d.cat.EnsureVersion(context.Background(), p.Slug, p.Version)
		if err != nil {
			d.log.Debug("content of a pinned version", "slug", p.Slug, "version", p.Version, "err", err)
		}
		v = append(v, skfs.Skill{Slug: p.Slug, Dir: dir, Version: p.Version})
	}
	return v
}

// presentView is the view of the pins whose content is in the store, and
// the pins left out.
func (d *Daemon) presentView(set *index.SkillSet, pins []skills.Pin) (skfs.View, []api.Skipped) {
	return d.present(d.view(set, pins))
}

// present is the part of a view whose content is in the store, and the
// skills left out.
func (d *Daemon) present(all skfs.View) (skfs.View, []api.Skipped) {
	v := make(skfs.View, 0, len(all))
	var lost []api.Skipped
	for _, sk := range all {
		if sk.Dir == "" {
			lost = append(lost, d.lost(sk.Slug, sk.Version))
			continue
		}
		if _, err := d.fs.VersionDir(sk.Dir); err != nil {
			lost = append(lost, d.lost(sk.Slug, sk.Version))
			continue
		}
		v = append(v, sk)
	}
	return v, lost
}

func (d *Daemon) lost(slug, version string) api.Skipped {
	if d.cat.Shared() {
		d.log.Error("content of a pinned version is not in this host's cache and could not be fetched: not served", "slug", slug, "version", version)
		return api.Skipped{Slug: slug, Reason: "its content could not be fetched from the shared index"}
	}
	d.log.Error("content of a pinned version is missing: not served (run `skillfs check`)", "slug", slug, "version", version)
	return api.Skipped{Slug: slug, Reason: "its content is missing from the store"}
}

func (d *Daemon) info(s *skills.Session, binds []skills.Bind) *api.SessionInfo {
	readable := make([]string, len(s.Pins))
	for i, p := range s.Pins {
		readable[i] = p.Slug
	}
	if binds == nil {
		binds = []skills.Bind{}
	}
	preload := s.Preload
	if preload == nil {
		preload = []string{}
	}
	return &api.SessionInfo{ID: s.ID, User: s.UID, Readable: readable, Preload: preload,
		Path: filepath.Join(d.mountRoot, s.ID), Binds: binds, Skipped: []api.Skipped{}, Pinned: pinnedList(s.Requested), Host: s.Host,
		Key: s.Key, Labels: s.Labels, Parent: s.Parent}
}

// placeElsewhere sets the path of the sessions in infos that another host
// serves to where that host's mount has them (as it registered it).
func (d *Daemon) placeElsewhere(ctx context.Context, infos ...*api.SessionInfo) error {
	var hosts map[string]skills.Host
	for _, info := range infos {
		if info.Host == d.host {
			continue
		}
		if hosts == nil {
			list, err := d.db.Hosts(ctx)
			if err != nil {
				return err
			}
			hosts = make(map[string]skills.Host, len(list))
			for _, h := range list {
				hosts[h.ID] = h
			}
		}
		info.Path = ""
		if h, ok := hosts[info.Host]; ok && h.Mount != "" {
			info.Path = filepath.Join(h.Mount, info.ID)
		}
	}
	return nil
}

// servedSession returns open session id, which this host must serve for
// the caller to change it (see served).
func (d *Daemon) servedSession(ctx context.Context, id string) (*skills.Session, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := d.served(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// SessionClosed says whether session id, open or closed, is closed.
func (d *Daemon) SessionClosed(ctx context.Context, id string) (bool, error) {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return false, fmt.Errorf("session %q: %w", id, err)
	}
	return !s.ClosedAt.IsZero(), nil
}

// Session returns an open session.
func (d *Daemon) Session(ctx context.Context, id string) (*skills.Session, error) {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", id, err)
	}
	if !s.ClosedAt.IsZero() {
		return nil, fmt.Errorf("session %q is closed: %w", id, skills.ErrNotFound)
	}
	return s, nil
}

// SessionInfo describes an open session, whichever host serves it.
func (d *Daemon) SessionInfo(ctx context.Context, id string) (*api.SessionInfo, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	mounts, err := d.db.Binds(ctx, id)
	if err != nil {
		return nil, err
	}
	info := d.info(s, mounts)
	return info, d.placeElsewhere(ctx, info)
}

// Sessions lists at most limit open sessions (all when limit < 0) after
// session after, oldest first, that q matches (see
// index.DB.FindOpenSessions).
func (d *Daemon) Sessions(ctx context.Context, q api.SessionQuery, after string, limit int) ([]*api.SessionInfo, error) {
	if err := checkQuery(q); err != nil {
		return nil, err
	}
	list, err := d.db.FindOpenSessions(ctx, index.SessionFilter{Host: q.Host, User: q.User, Key: q.Key, Labels: q.Labels}, after, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	binds, err := d.db.OpenBinds(ctx, "", ids)
	if err != nil {
		return nil, err
	}
	out := make([]*api.SessionInfo, len(list))
	for i, s := range list {
		out[i] = d.info(s, binds[s.ID])
	}
	return out, d.placeElsewhere(ctx, out...)
}

// Refresh moves a session to the current versions and picks up newly
// readable skills (the agent's next turn).
func (d *Daemon) Refresh(ctx context.Context, id string) (*api.SessionInfo, error) {
	return d.refresh(ctx, id, true)
}

// refresh is Refresh; unless always, a refresh that would change nothing
// (the same pins) writes nothing and records no event, as a turn's does.
func (d *Daemon) refresh(ctx context.Context, id string, always bool) (*api.SessionInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.servedSession(ctx, id)
	if err != nil {
		return nil, err
	}
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		return nil, err
	}
	if s.IsChild() {
		return d.refreshChild(ctx, set, s)
	}
	var pins []skills.Pin
	var skipped []policy.Skipped
	u, err := d.db.User(ctx, s.UID)
	switch {
	case errors.Is(err, skills.ErrNotFound):
		pins = []skills.Pin{} // a deleted user reads nothing
	case err != nil:
		return nil, err
	default:
		rq, err := d.readRequested(ctx, set, u, s.Requested, true)
		if err != nil {
			return nil, err
		}
		pins, skipped = closure(set, u, s.All, rq.roots)
		pins = rq.pin(pins)
		skipped = append(rq.skipped, skipped...)
	}
	// Read before changing anything, so a failure leaves the session as it was.
	mounts, err := d.db.Binds(ctx, id)
	if err != nil {
		return nil, err
	}
	if !always && slices.Equal(pins, s.Pins) {
		info := d.info(s, mounts)
		info.Skipped = toSkipped(skipped)
		return info, nil
	}
	err = d.events.Record(func(evs ...*skills.Event) error { return d.db.SetPinsOn(ctx, d.host, id, pins, evs...) },
		api.Event{Type: skills.EventRefreshed, Session: id, At: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	lost, err := d.serveView(set, id, pins)
	if err != nil {
		return nil, err
	}
	skipped = append(skipped, fromSkipped(lost)...)
	s.Pins = pins
	d.followParent(ctx, set, s)
	info := d.info(s, mounts)
	info.Skipped = toSkipped(skipped)
	return info, nil
}

// SetSkills gives an open session a new request, as if it had been created
// with it, keeping its id, binds and the activations of the skills it still
// reads. A set is not a refresh: a skill the session read before keeps its
// pinned version, one it did not is pinned at its current version. Skills
// it no longer reads leave its view at once (open handles fail their next
// read), each with a revoked event; a changed event follows.
func (d *Daemon) SetSkills(ctx context.Context, id string, req api.SetRequest) (*api.SessionInfo, error) {
	if req.Skills == nil && !req.All {
		return nil, fmt.Errorf("set the skills of session %q: give a skill list (an empty one reads nothing) or all: %w",
			id, skills.ErrInvalid)
	}
	if err := checkRequest(req.All, req.Skills); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.servedSession(ctx, id)
	if err != nil {
		return nil, err
	}
	u, err := d.db.User(ctx, s.UID)
	if err != nil {
		return nil, fmt.Errorf("session %q: its user %q: %w", id, s.UID, err)
	}
	parent, err := d.parentOf(ctx, s)
	if err != nil {
		return nil, err
	}
	set, sel, err := d.chooseSkills(ctx, u, parent, api.CreateRequest{Skills: req.Skills, All: req.All, Preload: req.Preload, Caller: req.Caller})
	if err != nil {
		return nil, err
	}
	pinned := make(map[string]string, len(s.Pins))
	for _, p := range s.Pins {
		pinned[p.Slug] = p.Version
	}
	asked := pinnedVersions(sel.stored)
	for i, p := range sel.pins {
		if v, ok := pinned[p.Slug]; ok && asked[p.Slug] == "" {
			sel.pins[i].Version = v // kept at its version, unless another is asked for
		}
		delete(pinned, p.Slug)
	}
	// Read before changing anything, so a failure leaves the session as it was.
	mounts, err := d.db.Binds(ctx, id)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	var evs []api.Event
	for _, p := range s.Pins {
		if _, gone := pinned[p.Slug]; gone {
			evs = append(evs, api.Event{Type: skills.EventRevoked, Session: id, Slug: p.Slug, At: now})
		}
	}
	evs = append(evs, api.Event{Type: skills.EventChanged, Session: id, At: now})
	next := &skills.Session{ID: id, UID: s.UID, All: sel.all, Requested: sel.stored, Preload: sel.preload,
		Pins: sel.pins, CreatedAt: s.CreatedAt, Host: s.Host, Key: s.Key, Labels: s.Labels, Parent: s.Parent}
	err = d.events.Record(func(evs ...*skills.Event) error { return d.db.SetSkills(ctx, next, evs...) }, evs...)
	if err != nil {
		return nil, err
	}
	lost, err := d.serveView(set, id, sel.pins)
	if err != nil {
		return nil, err
	}
	d.followParent(ctx, set, next)
	d.log.Info("session skills set", "session", id, "skills", len(sel.pins), "revoked", len(evs)-1)
	info := d.info(next, mounts)
	info.Skipped = append(toSkipped(sel.skipped), lost...)
	return info, nil
}

// CloseSession ends a session this host serves: its view and binds go
// away, its record stays.
func (d *Daemon) CloseSession(ctx context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeSession(ctx, id)
}

// closeSession is CloseSession, its sub-agent sessions closed first; the
// caller holds d.mu.
func (d *Daemon) closeSession(ctx context.Context, id string) error {
	if _, err := d.servedSession(ctx, id); err != nil {
		return err
	}
	if err := d.closeChildren(ctx, id); err != nil {
		return err
	}
	// Without the list the binds would stay mounted, serving a session
	// recorded as closed: refuse instead.
	binds, err := d.db.Binds(ctx, id)
	if err != nil {
		return err
	}
	for _, b := range binds {
		if err := d.detach(id, b); err != nil {
			d.log.Warn("unmount session bind", "session", id, "target", b.Target, "pid", b.PID, "err", err)
		}
	}
	d.fs.RemoveSession(id)
	d.rec.Forget(id)
	err = d.events.Record(func(evs ...*skills.Event) error { return d.db.CloseSession(ctx, id, evs...) },
		api.Event{Type: skills.EventClosed, Session: id, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	d.http.SessionChanged(id) // its token died with it
	if err := d.db.ForgetBinds(ctx, id, d.host); err != nil {
		// Detached already: the records go with the next settle or start.
		d.log.Warn("forget the binds of a closed session", "session", id, "err", err)
	}
	d.log.Info("session closed", "session", id)
	return nil
}

// DeleteUser deletes a user as the catalog does (catalog.DeleteUser: their
// skills go to the user to, "" for the acting user), closing their open
// sessions when force is set: here (views and binds gone) those this host
// serves; those other hosts serve go as those hosts follow the change (see
// follow).
func (d *Daemon) DeleteUser(ctx context.Context, as, uid, to string, force bool) (*catalog.UserDeleted, error) {
	res, err := d.cat.DeleteUser(ctx, as, uid, to, force, func(ctx context.Context, ids []string) error {
		for _, id := range ids {
			// A sub-agent session is closed with its parent, which is older.
			if closed, err := d.SessionClosed(ctx, id); err == nil && closed {
				continue
			}
			if err := d.CloseSession(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Reevaluate applies catalog changes to every open session this host
// serves at once: a skill that was deleted, disabled or unshared, or whose
// reader lost access, leaves the views that hold it. Grants wait for the
// next refresh.
func (d *Daemon) Reevaluate(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.reevaluate(ctx, false)
	return err
}

// restore serves every open session of this host again after a
// (re)start, less what its user may no longer read.
func (d *Daemon) restore(ctx context.Context) error {
	n, err := d.reevaluate(ctx, true)
	if err != nil {
		return err
	}
	d.log.Info("sessions restored", "count", n)
	return nil
}

// sessionPage is how many sessions restore and Reevaluate hold at a time.
const sessionPage = 1000

// readers is what deciding who may still read what needs: the catalog and
// its users as of one look, with the users' change mark read before them
// (a user changed after the look moves the mark again).
type readers struct {
	set   *index.SkillSet
	byUID map[string]skills.User
	mark  int64 // index.Marks.Users
}

// lookAtReaders reads the readers now.
func (d *Daemon) lookAtReaders(ctx context.Context) (*readers, error) {
	m, err := d.db.Marks(ctx, d.host)
	if err != nil {
		return nil, err
	}
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		return nil, err
	}
	users, err := d.db.Users(ctx)
	if err != nil {
		return nil, err
	}
	r := &readers{set: set, byUID: make(map[string]skills.User, len(users)), mark: m.Users}
	for _, u := range users {
		r.byUID[u.UID] = u
	}
	return r, nil
}

// reevaluate takes from every open session's view of this host the skills
// its user may no longer read, and records that; with serve set it also
// serves every session (a restart), stopping at the first that cannot be
// served. It returns how many open sessions it went through. The caller
// holds d.mu; once every session is through, what it looked at is what
// this host's views follow (d.followed).
func (d *Daemon) reevaluate(ctx context.Context, serve bool) (int, error) {
	r, err := d.lookAtReaders(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for after := ""; ; {
		page, err := d.db.OpenSessionsPage(ctx, d.host, after, sessionPage)
		if err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		for _, s := range page {
			n++
			if _, err := d.revoke(ctx, r, s, serve); err != nil {
				if serve {
					return n, fmt.Errorf("restore session %s: %w", s.ID, err)
				}
				errs = append(errs, err)
			}
		}
		if len(page) < sessionPage {
			if len(errs) == 0 {
				d.followed = r
			}
			d.forgetGoneSkills(r.set)
			return n, errors.Join(errs...)
		}
		after = page[len(page)-1].ID
	}
}

// forgetGoneSkills removes the metric series of the skills set no longer
// holds: their views are revoked by now, so no open counts into them again.
func (d *Daemon) forgetGoneSkills(set *index.SkillSet) {
	if n := d.metrics.forgetGone(func(slug string) bool { return set.Get(slug) != nil }); n > 0 {
		d.log.Debug("metric series of deleted skills removed", "skills", n)
	}
}

// keep splits the pins of session s into those its user may still read,
// as r says, and the slugs of those it may not.
func (r *readers) keep(s *skills.Session) (kept []skills.Pin, gone []string) {
	u, known := r.byUID[s.UID] // a deleted user reads nothing
	kept = s.Pins[:0:0]
	for _, p := range s.Pins {
		if sk := r.set.Get(p.Slug); sk != nil && known && policy.Visible(u, sk) {
			kept = append(kept, p)
		} else {
			gone = append(gone, p.Slug)
		}
	}
	return kept, gone
}

// revoke takes from session s's view the skills its user may no longer
// read, as r says, and records that (see recordRevoked); with serve set it
// serves the view even when nothing was taken (a restart). It returns the
// pins served without their content (see serveView). The caller holds d.mu.
func (d *Daemon) revoke(ctx context.Context, r *readers, s *skills.Session, serve bool) ([]api.Skipped, error) {
	kept, gone := r.keep(s)
	if s.IsChild() {
		kept, gone = d.withinParent(ctx, s, kept, gone)
	}
	if len(gone) == 0 && !serve {
		return nil, nil
	}
	lost, err := d.serveView(r.set, s.ID, kept)
	if err != nil {
		return lost, err
	}
	return lost, d.recordRevoked(ctx, s, kept, gone)
}

// recordRevoked stores kept as the pins of session s, whose view no longer
// holds the skills gone, with a revoked event for each (s.Pins follows).
func (d *Daemon) recordRevoked(ctx context.Context, s *skills.Session, kept []skills.Pin, gone []string) error {
	if len(gone) == 0 {
		return nil
	}
	now := time.Now().UTC()
	revoked := make([]api.Event, len(gone))
	for i, slug := range gone {
		revoked[i] = api.Event{Type: skills.EventRevoked, Session: s.ID, Slug: slug, At: now}
	}
	err := d.events.Record(func(evs ...*skills.Event) error { return d.db.SetPinsOn(ctx, d.host, s.ID, kept, evs...) }, revoked...)
	if err != nil {
		return err
	}
	s.Pins = kept
	for _, slug := range gone {
		d.log.Info("skill revoked from session", "session", s.ID, "slug", slug)
	}
	return nil
}

// distinctNonEmpty is the strings of in but "", each once, in their order
// (never nil: an empty list stays one).
func distinctNonEmpty(in []string) []string {
	out := []string{}
	seen := make(map[string]bool, len(in))
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
