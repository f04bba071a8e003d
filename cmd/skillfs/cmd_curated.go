package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/git"
	"skillfs/skills/store"
)

// skillCurated manages the curated sources: the recommended list.
func (c *cli) skillCurated() *cobra.Command {
	return group("curated", "curated sources: skills offered to everyone, readable once installed (admins manage them)",
		c.curatedAdd(), c.curatedList(), c.curatedRemove(), c.curatedRefresh())
}

func (c *cli) curatedAdd() *cobra.Command {
	cmd := leaf("add SOURCE", "register a source as curated: it is read now, and its skills are offered", 1, 1)
	ref := cmd.Flags().String("ref", "", "follow this git branch or tag, or stay at this commit: `REF`")
	timeout := cmd.Flags().Duration("timeout", git.DefaultCloneTimeout, "give up on a git source not read within this")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		src, err := cat.AddCurated(c.ctx, catalog.CuratedRequest{Source: pos[0], Ref: *ref, As: c.as, Timeout: *timeout})
		if err != nil {
			return err
		}
		return c.done(src, "curated source %s added: %d skills offered (see `skillfs skill list --curated`)", src.Source, src.Skills)
	}
	return cmd
}

func (c *cli) curatedList() *cobra.Command {
	cmd := leaf("list", "the curated sources, with what each offers and when it was last read", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		return query(c, func(cat *catalog.Catalog) ([]skills.CuratedSource, error) { return cat.CuratedSources(c.ctx, c.as) },
			c.printCuratedSources)
	}
	return cmd
}

func (c *cli) printCuratedSources(list []skills.CuratedSource) {
	rows := make([][]string, len(list))
	for i, s := range list {
		refreshed := "-"
		if !s.RefreshedAt.IsZero() {
			refreshed = s.RefreshedAt.Local().Format(time.DateTime)
		}
		rows[i] = []string{s.Source, orDash(s.Ref), fmt.Sprint(s.Skills), orDash(store.ShortHash(s.Commit)), refreshed, orDash(truncate(s.Error, 60))}
	}
	c.table([]string{"SOURCE", "REF", "SKILLS", "COMMIT", "REFRESHED", "ERROR"}, rows)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) curatedRemove() *cobra.Command {
	cmd := leaf("remove SOURCE", "unregister a curated source; skills installed from it stay", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if err := cat.RemoveCurated(c.ctx, c.as, pos[0]); err != nil {
			return err
		}
		return c.done(map[string]string{"removed": pos[0]}, "curated source %s removed", pos[0])
	}
	return cmd
}

func (c *cli) curatedRefresh() *cobra.Command {
	cmd := leaf("refresh [SOURCE]", "read every curated source (or SOURCE) again; one that cannot be read keeps what it offered", 0, 1)
	timeout := cmd.Flags().Duration("timeout", git.DefaultCloneTimeout, "give up on a git source not read within this")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		req := catalog.CuratedRequest{As: c.as, Timeout: *timeout}
		if len(pos) == 1 {
			req.Source = pos[0]
		}
		list, rerr := cat.RefreshCurated(c.ctx, req)
		if list != nil {
			if c.json {
				if err := c.printJSON(list); err != nil {
					return err
				}
			} else {
				c.printCuratedSources(list)
			}
		}
		return rerr
	}
	return cmd
}

func (c *cli) skillInstallCurated() *cobra.Command {
	cmd := leaf("install-curated NAME", "install a skill a curated source offers (see skill list --curated), reading its source again", 1, 1)
	fs := cmd.Flags()
	share := fs.String("share", "", "who may read: `SCOPE` (global, department:ID,... or user:UID,...)")
	source := fs.String("source", "", "the curated `SOURCE` to take it from, when several offer NAME")
	timeout := fs.Duration("timeout", git.DefaultCloneTimeout, "give up on a git source not read within this")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		sh, err := readShare(*share)
		if err != nil {
			return err
		}
		req := catalog.CuratedRequest{Name: pos[0], Source: *source, Share: sh, As: c.as, Timeout: *timeout}
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		res, ierr := cat.InstallCurated(c.ctx, req)
		return c.importResult(res, ierr, false)
	}
	return cmd
}

// printCurated shows the recommended list: the curated skills not installed.
func (c *cli) printCurated(list []skills.CuratedSkill) {
	rows := make([][]string, len(list))
	for i, s := range list {
		rows[i] = []string{s.Slug, truncate(s.Name, 40), "curated", s.Source, s.Path, truncate(s.Description, 60)}
	}
	c.table([]string{"SLUG", "NAME", "TIER", "SOURCE", "PATH", "DESCRIPTION"}, rows)
}

func (c *cli) skillCatalog() *cobra.Command {
	cmd := leaf("catalog", "the whole catalog: builtins, installed skills, then what curated sources offer that you have not installed, each by name", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		return query(c, func(cat *catalog.Catalog) ([]catalog.Entry, error) { return cat.Entries(c.ctx, c.as) }, func(list []catalog.Entry) {
			rows := make([][]string, len(list))
			for i, e := range list {
				active := "no"
				if e.Active {
					active = "yes"
				}
				rows[i] = []string{e.Tier, e.Slug, truncate(e.Name, 40), active, truncate(e.Source, 50), truncate(e.Description, 60)}
			}
			c.table([]string{"TIER", "SLUG", "NAME", "ACTIVE", "SOURCE", "DESCRIPTION"}, rows)
		})
	}
	return cmd
}
