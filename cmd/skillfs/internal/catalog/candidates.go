package catalog

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"skillfs/skills"
	"skillfs/skills/manifest"
	skillsource "skillfs/skills/source"
)

// found is one skill a source holds, with its SKILL.md read once and parsed
// the way import parses it, so that listing, picking, ordering and
// namespacing agree on each skill's name and slug.
type found struct {
	skillsource.Candidate
	m   *manifest.Manifest // nil when the SKILL.md cannot be read or parsed (err says why)
	err error
	// want is the slug the skill asks for in the catalog: its own, or
	// <plugin>-<slug> when another skill of the same source has the same
	// slug and this one comes from a plugin.
	want string
}

// readFound reads the SKILL.md of each candidate. root is the source's
// root: a SKILL.md that is a link is followed only inside it, and read up
// to maxManifest bytes, the limit staging applies. total, when
// positive, bounds the bytes of all of them together, as the source's
// total-bytes limit bounds what its skills store: many skill folders may
// link to one large SKILL.md, and the skills past the bound are refused
// unread. The bodies are not kept.
func readFound(root string, cands []skillsource.Candidate, maxManifest, total int64) []found {
	out := make([]found, len(cands))
	var read int64
	for i, cand := range cands {
		f := found{Candidate: cand}
		var err error
		if total > 0 && read > total {
			err = fmt.Errorf("%w (the SKILL.md files of one source count together)", &skills.LimitError{
				Limit: skills.LimitTotalBytes, Value: read, Max: total, Path: path.Join(cand.Rel, skills.ManifestName)})
		} else {
			var data []byte
			data, err = skillsource.ReadSkillManifest(root, cand.Dir, maxManifest)
			read += int64(len(data))
			if err == nil {
				f.m, _, err = parseImported(data, cand.Name)
			}
		}
		f.err = err
		if f.m != nil {
			f.m.Body = "" // up to MaxManifest each, and never used past here
			f.want = f.m.Slug
		}
		out[i] = f
	}
	namespacePlugins(out)
	return out
}

// parseImported parses a SKILL.md as every import does: leniently, with the
// name of its folder for a skill that has no usable name.
func parseImported(data []byte, folder string) (*manifest.Manifest, []string, error) {
	return manifest.ParseWith(data, manifest.ParseOptions{Mode: manifest.Lenient, Folder: folder})
}

// namespacePlugins gives the skills of plugins that share a slug with
// another skill of the same source the slug <plugin>-<slug>, as plugin
// marketplaces hold many plugins with a skill of the same name ("setup").
// Skills of no plugin keep their slug; conflicts that remain are settled by
// -vN as for skills installed from elsewhere.
func namespacePlugins(fs []found) {
	count := map[string]int{}
	for _, f := range fs {
		if f.m != nil {
			count[f.m.Slug]++
		}
	}
	for i := range fs {
		f := &fs[i]
		if f.m == nil || count[f.m.Slug] < 2 || f.Plugin == "" {
			continue
		}
		if ns := namespaced(f.Plugin, f.m.Slug); ns != "" {
			f.want = ns
		}
	}
}

// namespaced returns the slug <plugin>-<slug>, the plugin's part cut so
// that the skill's own slug stays whole within MaxSlugLen (cutting the end
// instead gave every skill of a plugin with a long name the same slug), or
// "" when the plugin leaves nothing to put in front of it.
func namespaced(plugin, slug string) string {
	p := manifest.Slugify(plugin)
	if room := manifest.MaxSlugLen - len(slug) - 1; len(p) > room {
		p = strings.TrimRight(p[:max(room, 0)], "-")
	}
	if p == "" {
		return ""
	}
	return p + "-" + slug
}

// DisplayName is how a skill shows in listings and prompts: plugin:name for
// the skills of a plugin.
func DisplayName(plugin, name string) string {
	if plugin == "" {
		return name
	}
	return plugin + ":" + name
}

// available describes a found skill for a listing.
func (f found) available() Available {
	a := Available{Name: f.Name, Slug: f.Name, Path: f.Rel, Plugin: f.Plugin}
	if f.m != nil {
		a.Name, a.Slug, a.Description = DisplayName(f.Plugin, f.m.Name), f.want, f.m.Description
	}
	if f.err != nil {
		a.Status, a.Error = StatusRefused, f.err.Error()
	}
	return a
}

func describe(fs []found) []Available {
	out := make([]Available, len(fs))
	for i, f := range fs {
		out[i] = f.available()
	}
	return out
}

// pick selects skills by folder name, slug, display name or path in the
// source; a name with glob characters (*, ?, [) picks every skill it
// matches (path.Match), and must match at least one.
func pick(fs []found, names []string) ([]found, error) {
	var out []found
	var missing []string
	for _, n := range names {
		hit := false
		for _, f := range fs {
			if !f.matches(n) {
				continue
			}
			if !slices.ContainsFunc(out, func(o found) bool { return o.Dir == f.Dir }) {
				out = append(out, f)
			}
			hit = true
			if !isGlob(n) {
				break
			}
		}
		if !hit {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		slugs := make([]string, len(fs))
		for i, f := range fs {
			slugs[i] = f.available().Slug
		}
		return fs, fmt.Errorf("no skill named %s (available: %s): %w",
			strings.Join(missing, ", "), strings.Join(slugs, ", "), skills.ErrNotFound)
	}
	return out, nil
}

// ignore leaves out the skills any of the globs matches.
func ignore(fs []found, globs []string) []found {
	if len(globs) == 0 {
		return fs
	}
	var out []found
	for _, f := range fs {
		if !slices.ContainsFunc(globs, f.matches) {
			out = append(out, f)
		}
	}
	return out
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// matches reports whether a name or glob names the skill: its folder, the
// slug it would get, its own slug, its name or its path in the source.
func (f found) matches(pattern string) bool {
	vals := []string{f.Name, f.Rel, f.want}
	if f.m != nil {
		vals = append(vals, f.m.Slug, f.m.Name, DisplayName(f.Plugin, f.m.Name))
	}
	for _, v := range vals {
		if v == "" {
			continue
		}
		if !isGlob(pattern) {
			if pattern == v {
				return true
			}
			continue
		}
		if ok, err := path.Match(pattern, v); err == nil && ok {
			return true
		}
	}
	return false
}

// dependencyOrder sorts the skills of one source so that a skill comes
// after the skills of the same source it depends on (dependency validation
// needs them installed first); otherwise the discovery order is kept.
func dependencyOrder(fs []found) []found {
	bySlug := map[string]int{}
	for i, f := range fs {
		if f.m == nil {
			continue
		}
		for _, s := range []string{f.want, f.m.Slug} {
			if _, dup := bySlug[s]; !dup {
				bySlug[s] = i
			}
		}
	}
	out := make([]found, 0, len(fs))
	state := make([]int, len(fs)) // 0 new, 1 visiting, 2 done
	var visit func(i int)
	visit = func(i int) {
		if state[i] != 0 {
			return // done, or a cycle: validation will name it
		}
		state[i] = 1
		if fs[i].m != nil {
			for _, d := range fs[i].m.SkillDependencies {
				if j, ok := bySlug[d]; ok {
					visit(j)
				}
			}
		}
		state[i] = 2
		out = append(out, fs[i])
	}
	for i := range fs {
		visit(i)
	}
	return out
}

// agentFound turns the skills found in the agents' folders into found
// skills, each its own root.
func agentFound(list []skillsource.FoundSkill) []skillsource.Candidate {
	cands := make([]skillsource.Candidate, len(list))
	for i, f := range list {
		cands[i] = skillsource.Candidate{Name: filepath.Base(f.Dir), Rel: f.RealDir, Dir: f.RealDir}
	}
	return cands
}
