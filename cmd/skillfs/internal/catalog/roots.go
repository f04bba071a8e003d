package catalog

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/git"
)

// checkSource is the one check of what on the daemon's machine a source
// named through the API (req.API) reads, whatever the request (a draft, a
// curated source added, an update): nothing for a remote git URL that stays
// remote once git's URL rewrites apply; otherwise the acting user must be
// an admin (policy.CheckReadLocal), the path absolute, and what it names, as
// written and as rewritten, inside an import root. It reads nothing, and
// its answer for a path outside the roots is the same whether the path
// exists or not.
func (c *Catalog) checkSource(ctx context.Context, req ImportRequest) error {
	if strings.TrimSpace(req.Source) == "" {
		return fmt.Errorf("no source given: name a git URL or repository, or send the skill as the body: %w", skills.ErrInvalid)
	}
	spec := git.ParseSpec(req.Source)
	sp, perr := spec.LocalPaths()
	if perr == nil && !sp.Local() {
		return nil
	}
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return err
	}
	if perr != nil && spec.IsRemote() {
		return perr // not readable at all, by anyone
	}
	if err := policy.CheckReadLocal(actor); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	for _, p := range sp.Named {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("source %q: a path on the daemon's machine is named by its absolute path (the daemon has no working directory of yours), "+
				"and this is neither that nor a git URL or repository name: %w", req.display(), skills.ErrInvalid)
		}
		if hasDotSegment(p) {
			return fmt.Errorf("source %q: a path through the API holds no \".\" or \"..\" segment: %w", req.display(), skills.ErrInvalid)
		}
	}
	for _, p := range sp.Named {
		if err := c.roots.Contains(p); err != nil {
			return c.outsideRoots(fmt.Sprintf("source %q", req.display()))
		}
	}
	if sp.Rewritten != "" {
		if err := c.roots.Contains(sp.Rewritten); err != nil {
			// Where the rewrite leads is not shown.
			return c.outsideRoots(fmt.Sprintf("source %q, as rewritten by git's url.<base>.insteadOf configuration,", req.display()))
		}
	}
	return nil
}

// objectsConfined is, for a request through the API (or checked as one),
// the check of every folder a read of a repository on this machine takes
// objects from (git.CloneOptions.Confine): a .git file, a commondir or
// an alternate leading out of the import roots leads out. Nil otherwise.
func (c *Catalog) objectsConfined(req ImportRequest) func(string) error {
	if !req.API && !req.inRoots {
		return nil
	}
	return func(dir string) error {
		if c.roots.Contains(dir) != nil {
			// Where they lie is not said.
			return fmt.Errorf("the repository's objects lie outside the daemon's import roots: %w", skills.ErrPermission)
		}
		return nil
	}
}

// outsideRoots is the refusal of a local source outside the import roots:
// the same for every such path, existing or not.
func (c *Catalog) outsideRoots(what string) error {
	roots := c.roots.Paths()
	if len(roots) == 0 {
		return fmt.Errorf("%s is a path on the daemon's machine, and through the API the daemon reads none: "+
			"no import roots are configured (serve --import-root DIR): %w", what, skills.ErrPermission)
	}
	return fmt.Errorf("%s is not inside an import root of the daemon (%s; never /proc, /sys or /dev): "+
		"through the API the daemon reads paths of its machine only there: %w", what, strings.Join(roots, ", "), skills.ErrPermission)
}

// hasDotSegment reports whether the path p holds a "." or ".." component.
func hasDotSegment(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." {
			return true
		}
	}
	return false
}
