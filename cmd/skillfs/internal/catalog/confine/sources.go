package confine

import (
	"fmt"
	"path/filepath"
	"strings"

	"skillfs/skills"
	"skillfs/skills/git"
)

// CheckSource refuses a source named through the API (display, as
// messages name it) unless every path of this machine a read of it reaches
// (sp, see git.Spec.LocalPaths) is absolute, holds no "." or ".." segment,
// and lies inside an import root, as the source names it and as git's URL
// rewrites send it. Who may name such a source at all is the caller's
// check. It reads nothing, and its answer for a path outside the roots is
// the same whether the path exists or not.
func (r *ImportRoots) CheckSource(display string, sp git.SourcePaths) error {
	for _, p := range sp.Named {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("source %q: a path on the daemon's machine is named by its absolute path (the daemon has no working directory of yours), "+
				"and this is neither that nor a git URL or repository name: %w", display, skills.ErrInvalid)
		}
		if hasDotSegment(p) {
			return fmt.Errorf("source %q: a path through the API holds no \".\" or \"..\" segment: %w", display, skills.ErrInvalid)
		}
	}
	for _, p := range sp.Named {
		if err := r.Contains(p); err != nil {
			return r.outside(fmt.Sprintf("source %q", display))
		}
	}
	if sp.Rewritten != "" {
		if err := r.Contains(sp.Rewritten); err != nil {
			// Where the rewrite leads is not shown.
			return r.outside(fmt.Sprintf("source %q, as rewritten by git's url.<base>.insteadOf configuration,", display))
		}
	}
	return nil
}

// CheckObjects is the check of every folder a read of a repository on this
// machine, for a request through the API, takes objects from
// (git.CloneOptions.Confine): a .git file, a commondir or an alternate
// leading out of the import roots leads out.
func (r *ImportRoots) CheckObjects(dir string) error {
	if r.Contains(dir) != nil {
		// Where they lie is not said.
		return fmt.Errorf("the repository's objects lie outside the daemon's import roots: %w", skills.ErrPermission)
	}
	return nil
}

// outside is the refusal of a local source outside the import roots: the
// same for every such path, existing or not.
func (r *ImportRoots) outside(what string) error {
	roots := r.Paths()
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
