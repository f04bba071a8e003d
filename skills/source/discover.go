package source

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"skillfs/skills"
)

// DefaultDiscoverDepth is the depth Discover searches when given none: deep
// enough for plugins/<name>/skills/<skill>/ layouts with room to spare.
const DefaultDiscoverDepth = 6

// maxDiscoverDirs bounds the directories one recursive search may list. A
// variable so tests can reach it with small trees.
var maxDiscoverDirs = 100000

// maxDiscoverWarnings bounds the warnings one search returns; the rest are
// counted in a last one.
const maxDiscoverWarnings = 100

// Candidate is a skill root found inside a source tree.
type Candidate struct {
	Name string // folder name (for the root itself, the base name of the root)
	Rel  string // real slash path from the searched root, "." for the root itself
	Dir  string // real absolute path
	// Plugin is the plugin the skill belongs to, so that same-named skills
	// of different plugins can be told apart: the name a marketplace entry
	// or the plugin's .claude-plugin/plugin.json gives it, else the folder
	// name <p> of plugins/<p>/skills/<s> or .github/plugins/<p>/skills/<s>;
	// "" when the skill belongs to no plugin. It is a name as a manifest
	// wrote it (trimmed, valid UTF-8, no control characters), not a slug.
	Plugin string
}

// StandardSkillDirs returns the places, relative to a source root, where
// skill repositories keep their skills, one per subdirectory. Discover
// searches them all, whatever else it finds.
func StandardSkillDirs() []string { return slices.Clone(standardSkillDirs) }

var standardSkillDirs = []string{
	"skills",
	"skills/.curated",
	"skills/.experimental",
	"skills/.system",
	".agents/skills",
	".claude/skills",
	".github/skills",
}

// hiddenSearchable are hidden directory names the recursive search still
// enters, because skill and plugin layouts use them.
var hiddenSearchable = map[string]bool{
	".agents": true, ".claude": true, ".curated": true, ".experimental": true, ".system": true,
	".github": true, ".claude-plugin": true,
}

// Discover finds skill roots (directories holding SKILL.md or skill.md)
// inside root, everywhere an agent would load them from, and returns them
// with warnings about what it skipped. If root is one, it is the only
// candidate: everything below belongs to it. Otherwise the candidates are
// the union of
//
//   - the subdirectories of StandardSkillDirs();
//   - the plugins' skill folders: those of the plugins that
//     .claude-plugin/marketplace.json (or .github/plugin/marketplace.json)
//     lists with a folder of this tree as source, of a root
//     .claude-plugin/plugin.json, and of every folder of plugins/ and
//     .github/plugins/ — the "skills" paths the marketplace entry or the
//     plugin's .claude-plugin/plugin.json declares, else <plugin>/skills
//     (plugins.go describes the formats);
//   - a recursive search up to maxDepth levels below root
//     (DefaultDiscoverDepth when maxDepth <= 0) that skips .git,
//     node_modules, __MACOSX and hidden directories other than those of the
//     layouts above, and does not descend into a skill root; it lists at
//     most maxDiscoverDirs directories, and says so in a warning when it
//     stops.
//
// Each skill counts once, at its real path: symbolic links to directories
// are followed when their target lies inside root (a skill reached through
// a link is listed where the link leads), and never read beyond root — a
// link that leads outside is skipped with a warning. A skill folder inside
// another skill's folder is part of that skill, not a candidate. The
// candidates are sorted by Rel; each carries its plugin, if any.
//
// Manifests are read leniently: a malformed marketplace.json or
// plugin.json, an entry whose source is another repository or a declared
// path outside root is a warning, never an error, and the other places are
// searched all the same. No candidate is ErrNoManifest (with the warnings,
// which may say why). root itself may be a symbolic link.
func Discover(root string, maxDepth int) ([]Candidate, []string, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultDiscoverDepth
	}
	abs, err := realRoot(root)
	if err != nil {
		return nil, nil, fmt.Errorf("discover skills: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("discover skills: %w", err)
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("discover skills: not a directory: %w", skills.ErrInvalid)
	}
	if hasManifest(abs) {
		return []Candidate{{Name: filepath.Base(abs), Rel: ".", Dir: abs}}, nil, nil
	}
	d := &discovery{root: abs, maxDepth: maxDepth, found: map[string]*Candidate{}, warned: map[string]bool{},
		asked: map[string]bool{}, scanned: map[string][]string{}, manifests: map[string]pluginManifest{}}
	pluginNames := map[string]string{} // plugin folder → name, for the path rule
	for _, p := range d.findPlugins() {
		if _, ok := pluginNames[p.dir]; !ok && p.name != "" {
			pluginNames[p.dir] = p.name
		}
		for _, dir := range p.skills {
			d.scanFolder(dir, p.name, p.declare)
		}
	}
	for _, place := range standardSkillDirs {
		d.scanFolder(place, "", false)
	}
	d.walk()
	out := d.candidates(pluginNames)
	warns := d.warnings()
	if len(out) == 0 {
		return nil, warns, fmt.Errorf("discover skills: %w", skills.ErrNoManifest)
	}
	return out, warns, nil
}

// discovery is the state of one Discover call.
type discovery struct {
	root     string // real absolute path
	maxDepth int
	found    map[string]*Candidate // by Rel
	warns    []string
	warned   map[string]bool
	dropped  int // warnings past maxDiscoverWarnings
	// Manifests may name one folder any number of times (a 1 MiB
	// marketplace.json holds hundreds of thousands of "."): asked holds the
	// scanFolder calls made, scanned the skills of each folder of skills
	// listed, by real path, and manifests the plugin.json of each plugin
	// folder read, so that each is done once.
	asked     map[string]bool
	scanned   map[string][]string
	manifests map[string]pluginManifest
}

// warn records warnings, each once.
func (d *discovery) warn(msgs ...string) {
	for _, m := range msgs {
		if d.warned[m] {
			continue
		}
		d.warned[m] = true
		if len(d.warns) >= maxDiscoverWarnings {
			d.dropped++
			continue
		}
		d.warns = append(d.warns, m)
	}
}

// warnings returns the warnings recorded, with a count of those left out.
func (d *discovery) warnings() []string {
	if d.dropped > 0 {
		return append(d.warns, fmt.Sprintf("and %d more warnings", d.dropped))
	}
	return d.warns
}

// add records the skill at the real slash path rel. The first plugin given
// for a skill is kept: plugin manifests are scanned before the layouts.
func (d *discovery) add(rel, plugin string) {
	if c, ok := d.found[rel]; ok {
		if c.Plugin == "" {
			c.Plugin = plugin
		}
		return
	}
	d.found[rel] = &Candidate{Name: path.Base(rel), Rel: rel, Dir: d.abs(rel), Plugin: plugin}
}

// abs returns the absolute path of a slash path below the root.
func (d *discovery) abs(rel string) string { return filepath.Join(d.root, filepath.FromSlash(rel)) }

// resolve resolves rel below the root (see resolveInRoot), warning when a
// link leads outside it or cannot be resolved; a missing path is no warning.
func (d *discovery) resolve(rel string) (string, os.FileInfo, bool) {
	real, fi, err := resolveInRoot(d.root, rel)
	switch {
	case err == nil:
		return real, fi, true
	case errors.Is(err, os.ErrNotExist):
	default:
		d.warn(fmt.Sprintf("%s: %s: skipped", rel, describeResolveErr(err)))
	}
	return "", nil, false
}

// scanFolder adds the skills of a folder of skills: the folder itself when
// it is a skill root, else each subdirectory that is one (hidden ones
// aside). plugin is the plugin they belong to; declared says a manifest
// named the folder, so its absence is worth a warning.
func (d *discovery) scanFolder(rel, plugin string, declared bool) {
	call := fmt.Sprintf("%s\x00%s\x00%t", plugin, rel, declared)
	if d.asked[call] {
		return
	}
	d.asked[call] = true
	real, fi, err := resolveInRoot(d.root, rel)
	if err != nil || !fi.IsDir() {
		switch {
		case declared:
			d.warn(fmt.Sprintf("plugin %s: skills folder %q: %s", quoteOr(plugin, "without a name"), rel, describeResolveErr(err)))
		case err != nil && !errors.Is(err, os.ErrNotExist):
			d.warn(fmt.Sprintf("%s: %s: skipped", rel, describeResolveErr(err)))
		}
		return
	}
	added := plugin + "\x00" + real // no \x00 in paths: never a call's key
	if d.asked[added] {
		return // the same folder by another way, for this plugin: done
	}
	d.asked[added] = true
	skills, ok := d.scanned[real]
	if !ok {
		skills = d.listFolder(rel, real)
		d.scanned[real] = skills
	}
	for _, s := range skills {
		d.add(s, plugin)
	}
}

// listFolder returns the skills of the folder of skills at the real path
// real (rel as declared, for warnings): the folder itself when it is a
// skill root, else each subdirectory that is one (hidden ones aside).
func (d *discovery) listFolder(rel, real string) []string {
	if hasManifest(d.abs(real)) {
		return []string{real}
	}
	ents, err := os.ReadDir(d.abs(real))
	if err != nil {
		d.warn(fmt.Sprintf("%s: %v", rel, err))
		return nil
	}
	skills := []string{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if child, ok := d.dirEntry(real, e); ok && hasManifest(d.abs(child)) {
			skills = append(skills, child)
		}
	}
	return skills
}

// dirEntry returns the real slash path of the directory an entry of the
// real directory dir names, following a symbolic link that stays inside the
// root; ok is false for anything else.
func (d *discovery) dirEntry(dir string, e os.DirEntry) (string, bool) {
	rel := path.Join(dir, e.Name())
	if e.Type()&os.ModeSymlink == 0 {
		return rel, e.IsDir()
	}
	real, fi, ok := d.resolve(rel)
	return real, ok && fi.IsDir()
}

// walk is the bounded recursive search: breadth first, so that a directory
// reached by several paths (through links) is listed once, at its
// shallowest depth.
func (d *discovery) walk() {
	type dir struct {
		rel   string
		depth int // of its entries
	}
	queue := []dir{{".", 1}}
	seen := map[string]bool{".": true}
	listed := 0
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if listed >= maxDiscoverDirs {
			d.warn(fmt.Sprintf("the search stopped after listing %d directories: skills further down are not listed", maxDiscoverDirs))
			return
		}
		listed++
		ents, err := os.ReadDir(d.abs(cur.rel))
		if err != nil {
			continue // an unreadable corner of a tree hides nothing we could import
		}
		for _, e := range ents {
			name := e.Name()
			if name == ".git" || name == "node_modules" || name == "__MACOSX" ||
				strings.HasPrefix(name, ".") && !hiddenSearchable[name] {
				continue
			}
			child, ok := d.dirEntry(cur.rel, e)
			if !ok || seen[child] {
				continue
			}
			seen[child] = true
			if hasManifest(d.abs(child)) {
				d.add(child, "")
				continue
			}
			if cur.depth < d.maxDepth {
				queue = append(queue, dir{child, cur.depth + 1})
			}
		}
	}
}

// candidates returns what was found, sorted by Rel, without the skills that
// lie inside another skill's folder, and with the plugin of the path rule
// for skills no manifest placed.
func (d *discovery) candidates(pluginNames map[string]string) []Candidate {
	out := make([]Candidate, 0, len(d.found))
	for _, c := range d.found {
		if d.insideSkill(c.Rel) {
			continue
		}
		if c.Plugin == "" {
			c.Plugin = pluginByPath(c.Rel, pluginNames)
		}
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	return out
}

// insideSkill reports whether a folder above rel (below the root, which is
// no skill here) is a skill root. The folders above a real path are real
// directories.
func (d *discovery) insideSkill(rel string) bool {
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		if hasManifest(d.abs(dir)) {
			return true
		}
	}
	return false
}

// pluginByPath returns the plugin of a skill at plugins/<p>/skills/<s> or
// .github/plugins/<p>/skills/<s>: the name the plugin folder's manifest
// gives, else <p>.
func pluginByPath(rel string, names map[string]string) string {
	parts := strings.Split(rel, "/")
	if len(parts) == 5 && parts[0] == ".github" {
		parts = parts[1:]
	}
	if len(parts) != 4 || parts[0] != "plugins" || parts[2] != "skills" {
		return ""
	}
	dir := strings.TrimSuffix(rel, "/skills/"+parts[3])
	if n, ok := names[dir]; ok {
		return n
	}
	return parts[1]
}

// hasManifest reports whether dir holds SKILL.md or skill.md. Anything by
// that name counts, even a symlink: staging then rejects it by name, which
// says more than silently finding no skill.
func hasManifest(dir string) bool {
	for _, n := range manifestNames {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}
