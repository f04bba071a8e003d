package catalog

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"skillfs/skills"
)

// Tiers of the whole catalog, in the order it is listed.
const (
	TierBuiltin   = "builtin"
	TierInstalled = "installed"
	TierCurated   = "curated"
)

var tierRank = map[string]int{TierBuiltin: 0, TierInstalled: 1, TierCurated: 2}

// Entry is one skill of the whole catalog: a builtin, an installed skill, or
// one a curated source offers that the actor has not installed.
type Entry struct {
	Tier        string `json:"tier"`
	Slug        string `json:"slug"` // a curated skill's: the slug it asks for
	Name        string `json:"name"`
	Description string `json:"description"`
	// Active says whether sessions can read it (once granted): an enabled
	// builtin or installed skill. A curated one never is until installed.
	Active bool `json:"active"`
	// Source is where it came from (a curated skill: the source offering
	// it).
	Source  string `json:"source"`
	Version string `json:"version,omitempty"` // installed and builtin skills: the current version
}

// Entries lists the whole catalog the actor sees: builtins, then installed
// skills, then what curated sources offer that the actor has not
// installed; within each tier by name, then slug.
func (c *Catalog) Entries(ctx context.Context, as string) ([]Entry, error) {
	list, err := c.List(ctx, as)
	if err != nil {
		return nil, err
	}
	curated, err := c.Curated(ctx, as)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(list)+len(curated))
	for _, s := range list {
		tier := TierInstalled
		if s.SourceType == skills.SourceBuiltin {
			tier = TierBuiltin
		}
		out = append(out, Entry{Tier: tier, Slug: s.Slug, Name: skills.DisplayName(s.Plugin, s.Name), Description: s.Description,
			Active: s.Enabled, Source: s.Source, Version: s.Version})
	}
	for _, s := range curated {
		out = append(out, Entry{Tier: TierCurated, Slug: s.Slug, Name: s.Name, Description: s.Description, Source: s.Source})
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(tierRank[a.Tier], tierRank[b.Tier]),
			cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), cmp.Compare(a.Slug, b.Slug))
	})
	return out, nil
}
