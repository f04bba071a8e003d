package catalog

import (
	"context"
	"time"

	"skillfs/cmd/skillfs/internal/catalog/content"
)

// The content of versions is served from this host's store by a
// content.Cache: verified before it is served and, with a shared index,
// fetched from the index when this host lacks it (see package content).

// ContentStats returns what this process did with the content of versions
// since the data directory was opened.
func (c *Catalog) ContentStats() content.Stats { return c.cache.Stats() }

// EnsureVersion returns the directory of this host's copy of version hash
// of slug, ready to serve: with the data directory's own index the store's
// copy, which must be there (skills.ErrNotFound otherwise); with a shared
// index a copy verified against its hash, fetched from the index when this
// host has none or a damaged one (see content.Cache.Ensure).
func (c *Catalog) EnsureVersion(ctx context.Context, slug, hash string) (string, error) {
	return c.cache.Ensure(ctx, slug, hash)
}

// Verified returns when this host's copy in the version directory dir was
// last found to hash to its version's name in this process, or the zero
// time. With Verify it makes the catalog the filesystem's fs.Content.
func (c *Catalog) Verified(dir string) time.Time { return c.cache.Verified(dir) }

// Verify checks this host's copy in the version directory dir against its
// hash again, unless it was verified after changed (see
// content.Cache.Verify): a copy that does not match is never served again.
func (c *Catalog) Verify(dir string, changed time.Time) error { return c.cache.Verify(dir, changed) }
