package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"skillfs/policy"
	"skillfs/skills"
)

// Users: who they are, who may see and change them, and what deleting one
// does to what named them.

// PutUser registers a user (create) or changes an existing one. Admins
// manage ordinary users; only a superadmin creates, changes or removes
// admins and superadmins, and the last superadmin keeps the role. Nobody
// learns of a user they may not know of (policy.KnowsUser): an ordinary
// user's create is refused before the uid is looked up, the same refusal
// whoever it names, and a change of anyone but themselves is answered as
// for a user that does not exist.
func (c *Catalog) PutUser(ctx context.Context, as string, u skills.User, create bool) error {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return err
	}
	if u.UID == "" {
		return fmt.Errorf("user id is empty: %w", skills.ErrInvalid)
	}
	var old skills.User
	if create {
		if err := checkAdmin(actor, false); err != nil {
			return err
		}
		switch _, err := c.db.User(ctx, u.UID); {
		case err == nil:
			return fmt.Errorf("user %q exists (change it with `skillfs user set`): %w", u.UID, skills.ErrExists)
		case !errors.Is(err, skills.ErrNotFound):
			return err
		}
	} else if old, err = c.knownUser(ctx, actor, u.UID); err != nil {
		return err
	}
	if u.Role == "" {
		u.Role = old.Role
	}
	if u.Role == "" {
		u.Role = skills.RoleUser
	}
	switch u.Role {
	case skills.RoleUser, skills.RoleAdmin, skills.RoleSuperadmin:
	default:
		return fmt.Errorf("role %q: want user, admin or superadmin: %w", u.Role, skills.ErrInvalid)
	}
	privileged := u.Role != skills.RoleUser || (old.Role != "" && old.Role != skills.RoleUser)
	if err := checkAdmin(actor, privileged); err != nil {
		return err
	}
	if old.Role == skills.RoleSuperadmin && u.Role != skills.RoleSuperadmin {
		if err := c.keepASuperadmin(ctx, u.UID); err != nil {
			return err
		}
	}
	return c.db.PutUser(ctx, u)
}

// keepASuperadmin refuses to take the role from the last superadmin.
func (c *Catalog) keepASuperadmin(ctx context.Context, uid string) error {
	users, err := c.db.Users(ctx)
	if err != nil {
		return err
	}
	for _, o := range users {
		if o.UID != uid && o.Role == skills.RoleSuperadmin {
			return nil
		}
	}
	return fmt.Errorf("%q is the last superadmin: %w", uid, skills.ErrPermission)
}

// CloseSessions closes the sessions with the given ids, which this host
// serves. Sessions live in the daemon: it closes them there when it runs
// (unmounting their views and binds); without one, closing them in the
// index is all there is to do.
type CloseSessions func(ctx context.Context, ids []string) error

// deleteRounds bounds how often DeleteUser with force closes the sessions a
// user opened while being deleted before it gives up.
const deleteRounds = 3

// UserDeleted is the answer to deleting a user: the user, the sessions
// closed with them (force), and where their skills went.
type UserDeleted struct {
	Deleted string   `json:"deleted"`
	Closed  []string `json:"closed"`
	// Owner took the skills the user created (Handed): they are Owner's now,
	// to manage, reshare or delete. Unshared are the other skills whose
	// read or manage scope named the user, now without them. Warnings
	// name the dependencies of handed skills that Owner's sessions cannot
	// read (share them with Owner, or hand the skills on).
	Owner    string   `json:"owner"`
	Handed   []string `json:"handed"`
	Unshared []string `json:"unshared"`
	Warnings []string `json:"warnings"`
}

// DeleteUser removes a user. Admins delete ordinary users, only a
// superadmin deletes admins and superadmins, and the last superadmin stays.
//
// A user's uid is not their identity for ever: it may be registered again
// for someone else. So that the new user inherits nothing, the delete takes
// the uid out of the catalog in the transaction that removes the user
// (policy.Handover): the skills they created go to the user to (default:
// the acting user), every share scope loses them, and their drafts on this
// host are discarded (those on other hosts sharing the index are refused as
// no one's when confirmed). History stays as it was recorded: their closed
// sessions with their activations and read audit, the events, the
// installers of versions, the adders of curated sources.
//
// A user with open sessions is refused (skills.ErrExists, with their
// number and the way on) unless force, which closes them first: those this
// host serves with closeSessions (nil: in the index), those another host
// serves in the index, which that host follows (its daemon drops their
// views and binds). Without force nothing is closed; with force, a delete
// that fails after closing sessions returns their ids (in Closed) with the
// error, and its message names them.
//
// The sessions are listed and closed outside the transaction that deletes
// the user, and a session may be created meanwhile; that transaction
// re-checks (index.DB.DeleteUser) and refuses while one is open, as
// storing a session checks its user. With force, the stragglers are closed
// the same way and the delete tried again, deleteRounds times at most; the
// user is never deleted with a session left open.
func (c *Catalog) DeleteUser(ctx context.Context, as, uid, to string, force bool, closeSessions CloseSessions) (*UserDeleted, error) {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return nil, err
	}
	old, err := c.knownUser(ctx, actor, uid)
	if err != nil {
		return nil, err
	}
	if uid == Operator {
		return nil, fmt.Errorf("user %q is the default identity and cannot be deleted: %w", uid, skills.ErrInvalid)
	}
	if err := checkAdmin(actor, old.Role != skills.RoleUser); err != nil {
		return nil, err
	}
	if old.Role == skills.RoleSuperadmin {
		if err := c.keepASuperadmin(ctx, uid); err != nil {
			return nil, err
		}
	}
	heir, err := c.heir(ctx, actor, uid, to)
	if err != nil {
		return nil, err
	}
	if closeSessions == nil {
		closeSessions = c.closeInIndex
	}
	res := &UserDeleted{Deleted: uid, Closed: []string{}, Owner: heir}
	// failed is err with the sessions closed so far named.
	failed := func(err error) (*UserDeleted, error) {
		if len(res.Closed) == 0 {
			return nil, err
		}
		return res, fmt.Errorf("%w (sessions closed before it failed: %s)", err, strings.Join(res.Closed, ", "))
	}
	for round := 1; ; round++ {
		open, err := c.db.OpenSessionIDs(ctx, uid)
		if err != nil {
			return nil, err
		}
		if len(open) > 0 && !force {
			return nil, fmt.Errorf("user %q has %d open session(s): close them first (`skillfs session close ID`), "+
				"or delete with --force (force=true in the API) to close them: %w", uid, len(open), skills.ErrExists)
		}
		if len(open) > 0 {
			here, elsewhere, err := c.byHost(ctx, open)
			if err == nil {
				err = closeSessions(ctx, here)
			}
			if err == nil {
				err = c.closeInIndex(ctx, elsewhere)
			}
			if err != nil {
				return failed(fmt.Errorf("delete user %q: close their sessions: %w", uid, err))
			}
			res.Closed = append(res.Closed, open...)
			c.log.Info("sessions closed for a deleted user", "user", uid, "count", len(open))
		}
		err = c.removeUser(ctx, uid, heir, res)
		switch {
		case err == nil:
			c.afterDelete(ctx, res)
			return res, nil
		case !errors.Is(err, skills.ErrExists):
			return failed(err)
		case !force:
			// Opened since we looked: refused like any open session.
			return nil, fmt.Errorf("user %q has open session(s), opened while it was being deleted: close them first "+
				"(`skillfs session close ID`), or delete with --force (force=true in the API) to close them: %w", uid, skills.ErrExists)
		case round == deleteRounds:
			return failed(fmt.Errorf("user %q keeps opening sessions while being deleted: "+
				"stop what opens them and delete again: %w", uid, skills.ErrExists))
		}
	}
}

// heir is the user who takes the skills of uid: to, or the actor for "".
// It must be another registered user.
func (c *Catalog) heir(ctx context.Context, actor skills.User, uid, to string) (string, error) {
	if to == "" {
		to = actor.UID
	}
	if to == uid {
		return "", fmt.Errorf("delete user %q: their skills cannot go to themselves; name another user to take them (--to UID, to=UID in the API): %w", uid, skills.ErrInvalid)
	}
	if _, err := c.knownUser(ctx, actor, to); err != nil {
		return "", fmt.Errorf("delete user %q: the user to take their skills (--to): %w", uid, err)
	}
	return to, nil
}

// removeUser deletes uid from the index, handing their skills to heir in
// the same transaction, and fills res.Handed and res.Unshared. It holds the
// publish lock, as an import does from its check that its user is still
// registered (stillRegistered) to its new skill's row: a skill the user
// was installing meanwhile is either handed on with the others or never
// installed.
func (c *Catalog) removeUser(ctx context.Context, uid, heir string, res *UserDeleted) error {
	unlock, err := c.publishLock()
	if err != nil {
		return err
	}
	defer unlock()
	h := policy.Handover{UID: uid, Heir: heir}
	created := map[string]bool{}
	changed, err := c.db.DeleteUser(ctx, uid, heir, func(s *skills.Skill) bool {
		created[s.Slug] = s.Creator == uid
		return h.Apply(s)
	})
	if err != nil {
		return err
	}
	res.Handed, res.Unshared, res.Warnings = []string{}, []string{}, []string{}
	for _, s := range changed {
		if created[s.Slug] {
			res.Handed = append(res.Handed, s.Slug)
		} else {
			res.Unshared = append(res.Unshared, s.Slug)
		}
	}
	return nil
}

// stillRegistered refuses to go on for an actor looked up earlier who is no
// longer registered, or whose uid was registered again since for someone
// else. The caller holds the publish lock, which DeleteUser takes too.
func (c *Catalog) stillRegistered(ctx context.Context, actor skills.User) error {
	u, err := c.db.User(ctx, actor.UID)
	switch {
	case errors.Is(err, skills.ErrNotFound), err == nil && registered(u) != registered(actor):
		return fmt.Errorf("user %q was deleted meanwhile: %w", actor.UID, skills.ErrNotFound)
	}
	return err
}

// afterDelete finishes a delete that committed: the user's drafts on this
// host go, and res.Warnings names the dependencies of handed skills that
// the heir's sessions cannot read. What fails here is logged: the user is
// deleted already.
func (c *Catalog) afterDelete(ctx context.Context, res *UserDeleted) {
	if n := c.removeDrafts(func(d *Draft) bool { return d != nil && d.Creator == res.Deleted }); n > 0 {
		c.log.Info("drafts of a deleted user discarded", "user", res.Deleted, "count", n)
	}
	c.log.Info("user deleted", "user", res.Deleted, "skills_to", res.Owner, "handed", len(res.Handed), "unshared", len(res.Unshared))
	if len(res.Handed) == 0 {
		return
	}
	snap, err := c.snapshot(ctx)
	if err != nil {
		c.log.Warn("check the dependencies of handed skills", "err", err)
		return
	}
	for _, slug := range res.Handed {
		var de *policy.DependencyError
		if s := snap.Base.Get(slug); s != nil && errors.As(policy.ValidateDependencies(snap, s), &de) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s, now %s's: %s", slug, res.Owner, strings.Join(de.Problems, "; ")))
		}
	}
}

// closeInIndex closes sessions in the index alone, each with its closed
// event, for when no daemon of this host serves them: without one, or
// served by another host (whose daemon follows the index).
func (c *Catalog) closeInIndex(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := c.db.CloseSession(ctx, id, &skills.Event{Type: "closed", Session: id, At: c.now().UTC()}); err != nil {
			return err
		}
	}
	return nil
}

// byHost splits session ids into those this host serves and those other
// hosts do.
func (c *Catalog) byHost(ctx context.Context, ids []string) (here, elsewhere []string, err error) {
	for _, id := range ids {
		s, err := c.db.Session(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if s.Host == c.host {
			here = append(here, id)
		} else {
			elsewhere = append(elsewhere, id)
		}
	}
	return here, elsewhere, nil
}

// Users lists the users the actor may know of (policy.KnowsUser): every
// user for admins and superadmins, only themselves for anyone else.
func (c *Catalog) Users(ctx context.Context, as string) ([]skills.User, error) {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return nil, err
	}
	all, err := c.db.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, u := range all {
		if policy.KnowsUser(actor, u.UID) {
			out = append(out, u)
		}
	}
	return out, nil
}

// knownUser reads the user uid for actor: a user actor may not know of
// (policy.KnowsUser) is answered exactly as one that does not exist.
func (c *Catalog) knownUser(ctx context.Context, actor skills.User, uid string) (skills.User, error) {
	if !policy.KnowsUser(actor, uid) {
		return skills.User{}, noUser(uid)
	}
	u, err := c.db.User(ctx, uid)
	if errors.Is(err, skills.ErrNotFound) {
		return skills.User{}, noUser(uid)
	}
	return u, err
}

// noUser is the answer about a user that does not exist, or that the
// caller may not know of: the two are never told apart.
func noUser(uid string) error {
	return fmt.Errorf("user %q: %w", uid, skills.ErrNotFound)
}
