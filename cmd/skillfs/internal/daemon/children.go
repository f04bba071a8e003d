package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
)

// A sub-agent session (a child) is opened in an open top-level session (its
// parent), for the same user. Its readable set is a subset of its parent's,
// at the parent's versions: the skills it asks for (all of the parent's by
// default) with their dependencies, as far as the parent reads them. It
// follows its parent: whenever the parent's readable set changes (a set, a
// refresh, a revocation) each child is recomputed from its own request
// over the parent's new set, and its own refresh does the same (it never
// reads the catalog beyond its parent). It is closed with its parent, is
// served by its parent's host (moved with it; never alone), may not open
// children, and may not install skills (IsChild). Its events are also in
// its parent's event stream, each with the child's session id.

// notInParent is the reason a child is not given a skill: the words are
// the same whether the skill exists or not, so a sandboxed caller learns
// nothing of the catalog beyond its parent's set.
const notInParent = "not in the parent session's readable set"

// IsChild says whether session id is a sub-agent session.
func (d *Daemon) IsChild(ctx context.Context, id string) (bool, error) {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return false, fmt.Errorf("session %q: %w", id, err)
	}
	return s.IsChild(), nil
}

// The daemon tells the access table the parents of sessions, so that a
// session's credential reads its children's sessions as its own.
var _ server.Parents = (*Daemon)(nil)

// SessionParent is the session that opened session id, "" for a top-level
// session (server.Parents).
func (d *Daemon) SessionParent(ctx context.Context, id string) (string, error) {
	s, err := d.db.Session(ctx, id)
	if err != nil {
		return "", fmt.Errorf("session %q: %w", id, err)
	}
	return s.Parent, nil
}

// parentFor checks the parent a create request names, if any, and returns
// it: open, served here, no child itself, of the request's user (the
// parent's when the request names none, which it then does). A child that
// asks for no skills reads all of its parent's.
func (d *Daemon) parentFor(ctx context.Context, req *api.CreateRequest) (*skills.Session, error) {
	if req.Parent == "" {
		return nil, nil
	}
	p, err := d.servedSession(ctx, req.Parent)
	if err != nil {
		return nil, fmt.Errorf("parent: %w", err)
	}
	if p.IsChild() {
		return nil, fmt.Errorf("session %s is a sub-agent session, which may not open sub-agent sessions: %w", p.ID, skills.ErrPermission)
	}
	switch req.User {
	case "":
		req.User = p.UID
	case p.UID:
	default:
		return nil, fmt.Errorf("a sub-agent session is of its parent's user %q, not %q: %w", p.UID, req.User, skills.ErrInvalid)
	}
	if len(req.Skills) == 0 {
		req.All = true
	}
	return p, nil
}

// parentOf is the open parent of session s, nil for a top-level session.
func (d *Daemon) parentOf(ctx context.Context, s *skills.Session) (*skills.Session, error) {
	if !s.IsChild() {
		return nil, nil
	}
	p, err := d.Session(ctx, s.Parent)
	if err != nil {
		return nil, fmt.Errorf("the parent of session %s: %w", s.ID, err)
	}
	return p, nil
}

// chooseSkills is selectSkills for a top-level session (parent nil), and
// childSelection over parent's readable set for a sub-agent of parent.
func (d *Daemon) chooseSkills(ctx context.Context, u skills.User, parent *skills.Session, req api.CreateRequest) (*index.SkillSet, *selection, error) {
	if parent == nil {
		return d.selectSkills(ctx, u, req.Caller, req.All, req.Skills, req.Preload)
	}
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		return nil, nil, err
	}
	sel, err := childSelection(set, parent, req.All, req.Skills, req.Preload, true)
	if err != nil {
		return nil, nil, err
	}
	return set, sel, nil
}

// childSelection is the selection of a sub-agent of parent that asks for
// requested (or all of the parent's) and preload: the closure of what it
// asks for within the parent's readable set, at the parent's versions.
// With strict (a create or set) a skill asked for outside the parent's set,
// a version asked for, or a preload outside the child's set is an error
// wrapping skills.ErrInvalid; without (following the parent), such skills
// are left out.
func childSelection(set *index.SkillSet, parent *skills.Session, all bool, requested, preload []string, strict bool) (*selection, error) {
	at := make(map[string]string, len(parent.Pins))
	for _, p := range parent.Pins {
		at[p.Slug] = p.Version
	}
	roots := []string{}
	var skipped []policy.Skipped
	if all {
		for _, p := range parent.Pins {
			roots = append(roots, p.Slug)
		}
	}
	for _, r := range distinctNonEmpty(requested) {
		if all {
			break
		}
		if strings.Contains(r, "@") {
			if strict {
				return nil, fmt.Errorf("skill %q: a sub-agent session reads its parent's versions: ask for it without one: %w", r, skills.ErrInvalid)
			}
			r, _, _ = strings.Cut(r, "@")
		}
		if _, ok := at[r]; !ok {
			if strict {
				return nil, fmt.Errorf("skill %q: %s: %w", r, notInParent, skills.ErrInvalid)
			}
			skipped = append(skipped, policy.Skipped{Slug: r, Reason: notInParent})
			continue
		}
		roots = append(roots, r)
	}
	lookup := func(slug string) *skills.Skill {
		if _, ok := at[slug]; !ok {
			return nil
		}
		return set.Get(slug)
	}
	readable, left := policy.Closure(roots, lookup, func(*skills.Skill) bool { return true })
	for _, s := range left {
		if _, ok := at[s.Slug]; !ok {
			s.Reason = notInParent
		}
		skipped = append(skipped, s)
	}
	pins := make([]skills.Pin, len(readable))
	for i, slug := range readable {
		pins[i] = skills.Pin{Slug: slug, Version: at[slug]}
	}
	pre := distinctNonEmpty(preload)
	if strict {
		for _, p := range pre {
			if !slices.Contains(readable, p) {
				return nil, fmt.Errorf("preload %q is not among the skills this session can read: %w", p, skills.ErrInvalid)
			}
		}
	}
	stored := roots
	if all {
		stored = []string{}
	}
	return &selection{all: all, roots: roots, stored: stored, pins: pins, skipped: skipped, preload: pre}, nil
}

// followParent recomputes every open child of parent over parent's
// readable set now (see follow): a child's skills the parent no longer
// reads leave its view at once. A child that cannot be recomputed is
// logged, and its view taken to what it shares with its parent's at the
// next reevaluation (withinParent). The caller holds d.mu.
func (d *Daemon) followParent(ctx context.Context, set *index.SkillSet, parent *skills.Session) {
	kids, err := d.db.OpenChildren(ctx, parent.ID)
	if err != nil {
		d.followed = nil
		d.log.Error("follow a session's change in its sub-agent sessions", "session", parent.ID, "err", err)
		return
	}
	for _, k := range kids {
		if _, err := d.follow1(ctx, set, parent, k, false); err != nil {
			d.followed = nil
			d.log.Error("follow a session's change in a sub-agent session", "session", parent.ID, "child", k.ID, "err", err)
		}
	}
}

// follow1 recomputes child k over parent's readable set: it is served
// first, then recorded with a revoked event for each skill that left it
// and, when skills joined it or moved to another version (or refresh is
// set), a refreshed event. It returns what the view left out (see
// serveView) and updates k.Pins.
func (d *Daemon) follow1(ctx context.Context, set *index.SkillSet, parent, k *skills.Session, refresh bool) ([]api.Skipped, error) {
	sel, err := childSelection(set, parent, k.All, k.Requested, k.Preload, false)
	if err != nil {
		return nil, err
	}
	changed := slices.ContainsFunc(sel.pins, func(p skills.Pin) bool { return !slices.Contains(k.Pins, p) })
	var evs []api.Event
	now := time.Now().UTC()
	for _, p := range k.Pins {
		if !slices.ContainsFunc(sel.pins, func(q skills.Pin) bool { return q.Slug == p.Slug }) {
			evs = append(evs, api.Event{Type: skills.EventRevoked, Session: k.ID, Slug: p.Slug, At: now})
		}
	}
	if changed || refresh {
		evs = append(evs, api.Event{Type: skills.EventRefreshed, Session: k.ID, At: now})
	}
	if len(evs) == 0 {
		return nil, nil
	}
	lost, err := d.serveView(set, k.ID, sel.pins)
	if err != nil {
		return lost, err
	}
	err = d.events.Record(func(evs ...*skills.Event) error { return d.db.SetPinsOn(ctx, d.host, k.ID, sel.pins, evs...) }, evs...)
	if err != nil {
		return lost, err
	}
	k.Pins = sel.pins
	return lost, nil
}

// refreshChild is Refresh of child s: recomputed over its parent's
// readable set as it is now. The caller holds d.mu.
func (d *Daemon) refreshChild(ctx context.Context, set *index.SkillSet, s *skills.Session) (*api.SessionInfo, error) {
	parent, err := d.parentOf(ctx, s)
	if err != nil {
		return nil, err
	}
	mounts, err := d.db.Binds(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	lost, err := d.follow1(ctx, set, parent, s, true)
	if err != nil {
		return nil, err
	}
	info := d.info(s, mounts)
	info.Skipped = append(info.Skipped, lost...)
	return info, nil
}

// withinParent narrows kept, the pins child s keeps, to those its parent
// reads (at the parent's versions), adding the others to gone: what a
// reevaluation applies to a child. A parent that cannot be read leaves
// kept as it is.
func (d *Daemon) withinParent(ctx context.Context, s *skills.Session, kept []skills.Pin, gone []string) ([]skills.Pin, []string) {
	parent, err := d.db.Session(ctx, s.Parent)
	if err != nil {
		d.log.Warn("the parent of a sub-agent session", "session", s.ID, "parent", s.Parent, "err", err)
		return kept, gone
	}
	in := kept[:0:0]
	for _, p := range kept {
		if slices.Contains(parent.Pins, p) {
			in = append(in, p)
		} else {
			gone = append(gone, p.Slug)
		}
	}
	return in, gone
}

// closeChildren closes the open children of session id (before it: a
// failure leaves the parent open, to be closed again). The caller holds
// d.mu.
func (d *Daemon) closeChildren(ctx context.Context, id string) error {
	kids, err := d.db.OpenChildren(ctx, id)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range kids {
		if err := d.closeSession(ctx, k.ID); err != nil {
			errs = append(errs, fmt.Errorf("close sub-agent session %s: %w", k.ID, err))
		}
	}
	return errors.Join(errs...)
}

// refuseChildMove refuses to move a child alone: it is served with its
// parent, and moves with it.
func refuseChildMove(s *skills.Session) error {
	if !s.IsChild() {
		return nil
	}
	return fmt.Errorf("session %s is a sub-agent session of %s, served by its parent's host: move %s, and it moves with it: %w",
		s.ID, s.Parent, s.Parent, skills.ErrInvalid)
}

// moveChildren moves the open children of parent, which this host has
// just taken over from host from (see takeOver), and returns the binds
// that host had made of them. A child that cannot be moved is logged and
// stays recorded on host from, until it is moved or closed with its parent.
func (d *Daemon) moveChildren(ctx context.Context, r *readers, parent, from string) []skills.Bind {
	kids, err := d.db.OpenChildren(ctx, parent)
	if err != nil {
		d.log.Error("move the sub-agent sessions of a moved session", "session", parent, "err", err)
		return nil
	}
	var dropped []skills.Bind
	for _, k := range kids {
		binds, err := d.db.Binds(ctx, k.ID)
		if err == nil {
			_, err = d.takeOver(ctx, r, k, from)
		}
		if err != nil {
			d.log.Error("move a sub-agent session with its parent", "session", parent, "child", k.ID, "err", err)
			continue
		}
		dropped = append(dropped, binds...)
	}
	return dropped
}
