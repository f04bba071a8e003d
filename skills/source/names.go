package source

import (
	"os"
	"path/filepath"
	"strings"

	"skillfs/skills/git"
)

// ExpandName spells a source given by a common name of a hosted
// repository (owner/repo, github:owner/repo, a GitHub or GitLab tree URL;
// see git.ParseRemoteName) as the git source it stands for,
// "URL#ref:path". A path that exists on this machine is always that path:
// ./x, /x and ~/x are never names, and an existing folder named like
// owner/repo wins over the repository. Anything else is returned as given.
// This is the rule of a reader with a working directory (the command
// line); ExpandNameNoWorkDir is the rule of one without (the daemon's API).
func ExpandName(spec string) string {
	if _, err := os.Lstat(spec); err == nil {
		return spec
	}
	if gs, ok := git.ParseRemoteName(spec); ok {
		return gs.String()
	}
	return spec
}

// ExpandNameNoWorkDir is ExpandName for a reader with no working directory
// (a source named through the daemon's API): an absolute path is that
// path, whether it exists or not, and anything else that is a common name
// of a hosted repository is that repository, whatever exists on disk.
// Nothing is looked up on disk, so the answer never tells whether a path
// exists. Anything else is returned as given.
func ExpandNameNoWorkDir(spec string) string {
	spec = strings.TrimSpace(spec)
	if filepath.IsAbs(spec) {
		return spec
	}
	if gs, ok := git.ParseRemoteName(spec); ok {
		return gs.String()
	}
	return spec
}
