package catalog

import (
	"path/filepath"
	"strings"

	"skillfs/cmd/skillfs/internal/catalog/confine"
	"skillfs/index"
	"skillfs/skills/git"
)

// localPath is the path on this machine that the source spec names, if
// any: spec itself when it exists or is absolute, else the path of a
// file:// URL (gs: spec parsed as a git source); "" for anything else (a
// remote URL, a repository name).
func localPath(spec string, exists bool, gs git.Source) string {
	if exists || filepath.IsAbs(spec) {
		return spec
	}
	if p, ok := strings.CutPrefix(gs.URL, "file://"); ok && filepath.IsAbs(p) {
		return p
	}
	return ""
}

// guardSource refuses a local source that is a file of the index, is or
// lies inside the data directory, or (walked: a folder whose tree is read)
// holds either; see confine.SourceFence. Every way a local path becomes a source
// calls it before opening anything of it.
func (c *Catalog) guardSource(given, p string, walked bool) error {
	return confine.NewSourceFence(c.home, c.db.Files()).Check(given, p, walked)
}

// CheckSource refuses, as a source is refused, a file a command reads
// itself for the catalog (`skill edit --from`), named given in messages.
func (c *Catalog) CheckSource(given, p string) error { return c.guardSource(given, p, true) }

// CheckSourceIn is CheckSource for a command that does not open the data
// directory (`skill validate`): home and the index named as Open takes
// them (indexTarget "" for the data directory's own index.db).
func CheckSourceIn(home, indexTarget, given, p string) error {
	if indexTarget == "" {
		indexTarget = filepath.Join(home, indexFile)
	}
	return confine.NewSourceFence(home, index.SQLiteFiles(indexTarget)).Check(given, p, true)
}
