package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/git"
	"skillfs/skills/manifest"
	"skillfs/skills/source"
	"skillfs/skills/store"
)

func (c *cli) skillCmd() *cobra.Command {
	return group("skill", "install, inspect and manage skills",
		c.skillImport(), c.skillPrepare(), c.skillConfirm("confirm"), c.skillConfirm("discard"), c.skillEdit(),
		c.skillList(), c.skillShow(), c.skillValidate(), c.skillToggle("enable"), c.skillToggle("disable"),
		c.skillDelete(), c.skillExport(), c.skillDeps(), c.skillShare(), c.skillCurated(), c.skillInstallCurated(), c.skillCatalog(),
		c.skillVersions(), c.skillDiff(), c.skillRollback(), c.skillUpdate())
}

func (c *cli) skillImport() *cobra.Command {
	cmd := leaf("import SOURCE | --agents", "install skills from a directory, ZIP, SKILL.md or git repository, or from other agents' skill folders", 0, 1)
	fs := cmd.Flags()
	var picks listFlag
	var share, ref string
	var ignores listFlag
	fs.Var(&picks, "skill", "import this skill of a multi-skill source: folder name, slug, name or path, or a `GLOB` (repeatable)")
	fs.Var(&ignores, "ignore", "leave out the skills this `GLOB` matches (repeatable)")
	all := fs.Bool("all", false, "import every skill of the source")
	list := fs.Bool("list", false, "list the skills of the source, install nothing")
	replace := fs.Bool("replace", false, "make this a new version of the same-slug skill you manage")
	builtin := fs.Bool("builtin", false, "register as a builtin skill (admins)")
	fs.StringVar(&share, "share", "", "who may read: `SCOPE` (global, department:ID,... or user:UID,...)")
	fs.StringVar(&ref, "ref", "", "git branch, tag or commit: `REF`")
	sub := fs.String("path", "", "import only from this folder `DIR` of the source (also SOURCE#ref:path)")
	agents := fs.Bool("agents", false, "import from the skill folders of agents on this machine instead of SOURCE")
	timeout := fs.Duration("timeout", git.DefaultCloneTimeout, "give up on a git source not read within this")
	project := fs.String("project", "", "with --agents: also this project folder `DIR`'s .claude/skills, .agents/skills, .codex/skills and .opencode/skills (after your own)")
	cmd.RunE = func(_ *cobra.Command, pos []string) (err error) {
		if (len(pos) == 1) == *agents {
			return fmt.Errorf("skill import takes SOURCE or --agents: %w", errUsage)
		}
		req := catalog.ImportRequest{Ref: ref, Path: *sub, Skills: picks, Ignore: ignores, All: *all, List: *list,
			As: c.as, Replace: *replace, Builtin: *builtin, Agents: *agents, Timeout: *timeout}
		if *agents {
			req.Source = "agents"
			req.AgentHome, _ = os.UserHomeDir()
			if *project != "" {
				if req.Project, err = filepath.Abs(*project); err != nil {
					return err
				}
			}
		} else {
			req.Source = pos[0]
		}
		if req.Share, err = readShare(share); err != nil {
			return err
		}
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		res, ierr := cat.Import(c.ctx, req)
		return c.importResult(res, ierr, req.List)
	}
	return cmd
}

// importResult prints what an import did and picks its error: a listing
// (--list) succeeds whenever the source could be read; an import fails when
// any skill failed. Shadowed skills of agent folders are not failures.
func (c *cli) importResult(res *catalog.ImportResult, ierr error, list bool) error {
	if c.json {
		if err := c.printJSON(res); err != nil {
			return err
		}
	} else {
		c.printImport(res)
	}
	if ierr == nil && !list && len(res.Failed) > 0 {
		where := "listed above"
		if c.json {
			where = `see "failed"`
		}
		return kindError{Msg: fmt.Sprintf("%d of %d skills failed to import (%s); %d installed",
			len(res.Failed), len(res.Failed)+len(res.Installed), where, len(res.Installed)), Kind: skills.ErrInvalid}
	}
	return ierr
}

func (c *cli) printImport(res *catalog.ImportResult) {
	for _, w := range res.Warnings {
		fmt.Fprintf(c.stdout, "warning: %s\n", w)
	}
	if len(res.Available) > 0 {
		rows := make([][]string, len(res.Available))
		for i, a := range res.Available {
			status := a.Status
			if status == "" {
				status = "-"
			} else if n := len(a.Warnings); n == 1 {
				status += " (1 warning)"
			} else if n > 1 {
				status += fmt.Sprintf(" (%d warnings)", n)
			}
			rows[i] = []string{a.Slug, a.Name, status, a.Path, truncate(a.Description, 50)}
		}
		c.table([]string{"SKILL", "NAME", "STATUS", "PATH", "DESCRIPTION"}, rows)
		for _, a := range res.Available {
			for _, w := range a.Warnings {
				fmt.Fprintf(c.stdout, "%s: warning: %s\n", a.Slug, w)
			}
			if a.Error != "" {
				fmt.Fprintf(c.stdout, "%s: refused: %s\n", a.Slug, a.Error)
			}
		}
	}
	for _, in := range res.Installed {
		fmt.Fprintf(c.stdout, "installed %s (%s) version %s\n", in.Slug, in.Name, store.ShortHash(in.Version))
		if in.Readable != "" {
			fmt.Fprintf(c.stdout, "  readable by: %s%s\n", in.Readable, shareHint(in))
		}
		if in.Note != "" {
			fmt.Fprintf(c.stdout, "  note: %s\n", in.Note)
		}
		for _, w := range in.Warnings {
			fmt.Fprintf(c.stdout, "  warning: %s\n", w)
		}
	}
	for _, s := range res.Shadowed {
		fmt.Fprintf(c.stdout, "shadowed %s\n", s.Reason)
	}
	for _, f := range res.Failed {
		fmt.Fprintf(c.stderr, "failed %s: %s\n", f.Source, f.Error)
	}
}

// shareHint says how to share a skill that only one user may read, so an
// operator who installs a skill for others learns why their sessions leave
// it out.
func shareHint(in catalog.Installed) string {
	if !strings.HasPrefix(in.Readable, skills.ScopeUser+":") || strings.Contains(in.Readable, ",") {
		return ""
	}
	return fmt.Sprintf(" (no one else: other users' sessions leave it out until `skillfs skill share %s --read SCOPE` shares it; --share SCOPE at import)", in.Slug)
}

func (c *cli) skillPrepare() *cobra.Command {
	cmd := leaf("prepare SOURCE", "two-step install, step 1: read, check and stage a source as a draft (expires after 1 h)", 1, 1)
	fs := cmd.Flags()
	var picks listFlag
	fs.Var(&picks, "skill", "prepare this skill of a multi-skill source: `NAME` or `GLOB` (repeatable)")
	all := fs.Bool("all", false, "prepare every skill of the source")
	replace := fs.Bool("replace", false, "make this a new version of the same-slug skill you manage")
	ref := fs.String("ref", "", "git branch, tag or commit: `REF`")
	sub := fs.String("path", "", "prepare only from this folder `DIR` of the source (also SOURCE#ref:path)")
	timeout := fs.Duration("timeout", git.DefaultCloneTimeout, "give up on a git source not read within this")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		d, err := cat.Prepare(c.ctx, catalog.ImportRequest{Source: pos[0], Ref: *ref, Path: *sub, Skills: picks, All: *all,
			As: c.as, Replace: *replace, Timeout: *timeout})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(d)
		}
		fmt.Fprintf(c.stdout, "draft %s (expires %s)\n", d.ID, d.ExpiresAt.Local().Format("15:04:05"))
		for _, s := range d.Skills {
			fmt.Fprintf(c.stdout, "  %s (%s): %s\n", s.Slug, s.Name, truncate(s.Description, 60))
			for _, w := range s.Warnings {
				fmt.Fprintf(c.stdout, "    warning: %s\n", w)
			}
		}
		for _, f := range d.Failed {
			fmt.Fprintf(c.stderr, "left out %s: %s\n", f.Source, f.Error)
		}
		fmt.Fprintf(c.stdout, "install with `skillfs skill confirm %s [--share SCOPE]`, or drop it with `skillfs skill discard %s`\n", d.ID, d.ID)
		return nil
	}
	return cmd
}

// skillConfirm installs or drops a draft.
func (c *cli) skillConfirm(sub string) *cobra.Command {
	cmd := leaf(sub+" DRAFT", "two-step install, step 2: install the draft with the share scope chosen now", 1, 1)
	share := new(string)
	if sub == "discard" {
		cmd.Short = "two-step install, step 2: drop the draft"
	} else {
		cmd.Flags().StringVar(share, "share", "", "who may read: `SCOPE` (global, department:ID,... or user:UID,...)")
	}
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if sub == "discard" {
			if err := cat.Discard(c.ctx, c.as, pos[0]); err != nil {
				return err
			}
			return c.done(map[string]string{"discarded": pos[0]}, "draft %s discarded", pos[0])
		}
		sh, err := readShare(*share)
		if err != nil {
			return err
		}
		res, err := cat.Confirm(c.ctx, c.as, pos[0], sh)
		return c.importResult(res, err, false)
	}
	return cmd
}

// skillEdit writes one text file of a skill as a new version.
func (c *cli) skillEdit() *cobra.Command {
	cmd := leaf("edit SLUG PATH", "online editing: write one text file of a skill (from standard input or --from) or remove it, as a new version", 2, 2)
	fs := cmd.Flags()
	from := fs.String("from", "", "read the new content from `FILE` (default: standard input)")
	del := fs.Bool("delete", false, "remove the file instead")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		var content io.Reader
		if !*del {
			content = c.stdin
			if *from != "" {
				// A FIFO or device named with --from is refused unread, as
				// is a file of the data directory or the index; standard
				// input is streamed and cut at the size limit.
				if err := cat.CheckSource(*from, *from); err != nil {
					return fmt.Errorf("read new content: %w", err)
				}
				f, _, err := skills.OpenRegular(*from, *from, true)
				if err != nil {
					return fmt.Errorf("read new content: %w", err)
				}
				defer f.Close()
				content = f
			}
		}
		in, err := cat.Edit(c.ctx, c.as, pos[0], pos[1], content)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(in)
		}
		fmt.Fprintf(c.stdout, "%s: version %s\n", in.Slug, store.ShortHash(in.Version))
		for _, w := range in.Warnings {
			fmt.Fprintf(c.stdout, "  warning: %s\n", w)
		}
		return nil
	}
	return cmd
}

func (c *cli) skillValidate() *cobra.Command {
	cmd := leaf("validate PATH", "check a skill folder (package rules and limits, then strict SKILL.md rules) or a lone SKILL.md; exit 1 listing every problem", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		r := validate(pos[0], c.sourceGuard())
		if c.json {
			if err := c.printJSON(r); err != nil {
				return err
			}
		} else {
			for _, p := range r.Errors {
				fmt.Fprintf(c.stdout, "error: %s\n", p)
			}
			for _, w := range r.Warnings {
				fmt.Fprintf(c.stdout, "warning: %s\n", w)
			}
			if r.Valid {
				fmt.Fprintf(c.stdout, "%s: valid skill %q\n", pos[0], r.Slug)
			}
		}
		if !r.Valid {
			return &validateError{n: len(r.Errors)}
		}
		return nil
	}
	return cmd
}

// validation is the result of `skill validate`; its JSON is part of the CLI.
type validation struct {
	Valid    bool               `json:"valid"`
	Slug     string             `json:"slug,omitempty"`
	Errors   []manifest.Problem `json:"errors"`
	Warnings []string           `json:"warnings"`
}

// sourceGuard refuses, as an import does, a path that is a file of the
// index or reaches the data directory (see catalog.CheckSourceIn), for a
// command that reads a path without opening the data directory. Without a
// data directory there is nothing to guard.
func (c *cli) sourceGuard() func(path string) error {
	home, err := c.homeDir()
	if err != nil {
		return func(string) error { return nil }
	}
	target, err := c.indexTarget()
	if err != nil {
		return func(string) error { return err }
	}
	return func(p string) error { return catalog.CheckSourceIn(home, target, p, p) }
}

// validate checks a skill folder (or a lone SKILL.md) the way an install
// would: the package rules and limits, then the strict manifest rules.
// guard sees the path before anything of it is opened.
func validate(path string, guard func(string) error) validation {
	r := validation{Errors: []manifest.Problem{}, Warnings: []string{}}
	fail := func(field string, err error) validation {
		r.Errors = append(r.Errors, manifest.Problem{Field: field, Message: err.Error()})
		return r
	}
	if err := guard(path); err != nil {
		return fail("path", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fail("path", err)
	}
	file := path
	if fi.IsDir() {
		tmp, err := os.MkdirTemp("", "skillfs-validate-")
		if err != nil {
			return fail("path", err)
		}
		defer os.RemoveAll(tmp)
		st, err := source.StageDir(path, filepath.Join(tmp, "skill"), skills.DefaultLimits())
		if err != nil {
			return fail("package", err)
		}
		r.Warnings = append(r.Warnings, st.Warnings...)
		file = filepath.Join(tmp, "skill", skills.ManifestName)
	}
	data, err := skills.ReadManifest(file, path, skills.DefaultLimits().MaxManifest, true)
	if err != nil {
		return fail(skills.ManifestName, err)
	}
	m, warnings, err := manifest.Parse(data, manifest.Strict)
	r.Warnings = append(r.Warnings, warnings...)
	var me *manifest.Error
	if errors.As(err, &me) {
		r.Errors = me.Problems
		return r
	} else if err != nil {
		return fail(skills.ManifestName, err)
	}
	r.Valid, r.Slug = true, m.Slug
	if fi.IsDir() && filepath.Base(filepath.Clean(path)) != m.Slug {
		r.Warnings = append(r.Warnings, fmt.Sprintf("folder %q differs from slug %q", filepath.Base(path), m.Slug))
	}
	return r
}

// validateError makes `skill validate` exit 1 whatever the problems were.
type validateError struct{ n int }

func (e *validateError) Error() string { return fmt.Sprintf("%d problem(s) found", e.n) }

func (c *cli) skillList() *cobra.Command {
	cmd := leaf("list", "the catalog: the skills the acting user may see, builtins first", 0, 0)
	curated := cmd.Flags().Bool("curated", false, "list the skills curated sources offer that you have not installed instead")
	cmd.RunE = func(*cobra.Command, []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if *curated {
			list, err := cat.Curated(c.ctx, c.as)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(list)
			}
			c.printCurated(list)
			return nil
		}
		list, err := cat.List(c.ctx, c.as)
		if err != nil {
			return err
		}
		if c.json {
			out := make([]catalog.Summary, len(list))
			for i, s := range list {
				out[i] = catalog.Summarize(s)
			}
			return c.printJSON(out)
		}
		rows := make([][]string, len(list))
		for i, s := range list {
			en := "yes"
			if !s.Enabled {
				en = "no"
			}
			rows[i] = []string{s.Slug, truncate(skills.DisplayName(s.Plugin, s.Name), 40), s.SourceType, en, store.ShortHash(s.Version), truncate(s.Description, 60)}
		}
		c.table([]string{"SLUG", "NAME", "SOURCE", "ENABLED", "VERSION", "DESCRIPTION"}, rows)
		return nil
	}
	return cmd
}

func (c *cli) skillShow() *cobra.Command {
	cmd := leaf("show SLUG", "one skill with its versions and provenance", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		d, err := cat.Show(c.ctx, c.as, pos[0])
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(struct {
				catalog.Summary
				Source   string            `json:"source"`
				Path     string            `json:"path"`
				Versions []*skills.Version `json:"versions"`
			}{catalog.Summarize(d.Skill), d.Source, d.Path, d.Versions})
		}
		j := catalog.Summarize(d.Skill)
		w := bufio.NewWriter(c.stdout)
		defer w.Flush()
		fmt.Fprintf(w, "slug:         %s\nname:         %s\ndescription:  %s\n", j.Slug, skills.DisplayName(j.Plugin, j.Name), j.Description)
		fmt.Fprintf(w, "enabled:      %v\nsource:       %s (%s)\ncreator:      %s\n", j.Enabled, d.Source, j.SourceType, j.Creator)
		fmt.Fprintf(w, "share:        read %s", j.Share.Read)
		if j.Share.Manage != "" {
			fmt.Fprintf(w, ", manage %s", j.Share.Manage)
		}
		fmt.Fprintf(w, "\nskills:       %s\ntools:        %s\nmcp servers:  %s\n",
			strings.Join(j.SkillDependencies, " "), strings.Join(j.ToolDependencies, " "), strings.Join(j.MCPDependencies, " "))
		fmt.Fprintf(w, "path:         %s\nversions:\n", d.Path)
		for _, v := range d.Versions {
			cur := " "
			if v.Hash == d.Version {
				cur = "*"
			}
			fmt.Fprintf(w, " %s %s  %s  by %s  %d files, %d bytes  from %s", cur, store.ShortHash(v.Hash),
				v.InstalledAt.Format("2006-01-02 15:04:05"), v.Installer, v.Files, v.Bytes, v.Source)
			if v.Commit != "" {
				fmt.Fprintf(w, " @ %s", store.ShortHash(v.Commit))
			}
			if v.Worktree != "" {
				fmt.Fprintf(w, " (working tree %s)", v.Worktree)
			}
			fmt.Fprintln(w)
		}
		return nil
	}
	return cmd
}

func (c *cli) skillToggle(sub string) *cobra.Command {
	cmd := leaf(sub+" SLUG", sub+" a skill: a disabled skill leaves every session's view at once", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		s, err := cat.SetEnabled(c.ctx, c.as, pos[0], sub == "enable")
		if err != nil {
			return err
		}
		c.notifyDaemon()
		return c.done(catalog.Summarize(s), "%s %sd", s.Slug, sub)
	}
	return cmd
}

func (c *cli) skillDelete() *cobra.Command {
	cmd := leaf("delete SLUG", "remove a skill with all its versions", 1, 1)
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if err := cat.Delete(c.ctx, c.as, pos[0]); err != nil {
			return err
		}
		c.notifyDaemon()
		return c.done(map[string]string{"deleted": pos[0]}, "%s deleted", pos[0])
	}
	return cmd
}

func (c *cli) skillExport() *cobra.Command {
	cmd := leaf("export SLUG", "a ZIP of the skill's current version, or of another with --version", 1, 1)
	out := cmd.Flags().StringP("output", "o", "", "write the ZIP to this `FILE` (default: standard output)")
	version := cmd.Flags().String("version", "", "export this `VERSION` (a unique prefix of its hash) instead of the current one")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		if _, err := cat.ExportPath(c.ctx, c.as, pos[0], *version); err != nil {
			return err // before the output file is made
		}
		if *out == "" {
			return cat.ExportVersion(c.ctx, c.as, pos[0], *version, c.stdout)
		}
		tmp := *out + ".partial"
		f, err := os.Create(tmp)
		if err != nil {
			return fmt.Errorf("export %s: %w", pos[0], err)
		}
		if err := cat.ExportVersion(c.ctx, c.as, pos[0], *version, f); err != nil {
			f.Close()
			os.Remove(tmp)
			return err
		}
		if err := f.Close(); err != nil {
			os.Remove(tmp)
			return err
		}
		return os.Rename(tmp, *out)
	}
	return cmd
}

func (c *cli) skillDeps() *cobra.Command {
	cmd := leaf("deps SLUG", "replace the skill's dependency lists: skills, tools and MCP servers", 1, 1)
	fs := cmd.Flags()
	var sk, tools, mcps listFlag
	fs.Var(&sk, "skill", "skill dependency: `SLUG` (repeatable)")
	fs.Var(&tools, "tool", "tool dependency: `NAME` (repeatable)")
	fs.Var(&mcps, "mcp", "MCP server dependency: `NAME` (repeatable)")
	cmd.RunE = func(_ *cobra.Command, pos []string) error {
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		s, err := cat.Deps(c.ctx, c.as, pos[0], sk, tools, mcps)
		if err != nil {
			return err
		}
		c.notifyDaemon()
		return c.done(catalog.Summarize(s), "%s depends on skills [%s], tools [%s], mcp servers [%s]", s.Slug,
			strings.Join(s.SkillDependencies, " "), strings.Join(s.ToolDependencies, " "), strings.Join(s.MCPDependencies, " "))
	}
	return cmd
}

func (c *cli) skillShare() *cobra.Command {
	cmd := leaf("share SLUG --read SCOPE [--manage SCOPE]", "change who may read and who may manage a skill", 1, 1)
	read := cmd.Flags().String("read", "", "who may read: `SCOPE`")
	manage := cmd.Flags().String("manage", "", "who may manage: `SCOPE` (default: the creator only)")
	cmd.RunE = func(_ *cobra.Command, pos []string) (err error) {
		if *read == "" {
			return fmt.Errorf("skill share needs --read SCOPE: %w", errUsage)
		}
		var sh skills.Share
		if sh.Read, err = policy.ParseScope(*read); err != nil {
			return err
		}
		if *manage != "" {
			if sh.Manage, err = policy.ParseScope(*manage); err != nil {
				return err
			}
		}
		cat, err := c.openCatalog()
		if err != nil {
			return err
		}
		defer cat.Close()
		s, err := cat.Share(c.ctx, c.as, pos[0], sh)
		if err != nil {
			return err
		}
		c.notifyDaemon()
		j := catalog.Summarize(s)
		return c.done(j, "%s: read %s, manage %s", s.Slug, j.Share.Read, orCreator(j.Share.Manage))
	}
	return cmd
}

// readShare parses a --share read scope; "" (nil) keeps the private
// default.
func readShare(read string) (*skills.Share, error) {
	if read == "" {
		return nil, nil
	}
	sc, err := policy.ParseScope(read)
	if err != nil {
		return nil, err
	}
	return &skills.Share{Read: sc}, nil
}

func orCreator(s string) string {
	if s == "" {
		return "creator only"
	}
	return s
}

// done prints a result as JSON or as a line of text.
func (c *cli) done(v any, format string, a ...any) error {
	if c.json {
		return c.printJSON(v)
	}
	fmt.Fprintf(c.stdout, format+"\n", a...)
	return nil
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
