package catalog

import (
	"path/filepath"

	"skillfs/cmd/skillfs/internal/catalog/confine"
	"skillfs/index"
)

// guardSource refuses a local source that is a file of the index, is or
// lies inside the data directory, or (walked: a folder whose tree is read)
// holds either; see confine.SourceFence. Every way a local path becomes a source
// calls it before opening anything of it.
func (c *Catalog) guardSource(given, p string, walked bool) error {
	return c.sourceFence().Check(given, p, walked)
}

// sourceFence is the fence of the data directory and the index as they
// are now.
func (c *Catalog) sourceFence() *confine.SourceFence {
	return confine.NewSourceFence(c.home, c.db.Files())
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
