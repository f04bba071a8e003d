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
		c.cache.Forget(c.store.VersionPath(v.Slug, v.Hash))
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

// Tools and MCP servers (users: users.go).

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
