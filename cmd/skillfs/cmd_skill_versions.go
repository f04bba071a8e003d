package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills/diff"
	"skillfs/skills/git"
	"skillfs/skills/store"
)

func (c *cli) skillVersions() *cobra.Command {
	cmd := leaf("versions SLUG", "every version of a skill: hash, time, installer, source, size, and what changed against the one before", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		vs, err := cat.Versions(c.ctx, c.as, pos[0])
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(vs)
		}
		rows := make([][]string, len(vs))
		for i, v := range vs {
			cur := ""
			if v.Current {
				cur = "*"
			}
			src := v.Source
			if v.Ref != "" {
				src += "#" + v.Ref
			}
			if v.Commit != "" {
				src += " @ " + store.ShortHash(v.Commit)
			}
			changes := "first version"
			switch {
			case v.DiffStat != nil:
				changes = fmt.Sprintf("%s vs %s", diffStatLine(*v.DiffStat), store.ShortHash(v.Against))
			case v.DiffStatError != "":
				changes = fmt.Sprintf("not compared with %s: %s", store.ShortHash(v.Against), v.DiffStatError)
			}
			rows[i] = []string{cur + store.ShortHash(v.Hash), v.InstalledAt.Local().Format("2006-01-02 15:04:05"), v.Installer,
				fmt.Sprintf("%d files, %d bytes", v.Files, v.Bytes), changes, src}
		}
		c.table([]string{"VERSION", "INSTALLED", "BY", "SIZE", "CHANGES", "SOURCE"}, rows)
		return nil
	}
	return cmd
}

// diffStatLine is a diffstat in a few words: "+1 -0 ~2 files, +10 -3
// lines", and what it leaves out.
func diffStatLine(s diff.Stat) string {
	line := fmt.Sprintf("+%d -%d ~%d files, +%d -%d lines", s.FilesAdded, s.FilesRemoved, s.FilesChanged, s.Insertions, s.Deletions)
	if n := s.LinesUnknown - s.NotCompared; n > 0 {
		line += fmt.Sprintf(" (%d binary or large files not counted)", n)
	}
	if s.NotCompared > 0 {
		line += fmt.Sprintf(" (%d files not compared: over the comparison budget)", s.NotCompared)
	}
	return line
}

func (c *cli) skillDiff() *cobra.Command {
	cmd := leaf("diff SLUG [A] [B]", "what changed between two versions of a skill (default: the one before the current, and the current)", 1, 3)
	stat := cmd.Flags().Bool("stat", false, "only the files and line counts, no diff text")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		var a, b string
		if len(pos) > 1 {
			a = pos[1]
		}
		if len(pos) > 2 {
			b = pos[2]
		}
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if c.json {
			return c.diffJSON(cat, pos[0], a, b, !*stat)
		}
		// The summary comes first: the changes are kept (their diffs
		// together at most diff.DefaultOutput), one pair of files
		// compared at a time.
		var d *catalog.Diff
		st, err := cat.DiffEach(c.ctx, c.as, pos[0], a, b, !*stat, func(head *catalog.Diff) error {
			d = head
			return nil
		}, func(fc *diff.FileChange) error {
			d.Files = append(d.Files, *fc)
			return nil
		})
		if err != nil {
			return err
		}
		d.DiffStat = st
		w := bufio.NewWriter(c.stdout)
		defer w.Flush()
		from := store.ShortHash(d.From)
		if from == "" {
			from = "(nothing)"
		}
		fmt.Fprintf(w, "%s %s..%s: %s\n", d.Slug, from, store.ShortHash(d.To), diffStatLine(d.DiffStat))
		for _, f := range d.Files {
			line := fmt.Sprintf("%-7s %s", f.Status, f.Path)
			if !f.LinesUnknown {
				line += fmt.Sprintf(" (+%d -%d)", f.Added, f.Removed)
			}
			if f.Note != "" {
				line += ": " + f.Note
			}
			fmt.Fprintln(w, line)
		}
		for _, f := range d.Files {
			w.WriteString(f.Diff)
		}
		return nil
	}
	return cmd
}

// diffJSON prints the diff of two versions of slug as JSON while it is
// made, a file at a time (diff.JSONWriter).
func (c *cli) diffJSON(cat *catalog.Catalog, slug, a, b string, text bool) error {
	var j *diff.JSONWriter
	st, err := cat.DiffEach(c.ctx, c.as, slug, a, b, text, func(head *catalog.Diff) error {
		j = diff.NewJSONWriter(c.stdout)
		return j.Start(head.Slug, head.From, head.To)
	}, func(fc *diff.FileChange) error { return j.File(fc) })
	if err != nil {
		return err
	}
	return j.End(st)
}

func (c *cli) skillRollback() *cobra.Command {
	cmd := leaf("rollback SLUG VERSION", "make an older version current again (sessions keep theirs until they refresh)", 2, 2)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		in, err := cat.Rollback(c.ctx, c.as, pos[0], pos[1])
		if err != nil {
			return err
		}
		c.notifyDaemon()
		if c.json {
			return c.printJSON(in)
		}
		if in.Previous == "" {
			fmt.Fprintf(c.stdout, "%s: %s is the current version already: nothing changed\n", in.Slug, store.ShortHash(in.Version))
			return nil
		}
		fmt.Fprintf(c.stdout, "%s rolled back to %s (was %s); open sessions see it when they refresh\n", in.Slug, store.ShortHash(in.Version), store.ShortHash(in.Previous))
		for _, w := range in.Warnings {
			fmt.Fprintf(c.stdout, "  warning: %s\n", w)
		}
		return nil
	}
	return cmd
}

func (c *cli) skillUpdate() *cobra.Command {
	cmd := leaf("update SLUG... | --all", "re-read skills' recorded sources and install what changed as new versions", 0, -1)
	fs := cmd.Flags()
	all := fs.Bool("all", false, "every skill you manage")
	dry := fs.Bool("dry-run", false, "show what would change, install nothing")
	force := fs.Bool("force", false, "install what the source holds even when it is a version it delivered before (undoes a rollback or an edit)")
	ref := fs.String("ref", "", "read this git branch, tag or commit `REF` instead of the one recorded")
	tag := fs.String("tag", "", "read this git `TAG` (e.g. a newer release) instead of the recorded ref")
	timeout := fs.Duration("timeout", git.DefaultCloneTimeout, "give up on a git source not read within this")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		if (len(pos) > 0) == *all {
			return fmt.Errorf("skill update takes SLUG... or --all: %w", errUsage)
		}
		r, err := catalog.UpdateRef(*ref, *tag)
		if err != nil {
			return err
		}
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		res, err := cat.Update(c.ctx, catalog.UpdateRequest{As: c.as, Slugs: pos, All: *all, DryRun: *dry, Force: *force, Ref: r, Timeout: *timeout})
		if err != nil {
			return err
		}
		if !*dry {
			c.notifyDaemon()
		}
		if c.json {
			if err := c.printJSON(res); err != nil {
				return err
			}
		} else {
			c.printUpdate(res)
		}
		if n := res.Failed(); n > 0 {
			return fmt.Errorf("%d of %d skills failed to update", n, len(res.Skills))
		}
		return nil
	}
	return cmd
}

func (c *cli) printUpdate(res *catalog.UpdateResult) {
	if len(res.Skills) == 0 {
		fmt.Fprintln(c.stdout, "no skills to update")
	}
	for _, u := range res.Skills {
		switch u.Status {
		case catalog.UpdateUpdated, catalog.UpdateAvailable:
			verb := "updated"
			if u.Status == catalog.UpdateAvailable {
				verb = "would update"
			}
			fmt.Fprintf(c.stdout, "%s: %s %s → %s (%s)\n", u.Slug, verb, store.ShortHash(u.From), store.ShortHash(u.To), diffStatLine(*u.DiffStat))
		case catalog.UpdateHeld:
			fmt.Fprintf(c.stdout, "%s: held at %s: %s\n", u.Slug, store.ShortHash(u.From), u.Note)
		case catalog.UpdateUnchanged:
			fmt.Fprintf(c.stdout, "%s: unchanged (%s)\n", u.Slug, store.ShortHash(u.From))
		case catalog.UpdateNoSource:
			fmt.Fprintf(c.stdout, "%s: %s\n", u.Slug, u.Error)
		default:
			fmt.Fprintf(c.stderr, "%s: failed: %s\n", u.Slug, u.Error)
		}
		for _, w := range u.Warnings {
			fmt.Fprintf(c.stdout, "  warning: %s\n", w)
		}
	}
	if res.DryRun {
		fmt.Fprintln(c.stdout, "dry run: nothing installed")
	}
}
