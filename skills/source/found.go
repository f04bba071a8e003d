package source

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"skillfs/skills"
	"skillfs/skills/manifest"
)

// Found is one skill a source holds, with its SKILL.md read once and
// parsed the way an import parses it (see ParseManifest), so that listing,
// picking, ordering and namespacing agree on each skill's name and slug.
type Found struct {
	Candidate
	Manifest *manifest.Manifest // nil when the SKILL.md cannot be read or parsed (Err says why); its Body is not kept
	Err      error
	// Want is the slug the skill asks for: its own, or <plugin>-<slug>
	// when another skill of the same source has the same slug and this one
	// comes from a plugin.
	Want string
}

// ReadFound reads the SKILL.md of each candidate. root is the source's
// root: a SKILL.md that is a link is followed only inside it, and read up
// to maxManifest bytes, the limit staging applies. total, when
// positive, bounds the bytes of all of them together, as the source's
// total-bytes limit bounds what its skills store: many skill folders may
// link to one large SKILL.md, and the skills past the bound are refused
// unread. The bodies are not kept.
func ReadFound(root string, cands []Candidate, maxManifest, total int64) []Found {
	out := make([]Found, len(cands))
	var read int64
	for i, cand := range cands {
		f := Found{Candidate: cand}
		var err error
		if total > 0 && read > total {
			err = fmt.Errorf("%w (the SKILL.md files of one source count together)", &skills.LimitError{
				Limit: skills.LimitTotalBytes, Value: read, Max: total, Path: path.Join(cand.Rel, skills.ManifestName)})
		} else {
			var data []byte
			data, err = ReadSkillManifest(root, cand.Dir, maxManifest)
			read += int64(len(data))
			if err == nil {
				f.Manifest, _, err = ParseManifest(data, cand.Name)
			}
		}
		f.Err = err
		if f.Manifest != nil {
			f.Manifest.Body = "" // up to MaxManifest each, and never used past here
			f.Want = f.Manifest.Slug
		}
		out[i] = f
	}
	namespacePlugins(out)
	return out
}

// ParseManifest parses a SKILL.md as every import does, and as agents
// read their skills: leniently, with the name of its folder for a skill
// that has no usable name.
func ParseManifest(data []byte, folder string) (*manifest.Manifest, []string, error) {
	return manifest.ParseWith(data, manifest.ParseOptions{Mode: manifest.Lenient, Folder: folder})
}

// namespacePlugins gives the skills of plugins that share a slug with
// another skill of the same source the slug <plugin>-<slug>, as plugin
// marketplaces hold many plugins with a skill of the same name ("setup").
// Skills of no plugin keep their slug; conflicts that remain are settled by
// -vN as for skills installed from elsewhere.
func namespacePlugins(fs []Found) {
	count := map[string]int{}
	for _, f := range fs {
		if f.Manifest != nil {
			count[f.Manifest.Slug]++
		}
	}
	for i := range fs {
		f := &fs[i]
		if f.Manifest == nil || count[f.Manifest.Slug] < 2 || f.Plugin == "" {
			continue
		}
		if ns := Namespaced(f.Plugin, f.Manifest.Slug); ns != "" {
			f.Want = ns
		}
	}
}

// Namespaced returns the slug <plugin>-<slug>, the plugin's part cut so
// that the skill's own slug stays whole within MaxSlugLen (cutting the end
// instead gave every skill of a plugin with a long name the same slug), or
// "" when the plugin leaves nothing to put in front of it.
func Namespaced(plugin, slug string) string {
	p := manifest.Slugify(plugin)
	if room := manifest.MaxSlugLen - len(slug) - 1; len(p) > room {
		p = strings.TrimRight(p[:max(room, 0)], "-")
	}
	if p == "" {
		return ""
	}
	return p + "-" + slug
}

// Slug is the slug the skill would get (Want), or its folder's name when
// its SKILL.md could not be read.
func (f Found) Slug() string {
	if f.Manifest != nil {
		return f.Want
	}
	return f.Name
}

// Pick selects skills by folder name, slug, display name or path in the
// source; a name with glob characters (*, ?, [) picks every skill it
// matches (path.Match), and must match at least one.
func Pick(fs []Found, names []string) ([]Found, error) {
	var out []Found
	var missing []string
	for _, n := range names {
		hit := false
		for _, f := range fs {
			if !f.Matches(n) {
				continue
			}
			if !slices.ContainsFunc(out, func(o Found) bool { return o.Dir == f.Dir }) {
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
			slugs[i] = f.Slug()
		}
		return fs, fmt.Errorf("no skill named %s (available: %s): %w",
			strings.Join(missing, ", "), strings.Join(slugs, ", "), skills.ErrNotFound)
	}
	return out, nil
}

// Ignore leaves out the skills any of the globs matches.
func Ignore(fs []Found, globs []string) []Found {
	if len(globs) == 0 {
		return fs
	}
	var out []Found
	for _, f := range fs {
		if !slices.ContainsFunc(globs, f.Matches) {
			out = append(out, f)
		}
	}
	return out
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// Matches reports whether a name or glob names the skill: its folder, the
// slug it would get, its own slug, its name or its path in the source. A
// glob matches the plugin-qualified names of a plugin's skill (plugin:name,
// and the plugin-namespaced slug it would get) only when it holds a ':'
// itself, so that `doc*` picks docx and not every skill of the plugin
// document-skills; `document-skills:*` picks those. A plain name matches
// any of them.
func (f Found) Matches(pattern string) bool {
	vals := []string{f.Name, f.Rel}
	qualified := []string{}
	if f.Manifest != nil {
		vals = append(vals, f.Manifest.Slug, f.Manifest.Name)
		if f.Plugin != "" {
			qualified = append(qualified, skills.DisplayName(f.Plugin, f.Manifest.Name))
		}
	}
	if f.Manifest != nil && f.Plugin != "" && f.Want != f.Manifest.Slug {
		qualified = append(qualified, f.Want) // the plugin-namespaced slug
	} else {
		vals = append(vals, f.Want)
	}
	if !isGlob(pattern) {
		return pattern != "" && (slices.Contains(vals, pattern) || slices.Contains(qualified, pattern))
	}
	if strings.Contains(pattern, ":") {
		vals = append(vals, qualified...)
	}
	for _, v := range vals {
		if ok, err := path.Match(pattern, v); v != "" && err == nil && ok {
			return true
		}
	}
	return false
}

// DependencyOrder sorts the skills of one source so that a skill comes
// after the skills of the same source it depends on (dependency validation
// needs them installed first); otherwise the discovery order is kept.
func DependencyOrder(fs []Found) []Found {
	bySlug := map[string]int{}
	for i, f := range fs {
		if f.Manifest == nil {
			continue
		}
		for _, s := range []string{f.Want, f.Manifest.Slug} {
			if _, dup := bySlug[s]; !dup {
				bySlug[s] = i
			}
		}
	}
	out := make([]Found, 0, len(fs))
	state := make([]int, len(fs)) // 0 new, 1 visiting, 2 done
	var visit func(i int)
	visit = func(i int) {
		if state[i] != 0 {
			return // done, or a cycle: validation will name it
		}
		state[i] = 1
		if fs[i].Manifest != nil {
			for _, d := range fs[i].Manifest.SkillDependencies {
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

// AgentCandidates turns the skills found in the agents' folders into
// candidates, each its own root.
func AgentCandidates(list []FoundSkill) []Candidate {
	cands := make([]Candidate, len(list))
	for i, f := range list {
		cands[i] = Candidate{Name: filepath.Base(f.Dir), Rel: f.RealDir, Dir: f.RealDir}
	}
	return cands
}

// InFolder reports whether the slash path rel is the folder dir or lies
// below it.
func InFolder(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}
