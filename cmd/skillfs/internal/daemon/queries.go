package daemon

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	iofs "io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"skillfs/cmd/skillfs/api"
	skfs "skillfs/fs"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/manifest"
)

// Activations returns a session's activated skills (those still readable, in
// order of first activation) and the tools and MCP servers to load: the own
// dependencies of its preloaded, then activated, skills.
func (d *Daemon) Activations(ctx context.Context, id string) (*api.Activations, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	stored, err := d.rec.Activations(ctx, id)
	if err != nil {
		return nil, err
	}
	pinned := map[string]bool{}
	for _, p := range s.Pins {
		pinned[p.Slug] = true
	}
	out := &api.Activations{Activated: []skills.Activation{}, Preloaded: []string{}}
	var order []string
	pre, err := d.preloadClosure(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, p := range s.Pins {
		if pre[p.Slug] {
			out.Preloaded = append(out.Preloaded, p.Slug)
			order = append(order, p.Slug)
		}
	}
	for _, a := range stored {
		if !pinned[a.Slug] {
			continue // revoked: its activation no longer counts
		}
		out.Activated = append(out.Activated, a)
		if !slices.Contains(order, a.Slug) {
			order = append(order, a.Slug)
		}
	}
	var active []*skills.Skill
	for _, slug := range order {
		sk, err := d.db.Skill(ctx, slug)
		if errors.Is(err, skills.ErrNotFound) {
			continue // deleted meanwhile: nothing of it to load
		}
		if err != nil {
			return nil, err // a failed query is not "no tools"
		}
		active = append(active, sk)
	}
	out.Tools, out.MCPs, out.Conflicts = policy.ToolsToLoad(active)
	if out.Tools == nil {
		out.Tools = []string{}
	}
	if out.MCPs == nil {
		out.MCPs = []string{}
	}
	return out, nil
}

// preloadClosure is the set of preloaded skills with their dependencies,
// among those the session can still read.
func (d *Daemon) preloadClosure(ctx context.Context, s *skills.Session) (map[string]bool, error) {
	out := map[string]bool{}
	if len(s.Preload) == 0 {
		return out, nil
	}
	pinned := map[string]bool{}
	for _, p := range s.Pins {
		pinned[p.Slug] = true
	}
	var qerr error
	lookup := func(slug string) *skills.Skill {
		if !pinned[slug] || qerr != nil {
			return nil
		}
		sk, err := d.db.Skill(ctx, slug)
		if err != nil && !errors.Is(err, skills.ErrNotFound) {
			qerr = err
		}
		return sk
	}
	readable, _ := policy.Closure(s.Preload, lookup, func(*skills.Skill) bool { return true })
	if qerr != nil {
		return nil, qerr
	}
	for _, slug := range readable {
		out[slug] = true
	}
	return out, nil
}

// viewFS is the in-process view of a session, with the filesystem's rules,
// sharing the mount's cached trees.
func (d *Daemon) viewFS(s *skills.Session) iofs.FS {
	if v, err := d.fs.ViewFS(s.ID); err == nil {
		return v
	}
	set, err := d.db.SkillSet(context.Background())
	if err != nil {
		set = nil // the view then keeps its own copies of the names
	}
	v, _ := d.presentView(set, s.Pins)
	return skfs.NewViewFS(v)
}

// Prompt renders the catalog block of a session for the agent's system
// prompt: name, description and location of each readable skill; preloaded
// skills (and their dependencies) are inlined in full instead, each once
// (in markdown, not in the list too). A skill whose SKILL.md says
// disable-model-invocation: true is left out unless preloaded (it stays
// readable and mentionable), and a plugin's skill shows as plugin:name.
// No two skills show under one name (policy.PromptNames). Empty when nothing
// is listed.
func (d *Daemon) Prompt(ctx context.Context, id, format string) (string, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return "", err
	}
	if format == "" {
		format = "xml"
	}
	if format != "xml" && format != "markdown" {
		return "", fmt.Errorf("prompt format %q: want xml or markdown: %w", format, skills.ErrInvalid)
	}
	inline, err := d.preloadClosure(ctx, s)
	if err != nil {
		return "", err
	}
	all, err := d.promptEntries(ctx, s, d.viewFS(s), false)
	if err != nil {
		return "", err
	}
	var entries []promptEntry
	for _, e := range all {
		if inline[e.slug] {
			e.body = string(e.data)
		} else if !e.listed {
			continue
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return "", nil
	}
	var b strings.Builder
	if format == "xml" {
		writeXMLList(&b, entries)
		return b.String(), nil
	}
	// A preloaded skill is inlined below, not listed as well.
	var listed []promptEntry
	for _, e := range entries {
		if e.body == "" {
			listed = append(listed, e)
		}
	}
	writeMarkdownList(&b, listed)
	for _, e := range entries {
		if e.body != "" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "### %s (preloaded)\n\nLocation: `%s`\n\n%s\n", mdEscape(e.name), e.loc, strings.TrimRight(e.body, "\n"))
		}
	}
	return b.String(), nil
}

// promptEntry is one readable skill of a session as its prompt shows it.
type promptEntry struct {
	slug, name, desc, loc string
	data                  []byte             // its SKILL.md
	m                     *manifest.Manifest // parsed
	// listed says the list shows it: it does not say
	// disable-model-invocation: true.
	listed bool
	body   string // full SKILL.md when inlined in the prompt block
}

// promptEntries reads the SKILL.md of every readable skill of s, in the
// readable set's order, with the name each shows under (policy.PromptNames).
// With gone, a skill whose SKILL.md the view no longer serves (revoked
// since s was read) is left out; without, that is an error.
func (d *Daemon) promptEntries(ctx context.Context, s *skills.Session, vfs iofs.FS, gone bool) ([]promptEntry, error) {
	set, err := d.db.SkillSet(ctx) // the catalog from memory: no query per skill
	if err != nil {
		return nil, err
	}
	var entries []promptEntry
	var ranks []policy.NameRank
	for i, p := range s.Pins {
		data, err := iofs.ReadFile(vfs, p.Slug+"/"+skills.ManifestName)
		if gone && (errors.Is(err, iofs.ErrNotExist) || errors.Is(err, iofs.ErrPermission)) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s/SKILL.md: %w", p.Slug, err)
		}
		m, _, err := manifest.ParseStored(data, p.Slug)
		if err != nil {
			return nil, fmt.Errorf("parse %s/SKILL.md: %w", p.Slug, err)
		}
		name, class := m.Name, policy.NameShared
		if sk := set.Get(p.Slug); sk != nil { // nil: deleted meanwhile
			if sk.Version == p.Version {
				// The name the import settled (a folder's name, say, for a
				// SKILL.md without one), as `skill list` shows it.
				name = sk.Name
			}
			name = skills.DisplayName(sk.Plugin, name)
			switch {
			case sk.SourceType == skills.SourceBuiltin:
				class = policy.NameBuiltin
			case sk.Creator == s.UID:
				class = policy.NameOwn
			}
		}
		entries = append(entries, promptEntry{slug: p.Slug, name: name, desc: m.Description, data: data, m: m,
			loc: path.Join(d.agentPath, p.Slug, skills.ManifestName), listed: !m.DisableModelInvocation})
		ranks = append(ranks, policy.NameRank{Slug: p.Slug, Name: name, Class: class, Order: i})
	}
	shown := policy.PromptNames(ranks)
	for i := range entries {
		entries[i].name = shown[entries[i].slug]
	}
	return entries, nil
}

func writeXMLList(b *strings.Builder, entries []promptEntry) {
	if len(entries) == 0 {
		return
	}
	b.WriteString("<available_skills>\n")
	for _, e := range entries {
		b.WriteString("  <skill>\n")
		fmt.Fprintf(b, "    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n",
			xmlEscape(e.name), xmlEscape(e.desc), xmlEscape(e.loc))
		if e.body != "" {
			fmt.Fprintf(b, "    <content>\n%s\n    </content>\n", xmlEscape(strings.TrimRight(e.body, "\n")))
		}
		b.WriteString("  </skill>\n")
	}
	b.WriteString("</available_skills>\n")
}

func writeMarkdownList(b *strings.Builder, entries []promptEntry) {
	for i, e := range entries {
		if i == 0 {
			b.WriteString("## Available skills\n\n")
			b.WriteString("Read a skill's SKILL.md before using it.\n\n")
		}
		fmt.Fprintf(b, "- **%s** (`%s`): %s\n", mdEscape(e.name), e.loc, mdEscape(e.desc))
	}
}

func xmlEscape(s string) string {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s))
	return sb.String()
}

func mdEscape(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

// Mentions returns the readable skills a message invokes as /skill:slug
// commands (policy.Commands) and then those it names as $slug or
// [$slug](...) (policy.Mentions) and no command invoked, each once, with
// their SKILL.md, and records their activation. A skill whose SKILL.md says
// user-invocable: false is resolved from neither.
func (d *Daemon) Mentions(ctx context.Context, id, text string) ([]api.Mention, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	named, commands := namedIn(s, text)
	vfs := d.viewFS(s)
	out := []api.Mention{}
	for i, n := range named {
		data, err := iofs.ReadFile(vfs, n.Slug+"/"+skills.ManifestName)
		switch {
		case errors.Is(err, iofs.ErrNotExist), errors.Is(err, iofs.ErrPermission):
			continue // revoked since the session was read (a set, a disable): not readable now
		case err != nil:
			return nil, fmt.Errorf("read %s/SKILL.md: %w", n.Slug, err)
		}
		m, _, err := manifest.ParseStored(data, n.Slug)
		if err == nil && !m.UserInvocable {
			continue
		}
		if err := d.rec.Opened(id, n.Slug); err != nil {
			return nil, err
		}
		mention := api.Mention{Slug: n.Slug, Path: path.Join(d.agentPath, n.Slug, skills.ManifestName), Content: string(data)}
		if i < commands {
			mention.Command, mention.Args = true, n.Args
			if err == nil {
				mention.Body = strings.TrimSpace(m.Body)
			} else {
				mention.Body = strings.TrimSpace(string(data)) // a stored SKILL.md parses; should one not, all of it is body
			}
		}
		out = append(out, mention)
	}
	return out, nil
}

// namedIn is what text names of the skills s reads: the /skill:slug
// commands first (policy.Commands), then the $slug mentions
// (policy.Mentions) no command invoked, each once; the first commands of
// the list are the commands.
func namedIn(s *skills.Session, text string) (named []policy.Command, commands int) {
	pinned := map[string]bool{}
	for _, p := range s.Pins {
		pinned[p.Slug] = true
	}
	known := func(x string) bool { return pinned[x] }
	named = policy.Commands(text, known)
	commands = len(named)
	for _, slug := range policy.Mentions(text, known) {
		if !slices.ContainsFunc(named[:commands], func(c policy.Command) bool { return c.Slug == slug }) {
			named = append(named, policy.Command{Slug: slug})
		}
	}
	return named, commands
}

// Resolve returns the file a skill://SLUG[/PATH] URL names in a session's
// view, with the filesystem's confinement. A bare skill://SLUG is its SKILL.md.
func (d *Daemon) Resolve(ctx context.Context, id, raw string) (*api.Resolved, error) {
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(raw, "skill://")
	if !ok {
		return nil, fmt.Errorf("%q is not a skill:// URL: %w", raw, skills.ErrInvalid)
	}
	slug, rel, _ := strings.Cut(rest, "/")
	readable := make([]string, len(s.Pins))
	for i, p := range s.Pins {
		readable[i] = p.Slug
	}
	if !slices.Contains(readable, slug) {
		return nil, fmt.Errorf("skill %q is not readable in this session (readable: %s): %w",
			slug, strings.Join(readable, ", "), skills.ErrNotFound)
	}
	if rel == "" {
		rel = skills.ManifestName
	}
	// Percent-encoding is decoded once, then the path must be clean and
	// confined: an encoded ".." is as unwelcome as a plain one.
	dec, err := url.PathUnescape(rel)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", rel, skills.ErrUnsafePath)
	}
	clean, err := skills.CleanRelPath(dec)
	if err != nil {
		return nil, err
	}
	name := slug + "/" + clean
	vfs := d.viewFS(s)
	fi, err := iofs.Stat(vfs, name)
	if err != nil {
		return nil, fmt.Errorf("skill://%s: %w", name, notExist(err))
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("skill://%s is a directory: %w", name, skills.ErrInvalid)
	}
	data, err := iofs.ReadFile(vfs, name)
	if err != nil {
		return nil, fmt.Errorf("skill://%s: %w", name, notExist(err))
	}
	if clean == skills.ManifestName {
		if err := d.rec.Opened(id, slug); err != nil {
			return nil, err
		}
	}
	ct := mime.TypeByExtension(path.Ext(clean))
	if ct == "" {
		ct = http.DetectContentType(data)
	}
	if path.Ext(clean) == ".md" {
		ct = "text/markdown; charset=utf-8"
	}
	return &api.Resolved{Data: data, ContentType: ct, ModTime: fi.ModTime()}, nil
}

func notExist(err error) error {
	if errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%v: %w", err, skills.ErrNotFound)
	}
	return err
}
