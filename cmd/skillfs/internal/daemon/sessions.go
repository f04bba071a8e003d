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

	skfs "skillfs/fs"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
)

// CreateRequest asks for a new session.
type CreateRequest struct {
	User    string   `json:"user"`
	Skills  []string `json:"skills"`
	All     bool     `json:"all"`
	Preload []string `json:"preload"`
}

// SessionInfo describes a session; its JSON is part of the CLI contract.
type SessionInfo struct {
	ID       string        `json:"id"`
	User     string        `json:"user"`
	Readable []string      `json:"readable"` // closure order
	Preload  []string      `json:"preload"`
	Path     string        `json:"path"` // the session's subtree in the daemon's mount
	Skipped  []Skipped     `json:"skipped"`
	Binds    []skills.Bind `json:"binds"`
	// Pinned are the skills the session asked for at a version, as
	// slug@hash: refresh and restarts keep them there.
	Pinned []string `json:"pinned"`
}

// Skipped is a requested or depended-on skill left out of a readable set.
type Skipped struct {
	Slug   string `json:"slug"`
	Reason string `json:"reason"`
	Via    string `json:"via,omitempty"`
}

func fromSkipped(in []Skipped) []policy.Skipped {
	out := make([]policy.Skipped, len(in))
	for i, s := range in {
		out[i] = policy.Skipped{Slug: s.Slug, Reason: s.Reason, Via: s.Via}
	}
	return out
}

func toSkipped(in []policy.Skipped) []Skipped {
	out := make([]Skipped, len(in))
	for i, s := range in {
		out[i] = Skipped{Slug: s.Slug, Reason: s.Reason, Via: s.Via}
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
// dependencies are looked at, unless all is asked for.
func closure(set *index.SkillSet, u skills.User, all bool, roots []string) ([]skills.Pin, []policy.Skipped) {
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
	return pins, skipped
}

// CreateSession pins the readable set of a new session and serves it. The
// readable set is computed under the daemon's lock, so a revocation cannot
// land between computing it and serving it (and be pinned into the session
// until its next refresh).
func (d *Daemon) CreateSession(ctx context.Context, req CreateRequest) (*SessionInfo, error) {
	if req.All && len(req.Skills) > 0 {
		return nil, fmt.Errorf("give either a skill list or all, not both: %w", skills.ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.cat.DB().User(ctx, req.User)
	if err != nil {
		return nil, fmt.Errorf("session user %q: %w", req.User, err)
	}
	set, err := d.cat.DB().SkillSet(ctx)
	if err != nil {
		return nil, err
	}
	rq, err := d.readRequested(ctx, set, u, req.Skills, false)
	if err != nil {
		return nil, err
	}
	roots := rq.roots
	pins, skipped := closure(set, u, req.All, roots)
	pins = rq.pin(pins)
	skipped = append(rq.skipped, skipped...)
	preload := dedupe(req.Preload)
	for _, p := range preload {
		if !req.All && !slices.Contains(roots, p) {
			return nil, fmt.Errorf("preload %q is not among the requested skills: %w", p, skills.ErrInvalid)
		}
		if !slices.ContainsFunc(pins, func(pin skills.Pin) bool { return pin.Slug == p }) {
			return nil, fmt.Errorf("preload %q is not among the skills this session can read: %w", p, skills.ErrInvalid)
		}
	}
	s := &skills.Session{ID: newID(), UID: u.UID, All: req.All, Requested: rq.stored, Preload: preload,
		Pins: pins, CreatedAt: time.Now().UTC()}
	// The durable commit and serving the view overlap: the id is known to
	// no one until this returns, and whichever fails undoes the other.
	// Neither the commit nor the undoing of a half-made session stops
	// because the client went away.
	ctx = context.WithoutCancel(ctx)
	stored := make(chan error, 1)
	go func() { stored <- d.cat.DB().CreateSession(ctx, s) }()
	lost, serr := d.serveView(set, s.ID, pins)
	if err := <-stored; err != nil {
		if serr == nil {
			d.fs.RemoveSession(s.ID)
		}
		return nil, err
	}
	if serr != nil {
		if cerr := d.cat.DB().CloseSession(ctx, s.ID); cerr != nil {
			d.log.Error("close a session that could not be served", "session", s.ID, "err", cerr)
		}
		return nil, fmt.Errorf("serve session: %w", serr)
	}
	d.log.Info("session created", "session", s.ID, "user", u.UID, "skills", len(pins))
	info := d.info(s, nil)
	info.Skipped = append(toSkipped(skipped), lost...)
	return info, nil
}

// serveView serves pins as the view of session id. The filesystem checks
// that every pinned version is in the store (once per version, see
// fs.VersionDir); if one is not (lost, or in the quarantine), the view is
// served without it, logged and reported, rather than keeping the whole
// session from being served.
func (d *Daemon) serveView(set *index.SkillSet, id string, pins []skills.Pin) ([]Skipped, error) {
	err := d.fs.SetSession(id, d.view(set, pins))
	if err == nil {
		return nil, nil
	}
	v, lost := d.presentView(set, pins)
	if len(lost) == 0 {
		return nil, err
	}
	return lost, d.fs.SetSession(id, v)
}

// view is the view of pins, unchecked. Views of a version share its
// strings, so that ten thousand sessions of a few versions hold a few
// copies: the directory's through the filesystem, the slug's and version's
// from the catalog set while the pin is its skill's current version.
func (d *Daemon) view(set *index.SkillSet, pins []skills.Pin) skfs.View {
	v := make(skfs.View, 0, len(pins))
	for _, p := range pins {
		if set != nil {
			if sk := set.Get(p.Slug); sk != nil && sk.Version == p.Version {
				p = skills.Pin{Slug: sk.Slug, Version: sk.Version}
			}
		}
		v = append(v, skfs.Skill{Slug: p.Slug, Dir: d.cat.VersionPath(p.Slug, p.Version), Version: p.Version})
	}
	return v
}

// presentView is the view of the pins whose content is in the store, and
// the pins left out.
func (d *Daemon) presentView(set *index.SkillSet, pins []skills.Pin) (skfs.View, []Skipped) {
	v := make(skfs.View, 0, len(pins))
	var lost []Skipped
	for _, sk := range d.view(set, pins) {
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

func (d *Daemon) lost(slug, version string) Skipped {
	d.log.Error("content of a pinned version is missing: not served (run `skillfs check`)", "slug", slug, "version", version)
	return Skipped{Slug: slug, Reason: "its content is missing from the store"}
}

func (d *Daemon) info(s *skills.Session, binds []skills.Bind) *SessionInfo {
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
	return &SessionInfo{ID: s.ID, User: s.UID, Readable: readable, Preload: preload,
		Path: filepath.Join(d.mountRoot, s.ID), Binds: binds, Skipped: []Skipped{}, Pinned: pinnedList(s.Requested)}
}

// Session returns an open session.
func (d *Daemon) Session(ctx context.Context, id string) (*skills.Session, error) {
	s, err := d.cat.DB().Session(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", id, err)
	}
	if !s.ClosedAt.IsZero() {
		return nil, fmt.Errorf("session %q is closed: %w", id, skills.ErrNotFound)
	}
	return s, nil
}

// SessionInfo describes an open session.
func (d *Daemon) SessionInfo(ctx context.Context, id string) (*SessionInfo, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	mounts, err := d.cat.DB().Binds(ctx, id)
	if err != nil {
		return nil, err
	}
	return d.info(s, mounts), nil
}

// Sessions lists at most limit open sessions (all when limit < 0) after
// session after, oldest first (see index.DB.OpenSessionsPage).
func (d *Daemon) Sessions(ctx context.Context, after string, limit int) ([]*SessionInfo, error) {
	list, err := d.cat.DB().OpenSessionsPage(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	binds, err := d.cat.DB().OpenBinds(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*SessionInfo, len(list))
	for i, s := range list {
		out[i] = d.info(s, binds[s.ID])
	}
	return out, nil
}

// Refresh moves a session to the current versions and picks up newly
// readable skills (the agent's next turn).
func (d *Daemon) Refresh(ctx context.Context, id string) (*SessionInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	set, err := d.cat.DB().SkillSet(ctx)
	if err != nil {
		return nil, err
	}
	var pins []skills.Pin
	var skipped []policy.Skipped
	u, err := d.cat.DB().User(ctx, s.UID)
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
	mounts, err := d.cat.DB().Binds(ctx, id)
	if err != nil {
		return nil, err
	}
	err = d.events.record(func(evs ...*skills.Event) error { return d.cat.DB().SetPins(ctx, id, pins, evs...) },
		Event{Type: "refreshed", Session: id, At: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	lost, err := d.serveView(set, id, pins)
	if err != nil {
		return nil, err
	}
	skipped = append(skipped, fromSkipped(lost)...)
	s.Pins = pins
	info := d.info(s, mounts)
	info.Skipped = toSkipped(skipped)
	return info, nil
}

// Close ends a session: its view and binds go away, its record stays.
func (d *Daemon) Close(ctx context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.Session(ctx, id); err != nil {
		return err
	}
	// Without the list the binds would stay mounted, serving a session
	// recorded as closed: refuse instead.
	binds, err := d.cat.DB().Binds(ctx, id)
	if err != nil {
		return err
	}
	for _, b := range binds {
		if err := d.detach(b); err != nil {
			d.log.Warn("unmount session bind", "session", id, "target", b.Target, "pid", b.PID, "err", err)
		}
	}
	d.fs.RemoveSession(id)
	d.rec.forget(id)
	err = d.events.record(func(evs ...*skills.Event) error { return d.cat.DB().CloseSession(ctx, id, evs...) },
		Event{Type: "closed", Session: id, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	d.log.Info("session closed", "session", id)
	return nil
}

// Reevaluate applies catalog changes to every open session at once: a skill
// that was deleted, disabled or unshared, or whose reader lost access, leaves
// the views that hold it. Grants wait for the next refresh.
func (d *Daemon) Reevaluate(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.reevaluate(ctx, false)
	return err
}

// restore serves every open session again after a (re)start, less what its
// user may no longer read.
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

// reevaluate takes from every open session's view the skills its user may
// no longer read, and records that; with serve set it also serves every
// session (a restart), stopping at the first that cannot be served. It
// returns how many open sessions it went through.
func (d *Daemon) reevaluate(ctx context.Context, serve bool) (int, error) {
	set, err := d.cat.DB().SkillSet(ctx)
	if err != nil {
		return 0, err
	}
	users, err := d.cat.DB().Users(ctx)
	if err != nil {
		return 0, err
	}
	byUID := make(map[string]skills.User, len(users))
	for _, u := range users {
		byUID[u.UID] = u
	}
	var errs []error
	n := 0
	for after := ""; ; {
		page, err := d.cat.DB().OpenSessionsPage(ctx, after, sessionPage)
		if err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		for _, s := range page {
			n++
			u, known := byUID[s.UID] // a deleted user reads nothing
			kept := s.Pins[:0:0]
			var gone []string
			for _, p := range s.Pins {
				if sk := set.Get(p.Slug); sk != nil && known && policy.Visible(u, sk) {
					kept = append(kept, p)
				} else {
					gone = append(gone, p.Slug)
				}
			}
			if len(gone) == 0 && !serve {
				continue
			}
			if _, err := d.serveView(set, s.ID, kept); err != nil {
				if serve {
					return n, fmt.Errorf("restore session %s: %w", s.ID, err)
				}
				errs = append(errs, err)
				continue
			}
			if len(gone) == 0 {
				continue
			}
			now := time.Now().UTC()
			revoked := make([]Event, len(gone))
			for i, slug := range gone {
				revoked[i] = Event{Type: "revoked", Session: s.ID, Slug: slug, At: now}
			}
			err := d.events.record(func(evs ...*skills.Event) error { return d.cat.DB().SetPins(ctx, s.ID, kept, evs...) }, revoked...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, slug := range gone {
				d.log.Info("skill revoked from session", "session", s.ID, "slug", slug)
			}
		}
		if len(page) < sessionPage {
			return n, errors.Join(errs...)
		}
		after = page[len(page)-1].ID
	}
}

func dedupe(in []string) []string {
	out := []string{}
	for _, s := range in {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
