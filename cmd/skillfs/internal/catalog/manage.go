package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"skillfs/policy"
	"skillfs/skills"
)

// List returns the skills the actor may see (managers also see disabled
// ones, admins disabled builtins): builtins first, then the installed ones,
// each by slug (the curated tier, which Curated lists, comes after them).
func (c *Catalog) List(ctx context.Context, as string) ([]*skills.Skill, error) {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return nil, err
	}
	all, err := c.db.Skills(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*skills.Skill, 0, len(all))
	for _, s := range all {
		if policy.Known(actor, s) {
			out = append(out, s)
		}
	}
	// Sorted by slug already; a stable sort keeps that within each tier.
	slices.SortStableFunc(out, func(a, b *skills.Skill) int {
		return cmp.Compare(tier(a), tier(b))
	})
	return out, nil
}

// tier orders catalog listings: system (builtin) skills, then installed.
func tier(s *skills.Skill) int {
	if s.SourceType == skills.SourceBuiltin {
		return 0
	}
	return 1
}

// Detail is a skill with its versions, newest first.
type Detail struct {
	*skills.Skill
	Versions []*skills.Version `json:"versions"`
	Path     string            `json:"path"` // content of the current version
}

// Show returns one skill the actor may see.
func (c *Catalog) Show(ctx context.Context, as, slug string) (*Detail, error) {
	_, s, err := c.lookup(ctx, as, slug)
	if err != nil {
		return nil, err
	}
	vs, err := c.db.Versions(ctx, slug)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		// The index holds paths relative to the data directory; readers
		// get them where they are now.
		v.Path = c.store.VersionPath(v.Slug, v.Hash)
	}
	return &Detail{Skill: s, Versions: vs, Path: c.store.VersionPath(slug, s.Version)}, nil
}

// SetEnabled enables or disables a skill.
func (c *Catalog) SetEnabled(ctx context.Context, as, slug string, enabled bool) (*skills.Skill, error) {
	return c.update(ctx, as, slug, func(actor skills.User, _ policy.Catalog, s *skills.Skill) error {
		if err := policy.CheckToggle(actor, s); err != nil {
			return err
		}
		s.Enabled = enabled
		return nil
	})
}

// update changes a skill the actor can see, in one index transaction; fn
// gets a snapshot of the catalog for validation.
func (c *Catalog) update(ctx context.Context, as, slug string, fn func(skills.User, policy.Catalog, *skills.Skill) error) (*skills.Skill, error) {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return nil, err
	}
	// Checks read a snapshot, the write is another transaction: the publish
	// lock keeps every other catalog write (in any process) out between them.
	unlock, err := c.publishLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.db.UpdateSkill(ctx, slug, func(s *skills.Skill) error {
		if !policy.Known(actor, s) {
			return notFound(slug)
		}
		return fn(actor, snap, s)
	})
	if errors.Is(err, skills.ErrNotFound) {
		return nil, notFound(slug) // the same answer whether it exists or not
	}
	return s, err
}

// Delete removes a skill, its versions and their content.
func (c *Catalog) Delete(ctx context.Context, as, slug string) error {
	actor, s, err := c.lookup(ctx, as, slug)
	if err != nil {
		return err
	}
	if err := policy.CheckDelete(actor, s); err != nil {
		return err
	}
	unlock, err := c.publishLock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.checkNotNeeded(ctx, s, "delete"); err != nil {
		return err
	}
	vs, err := c.db.DeleteSkill(ctx, slug)
	if err != nil {
		return err
	}
	for _, v := range vs {
		c.cache.forget(c.store.VersionPath(v.Slug, v.Hash))
		if err := c.store.RemoveVersion(v.Slug, v.Hash); err != nil && (!c.shared || !errors.Is(err, skills.ErrNotFound)) {
			c.log.Warn("remove deleted content", "slug", v.Slug, "version", v.Hash, "err", err)
		}
	}
	c.log.Info("skill deleted", "slug", slug, "by", actor.UID)
	return nil
}

// checkNotNeeded refuses to take away a skill other skills depend on, and
// says which.
func (c *Catalog) checkNotNeeded(ctx context.Context, s *skills.Skill, op string) error {
	snap, err := c.snapshot(ctx)
	if err != nil {
		return err
	}
	if err := policy.CheckDependents(snap, s.Slug, nil); err != nil {
		return fmt.Errorf("%s %q: change the dependants first: %w", op, s.Slug, err)
	}
	return nil
}

// Export writes the current version of a skill as a ZIP whose entries sit
// under "<slug>/"; importing it back gives the same tree hash.
func (c *Catalog) Export(ctx context.Context, as, slug string, w io.Writer) error {
	return c.ExportVersion(ctx, as, slug, "", w)
}

// Deps replaces a skill's three dependency lists after validating them.
func (c *Catalog) Deps(ctx context.Context, as, slug string, skillDeps, tools, mcps []string) (*skills.Skill, error) {
	return c.update(ctx, as, slug, func(actor skills.User, snap policy.Catalog, s *skills.Skill) error {
		if err := policy.CheckEdit(actor, s); err != nil {
			return err
		}
		s.SkillDependencies, s.ToolDependencies, s.MCPDependencies = clean(skillDeps), clean(tools), clean(mcps)
		return policy.ValidateDependencies(snap, s)
	})
}

// Share replaces a skill's share config; a narrower scope is refused while
// a dependant's readers would lose the skill.
func (c *Catalog) Share(ctx context.Context, as, slug string, sh skills.Share) (*skills.Skill, error) {
	sh, err := policy.NormalizeShare(sh)
	if err != nil {
		return nil, err
	}
	return c.update(ctx, as, slug, func(actor skills.User, snap policy.Catalog, s *skills.Skill) error {
		if err := policy.CheckShare(actor, s, sh); err != nil {
			return err
		}
		next := *s
		next.Share = sh
		if err := policy.CheckDependents(snap, s.Slug, &next); err != nil {
			return err
		}
		// Its own dependencies must still reach everyone it is shared with.
		if err := policy.ValidateDependencies(snap, &next); err != nil {
			return err
		}
		s.Share = sh
		return nil
	})
}

// lookup finds a skill the actor knows of (policy.Known); any other is
// answered as not found, whether it exists or not.
func (c *Catalog) lookup(ctx context.Context, as, slug string) (skills.User, *skills.Skill, error) {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return actor, nil, err
	}
	s, err := c.db.Skill(ctx, slug)
	if errors.Is(err, skills.ErrNotFound) {
		return actor, nil, notFound(slug) // worded as for a skill not known
	}
	if err != nil {
		return actor, nil, fmt.Errorf("skill %q: %w", slug, err)
	}
	if !policy.Known(actor, s) {
		return actor, nil, notFound(slug) // existence is not disclosed
	}
	return actor, s, nil
}

func notFound(slug string) error {
	return fmt.Errorf("skill %q: %w", slug, skills.ErrNotFound)
}

func clean(in []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// Users, tools and MCP servers.

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

// DeleteUser removes a user and returns the ids of the sessions it closed.
// Admins delete ordinary users, only a superadmin deletes admins and
// superadmins, and the last superadmin stays. A user with open sessions is
// refused (skills.ErrExists, with their number and the way on) unless force,
// which closes them first: those this host serves with closeSessions (nil:
// in the index), those another host serves in the index, which that host
// follows (its daemon drops their views and binds). Without force nothing
// is closed; with force, a delete that fails after closing sessions returns
// their ids with the error, and its message names them.
//
// The sessions are listed and closed outside the transaction that deletes
// the user, and a session may be created meanwhile; that transaction
// re-checks (index.DB.DeleteUser) and refuses while one is open, as
// storing a session checks its user. With force, the stragglers are closed
// the same way and the delete tried again, deleteRounds times at most; the
// user is never deleted with a session left open.
func (c *Catalog) DeleteUser(ctx context.Context, as, uid string, force bool, closeSessions CloseSessions) ([]string, error) {
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
	if closeSessions == nil {
		closeSessions = c.closeInIndex
	}
	var closed []string
	for round := 1; ; round++ {
		open, err := c.db.OpenSessionIDs(ctx, uid)
		if err != nil {
			return nil, err
		}
		if len(open) > 0 && !force {
			return nil, fmt.Errorf("user %q has %d open session(s): close them first (`skillfs session close ID`), "+
				"or delete with --force (force=true in the API) to close them: %w", uid, len(open), skills.ErrExists)
		}
		// failed is err with the sessions closed so far named.
		failed := func(err error) ([]string, error) {
			if len(closed) == 0 {
				return nil, err
			}
			return closed, fmt.Errorf("%w (sessions closed before it failed: %s)", err, strings.Join(closed, ", "))
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
			closed = append(closed, open...)
			c.log.Info("sessions closed for a deleted user", "user", uid, "count", len(open))
		}
		err = c.db.DeleteUser(ctx, uid)
		switch {
		case err == nil:
			return closed, nil
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

// AddTool registers a tool name (admins only).
func (c *Catalog) AddTool(ctx context.Context, as, name string, mcp bool) error {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return err
	}
	if err := checkAdmin(actor, false); err != nil {
		return err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return fmt.Errorf("name is empty: %w", skills.ErrInvalid)
	}
	if mcp {
		return c.db.AddMCP(ctx, name)
	}
	return c.db.AddTool(ctx, name)
}

// DeleteTool unregisters a tool name (admins only), refusing while a skill needs it.
func (c *Catalog) DeleteTool(ctx context.Context, as, name string, mcp bool) error {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return err
	}
	if err := checkAdmin(actor, false); err != nil {
		return err
	}
	all, err := c.db.Skills(ctx)
	if err != nil {
		return err
	}
	var users []string
	for _, s := range all {
		list := s.ToolDependencies
		if mcp {
			list = s.MCPDependencies
		}
		for _, t := range list {
			if t == name {
				users = append(users, s.Slug)
			}
		}
	}
	if len(users) > 0 {
		return fmt.Errorf("%q is needed by %s: %w", name, strings.Join(users, ", "), skills.ErrDependency)
	}
	if mcp {
		return c.db.DeleteMCP(ctx, name)
	}
	return c.db.DeleteTool(ctx, name)
}

// Tools lists registered tools or MCP servers.
func (c *Catalog) Tools(ctx context.Context, mcp bool) ([]string, error) {
	if mcp {
		return c.db.MCPs(ctx)
	}
	return c.db.Tools(ctx)
}

func checkAdmin(u skills.User, superOnly bool) error {
	if u.Role == skills.RoleSuperadmin || (!superOnly && u.Role == skills.RoleAdmin) {
		return nil
	}
	need := "an admin"
	if superOnly {
		need = "a superadmin"
	}
	return fmt.Errorf("%s is %s, this needs %s: %w", u.UID, u.Role, need, skills.ErrPermission)
}
