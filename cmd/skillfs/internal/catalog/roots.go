package catalog

import (
	"context"
	"fmt"
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
// written and as rewritten, inside an import root (confine.ImportRoots.CheckSource).
// It reads nothing, and its answer for a path outside the roots is the same
// whether the path exists or not.
func (c *Catalog) checkSource(ctx context.Context, req ImportRequest) error {
	return c.checkSpec(ctx, req, git.ParseSpec(req.Source))
}

// checkSpec is checkSource of the request's source parsed as spec.
func (c *Catalog) checkSpec(ctx context.Context, req ImportRequest, spec git.Spec) error {
	if strings.TrimSpace(req.Source) == "" {
		return fmt.Errorf("no source given: name a git URL or repository, or send the skill as the body: %w", skills.ErrInvalid)
	}
	sp, perr := spec.LocalPaths()
	if perr == nil && !sp.Local() {
		return nil
	}
	if req.RemoteOnly {
		if perr != nil && spec.IsRemote() {
			return perr
		}
		return fmt.Errorf("source %q: only a remote git repository is read from here; a path is read as the sandbox sees it: %w",
			req.display(), skills.ErrPermission)
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
	return c.roots.CheckSource(req.display(), sp)
}

// objectsConfined is, for a request through the API (or checked as one),
// the check of every folder a read of a repository on this machine takes
// objects from (confine.ImportRoots.CheckObjects). Nil otherwise.
func (c *Catalog) objectsConfined(req ImportRequest) func(string) error {
	if !req.API && !req.inRoots {
		return nil
	}
	return c.roots.CheckObjects
}
