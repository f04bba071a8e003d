package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"skillfs/skills"
	"skillfs/skills/git"
)

// Plugin manifests, as Claude Code reads them (its marketplace and plugin
// references) and as public skill repositories write them:
//
//   - .claude-plugin/marketplace.json at the root lists plugins:
//     {"metadata": {"pluginRoot": "./plugins"}, "plugins": [{"name": "x",
//     "source": "./plugins/x", "skills": ["./skills/"]}]}. A string source is
//     a folder of the repository, relative to the root ("./" may be left
//     out; a bare name is looked up under metadata.pluginRoot); an object
//     source ({"source": "github", "repo": ...}, "url", "git-subdir", "npm",
//     ...) names another repository or package and is skipped with a
//     warning. GitHub Copilot reads the same format from
//     .github/plugin/marketplace.json.
//   - <plugin>/.claude-plugin/plugin.json gives the plugin's "name" and may
//     declare "skills" too.
//   - "skills", in either, is a path or a list of paths relative to the
//     plugin folder: each a folder of skills (<name>/SKILL.md) or a skill
//     folder itself (anthropics/skills lists "./skills/xlsx"). Declared
//     paths replace the default, <plugin>/skills.
//
// Reading is lenient: a malformed file or entry is a warning, never a failed
// import, and the layout search still runs.

// Bounds on what the manifests may make discovery read.
const (
	// maxPluginManifest bounds a marketplace.json or plugin.json read.
	maxPluginManifest = 1 << 20
	// maxPlugins bounds the plugins one marketplace file may declare.
	maxPlugins = 1000
	// maxDeclaredPaths bounds the skills paths one plugin may declare.
	maxDeclaredPaths = 1000
	// maxPluginName bounds a plugin name taken from a manifest.
	maxPluginName = 255
)

// marketplaceFiles are where marketplaces are read, in this order: a plugin
// named in both keeps the first file's name for its skills.
var marketplaceFiles = []string{".claude-plugin/marketplace.json", ".github/plugin/marketplace.json"}

// pluginManifestFile is a plugin's own manifest, relative to its folder.
const pluginManifestFile = ".claude-plugin/plugin.json"

// pluginDecl is one plugin a marketplace declares.
type pluginDecl struct {
	name string // as declared; "" when the entry has none usable
	// sources are where the plugin's folder may be, as clean slash paths
	// below the root ("." for the root), in the order to try them.
	sources []string
	// skills are the skills paths declared by the entry, relative to the
	// plugin folder as written (cleaned by declaredPath when resolved).
	skills []string
}

// parseMarketplace reads a marketplace.json: the plugins whose source is a
// folder of this repository. display names the file in warnings. A problem
// with one entry is a warning and the entry is skipped; an error means the
// file is no marketplace at all.
func parseMarketplace(data []byte, display string) ([]pluginDecl, []string, error) {
	var file struct {
		Metadata json.RawMessage `json:"metadata"`
		Plugins  json.RawMessage `json:"plugins"`
	}
	if err := decodeJSONObject(data, &file); err != nil {
		return nil, nil, err
	}
	var warns []string
	warn := func(format string, args ...any) {
		warns = append(warns, display+": "+fmt.Sprintf(format, args...))
	}
	pluginRoot := ""
	if len(file.Metadata) > 0 && !isJSONNull(file.Metadata) {
		var meta struct {
			PluginRoot json.RawMessage `json:"pluginRoot"`
		}
		if err := decodeJSONObject(file.Metadata, &meta); err != nil {
			warn("metadata: %v: ignored", err)
		} else if len(meta.PluginRoot) > 0 && !isJSONNull(meta.PluginRoot) {
			s, ok := jsonString(meta.PluginRoot)
			if p, err := declaredPath(".", s); !ok || err != nil {
				warn("metadata.pluginRoot %s is not a folder of this repository: ignored", describeJSON(meta.PluginRoot))
			} else {
				pluginRoot = p
			}
		}
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(file.Plugins, &entries); err != nil || entries == nil {
		return nil, warns, fmt.Errorf("no list of plugins")
	}
	if len(entries) > maxPlugins {
		warn("lists %d plugins: only the first %d are read", len(entries), maxPlugins)
		entries = entries[:maxPlugins]
	}
	var out []pluginDecl
	for i, raw := range entries {
		d, problem := parsePluginEntry(raw, pluginRoot)
		if problem != "" {
			who := "plugin " + strconv.Itoa(i+1)
			if d.name != "" {
				who = "plugin " + strconv.Quote(d.name)
			}
			warn("%s: %s", who, problem)
		}
		if len(d.sources) > 0 {
			out = append(out, d)
		}
	}
	return out, warns, nil
}

// parsePluginEntry reads one plugins[] entry of a marketplace. It returns
// the plugin (no sources when it cannot be used) and a problem to report, or
// "".
func parsePluginEntry(raw json.RawMessage, pluginRoot string) (pluginDecl, string) {
	var e struct {
		Name   json.RawMessage `json:"name"`
		Source json.RawMessage `json:"source"`
		Skills json.RawMessage `json:"skills"`
	}
	if err := decodeJSONObject(raw, &e); err != nil {
		return pluginDecl{}, fmt.Sprintf("%v: skipped", err)
	}
	var d pluginDecl
	var problems []string
	if len(e.Name) > 0 {
		name, ok := pluginName(e.Name)
		if !ok {
			problems = append(problems, fmt.Sprintf("name %s is not a usable name", describeJSON(e.Name)))
		}
		d.name = name
	}
	skills, bad := jsonStrings(e.Skills)
	if bad != "" {
		problems = append(problems, "skills "+bad)
	}
	d.skills = skills
	src, ok := jsonString(e.Source)
	switch {
	case len(e.Source) == 0 || isJSONNull(e.Source):
		problems = append(problems, "no source: skipped")
	case !ok:
		problems = append(problems, remoteSourceProblem(e.Source))
	case isRemoteRef(src):
		problems = append(problems, fmt.Sprintf("source %q is another repository, not a folder of this one: skipped", src))
	default:
		d.sources = pluginSources(src, pluginRoot)
		if d.sources == nil {
			problems = append(problems, fmt.Sprintf("source %q is not a folder of this repository: skipped", src))
		}
	}
	return d, strings.Join(problems, "; ")
}

// pluginSources returns where a string source may be, in the order to try:
// a bare name under pluginRoot (Claude Code's rule), else the path from the
// root; a path that does not exist is also tried under pluginRoot, as some
// marketplaces were written when Claude Code prefixed every source with it.
func pluginSources(src, pluginRoot string) []string {
	fromRoot, err := declaredPath(".", src)
	if err != nil {
		return nil
	}
	if pluginRoot == "" || pluginRoot == "." {
		return []string{fromRoot}
	}
	underRoot, err := declaredPath(pluginRoot, src)
	if err != nil || underRoot == fromRoot {
		return []string{fromRoot}
	}
	trimmed := strings.TrimSpace(src)
	if !strings.Contains(trimmed, "/") {
		return []string{underRoot, fromRoot}
	}
	return []string{fromRoot, underRoot}
}

// remoteSourceProblem describes an object source, which names another
// repository or a package.
func remoteSourceProblem(raw json.RawMessage) string {
	var o struct {
		Source  json.RawMessage `json:"source"`
		Repo    json.RawMessage `json:"repo"`
		URL     json.RawMessage `json:"url"`
		Package json.RawMessage `json:"package"`
	}
	if err := decodeJSONObject(raw, &o); err != nil {
		return fmt.Sprintf("source %s is neither a folder nor a source object: skipped", describeJSON(raw))
	}
	kind, _ := jsonString(o.Source)
	where := ""
	for _, r := range []json.RawMessage{o.Repo, o.URL, o.Package} {
		if s, ok := jsonString(r); ok && s != "" {
			where = " " + strconv.Quote(truncate(s, 200))
			break
		}
	}
	if kind == "" {
		kind = "an object"
	} else {
		kind = strconv.Quote(truncate(kind, 40))
	}
	return fmt.Sprintf("source is %s%s, outside this repository: skipped", kind, where)
}

// parsePluginManifest reads a plugin.json: the plugin's name ("" when it
// has none usable) and the skills paths it declares. display names the file
// in warnings.
func parsePluginManifest(data []byte, display string) (name string, skills []string, warns []string, err error) {
	var m struct {
		Name   json.RawMessage `json:"name"`
		Skills json.RawMessage `json:"skills"`
	}
	if err := decodeJSONObject(data, &m); err != nil {
		return "", nil, nil, err
	}
	if len(m.Name) > 0 {
		var ok bool
		if name, ok = pluginName(m.Name); !ok {
			warns = append(warns, fmt.Sprintf("%s: name %s is not a usable name", display, describeJSON(m.Name)))
		}
	}
	skills, bad := jsonStrings(m.Skills)
	if bad != "" {
		warns = append(warns, display+": skills "+bad)
	}
	return name, skills, warns, nil
}

// declaredPath resolves a path a manifest declares relative to base (a
// clean slash path below the root, "." for the root) to a clean slash path
// below the root. Claude Code wants "./" in front; it is optional here, and a
// leading ${CLAUDE_PLUGIN_ROOT} means base too. Absolute paths, ".."
// components, backslashes and anything else CleanRelPath refuses are
// ErrUnsafePath: a declared path never leaves the root by its name (links
// are checked when it is resolved on disk).
func declaredPath(base, p string) (string, error) {
	p = strings.TrimSpace(p)
	if rest, ok := strings.CutPrefix(p, "${CLAUDE_PLUGIN_ROOT}"); ok {
		if rest != "" && rest[0] != '/' {
			return "", fmt.Errorf("path %q: %w", p, skills.ErrUnsafePath)
		}
		p = "." + rest
	}
	for {
		if rest, ok := strings.CutPrefix(p, "./"); ok {
			p = strings.TrimLeft(rest, "/")
			continue
		}
		break
	}
	if p == "" || p == "." {
		return base, nil
	}
	clean, err := skills.CleanRelPath(p)
	if err != nil {
		return "", err
	}
	if base == "." {
		return clean, nil
	}
	return skills.CleanRelPath(base + "/" + clean)
}

// isRemoteRef reports whether a string source names something outside the
// repository: a URL or an scp-like git address.
func isRemoteRef(s string) bool {
	s = strings.TrimSpace(s)
	return strings.Contains(s, "://") || git.IsSCPLike(s)
}

// pluginName returns a name from a manifest, trimmed, when it is a string
// that can name a plugin: valid UTF-8, no control characters, not empty, at
// most maxPluginName bytes.
func pluginName(raw json.RawMessage) (string, bool) {
	s, ok := jsonString(raw)
	s = strings.TrimSpace(s)
	if !ok || s == "" || len(s) > maxPluginName || !utf8.ValidString(s) {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return "", false
		}
	}
	return s, true
}

// decodeJSONObject decodes data, which must be a JSON object, into v.
func decodeJSONObject(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	return nil
}

// jsonString returns raw as a string when it is one.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonStrings reads a field that holds a string or a list of them (nil when
// absent or null). Entries that are not strings are dropped; bad says what
// was wrong, or is "".
func jsonStrings(raw json.RawMessage) (out []string, bad string) {
	if len(raw) == 0 || isJSONNull(raw) {
		return nil, ""
	}
	if s, ok := jsonString(raw); ok {
		return []string{s}, ""
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Sprintf("%s is neither a path nor a list of paths: ignored", describeJSON(raw))
	}
	notPaths := 0
	for _, r := range list {
		s, ok := jsonString(r)
		switch {
		case !ok:
			notPaths++
		case len(out) < maxDeclaredPaths:
			out = append(out, s)
		}
	}
	var problems []string
	if notPaths > 0 {
		problems = append(problems, fmt.Sprintf("%d entries that are not paths ignored", notPaths))
	}
	if n := len(list) - notPaths; n > maxDeclaredPaths {
		problems = append(problems, fmt.Sprintf("%d paths, only the first %d read", n, maxDeclaredPaths))
	}
	if problems != nil {
		bad = "list: " + strings.Join(problems, ", ")
	}
	if out == nil {
		out = []string{}
	}
	return out, bad
}

// isJSONNull reports whether raw is the JSON null.
func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// describeJSON shows a JSON value in a warning: compact, shortened.
func describeJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return strconv.Quote(truncate(string(raw), 80))
	}
	return truncate(b.String(), 80)
}

// truncate shortens s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// pluginFolder is a plugin found in a source tree and the folders its
// skills are in.
type pluginFolder struct {
	name    string   // the plugin's name; "" only for a root plugin.json without one
	dir     string   // the plugin folder, a real slash path below the root
	skills  []string // folders of skills (or skill folders), clean slash paths below the root
	declare bool     // skills were declared, so a missing one is worth a warning
}

// findPlugins reads the marketplaces and plugin manifests below the real
// root and returns the plugins, in a fixed order: those of the marketplace
// files, in file order; the root itself when it holds a plugin.json no
// marketplace entry names; then the folders of plugins/ and
// .github/plugins/, by name, that no marketplace entry named.
func (d *discovery) findPlugins() []pluginFolder {
	var out []pluginFolder
	seen := map[string]bool{} // plugin folders already listed
	for _, mf := range marketplaceFiles {
		data, ok := d.readManifestFile(mf)
		if !ok {
			continue
		}
		decls, warns, err := parseMarketplace(data, mf)
		d.warn(warns...)
		if err != nil {
			d.warn(fmt.Sprintf("%s: %v: its plugins are not read; the usual places are still searched", mf, err))
			continue
		}
		for _, decl := range decls {
			if p, ok := d.pluginAt(decl, mf); ok {
				out = append(out, p)
				seen[p.dir] = true
			}
		}
	}
	if !seen["."] && d.isFile(pluginManifestFile) {
		// A plugin.json at the root no marketplace entry names makes the
		// whole repository one plugin.
		if p, ok := d.pluginAt(pluginDecl{sources: []string{"."}}, ""); ok {
			out = append(out, p)
			seen["."] = true
		}
	}
	for _, parent := range []string{"plugins", ".github/plugins"} {
		real, fi, err := resolveInRoot(d.root, parent)
		if err != nil || !fi.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(d.root, filepath.FromSlash(real)))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") || !(e.IsDir() || e.Type()&os.ModeSymlink != 0) {
				continue
			}
			p, ok := d.pluginAt(pluginDecl{sources: []string{path.Join(real, e.Name())}}, "")
			if !ok || seen[p.dir] {
				continue
			}
			out = append(out, p)
			seen[p.dir] = true
		}
	}
	return out
}

// pluginAt resolves a declared plugin on disk: the first of its sources that
// is a folder inside the root, its plugin.json when it has one, and the
// folders its skills are in. from names the marketplace that declared it
// ("" for a plugin found by layout). A plugin that cannot be found is a
// warning when a marketplace declared it.
func (d *discovery) pluginAt(decl pluginDecl, from string) (pluginFolder, bool) {
	var dir string
	var firstErr error
	for _, src := range decl.sources {
		real, fi, err := resolveInRoot(d.root, src)
		if err == nil && !fi.IsDir() {
			err = errors.New("not a folder")
		}
		if err == nil {
			dir = real
			break
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if dir == "" {
		if from != "" {
			d.warn(fmt.Sprintf("%s: plugin %s: source %q: %s: skipped", from, quoteOr(decl.name, "without a name"), decl.sources[0], describeResolveErr(firstErr)))
		} else if errors.Is(firstErr, errOutside) {
			d.warn(fmt.Sprintf("%s: %v: skipped", decl.sources[0], errOutside))
		}
		return pluginFolder{}, false
	}
	p := pluginFolder{name: decl.name, dir: dir}
	declared, hasDeclared := decl.skills, decl.skills != nil
	if pm := d.pluginManifest(dir); pm.found {
		if p.name == "" {
			p.name = pm.name
		}
		if pm.skills != nil {
			declared = append(declared[:len(declared):len(declared)], pm.skills...)
			hasDeclared = true
		}
	}
	if p.name == "" && decl.sources[0] != "." {
		// The folder's name as the marketplace or the layout gives it,
		// not where a link leads.
		p.name = path.Base(decl.sources[0])
	}
	if !hasDeclared {
		p.skills = []string{path.Join(dir, "skills")}
		return p, true
	}
	p.declare = true
	for _, s := range declared {
		rel, err := declaredPath(dir, s)
		if err != nil || isRemoteRef(s) {
			d.warn(fmt.Sprintf("plugin %s: skills path %q is not a folder of this repository: ignored", quoteOr(p.name, "at "+dir), truncate(s, 200)))
			continue
		}
		p.skills = append(p.skills, rel)
	}
	return p, true
}

// pluginManifest is what a plugin folder's .claude-plugin/plugin.json says.
type pluginManifest struct {
	found  bool // the file was read
	name   string
	skills []string
}

// pluginManifest reads the plugin.json of the plugin folder dir (a real
// slash path below the root) once, however many marketplace entries name
// the folder.
func (d *discovery) pluginManifest(dir string) pluginManifest {
	if pm, ok := d.manifests[dir]; ok {
		return pm
	}
	var pm pluginManifest
	mfile := path.Join(dir, pluginManifestFile)
	if data, ok := d.readManifestFile(mfile); ok {
		name, skills, warns, err := parsePluginManifest(data, mfile)
		d.warn(warns...)
		if err != nil {
			d.warn(fmt.Sprintf("%s: %v: ignored", mfile, err))
		}
		pm = pluginManifest{found: true, name: name, skills: skills}
	}
	d.manifests[dir] = pm
	return pm
}

// readManifestFile reads a plugin or marketplace manifest at rel below the
// root: through links that stay inside the root, a regular file of at most
// maxPluginManifest bytes. A missing file is not a problem; any other
// reason it cannot be read is a warning.
func (d *discovery) readManifestFile(rel string) ([]byte, bool) {
	real, fi, err := resolveInRoot(d.root, rel)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		d.warn(fmt.Sprintf("%s: %s: not read", rel, describeResolveErr(err)))
		return nil, false
	}
	if fi.IsDir() {
		d.warn(fmt.Sprintf("%s: a folder, not a file: not read", rel))
		return nil, false
	}
	data, err := skills.ReadRegular(filepath.Join(d.root, filepath.FromSlash(real)), rel, maxPluginManifest, false)
	if err != nil {
		d.warn(fmt.Sprintf("%s: %v: not read", rel, err))
		return nil, false
	}
	return data, true
}

// isFile reports whether rel names a regular file below the root, through
// links that stay inside it.
func (d *discovery) isFile(rel string) bool {
	_, fi, err := resolveInRoot(d.root, rel)
	return err == nil && fi.Mode().IsRegular()
}

// describeResolveErr says why a path could not be resolved, in words.
func describeResolveErr(err error) string {
	switch {
	case err == nil:
		return "not a folder"
	case errors.Is(err, errOutside), errors.Is(err, errLinkLoop):
		return err.Error()
	case errors.Is(err, os.ErrNotExist):
		return "not found"
	}
	return err.Error()
}

// quoteOr quotes s, or returns alt when s is empty.
func quoteOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return strconv.Quote(s)
}
