package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// discoverCase is a tree to search and what Discover must find in it.
type discoverCase struct {
	name     string
	tree     fstest.MapFS
	links    [][2]string // target, link (relative to root); "$ROOT" and "$OUT" in a target are the root and a folder beside it
	maxDepth int
	want     []string // "Rel" or "Rel@plugin" of each candidate, in order
	wantWarn []string // each must be part of some warning; nil: no warning at all
	wantErr  error
}

func TestDiscover(t *testing.T) {
	cases := []discoverCase{
		{
			name: "root skill wins over everything",
			tree: fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest), "other/b/SKILL.md": skilltest.File(skilltest.DemoManifest), "plugins/p/skills/c/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{"."},
		},
		{
			name: "root lowercase manifest",
			tree: fstest.MapFS{"skill.md": skilltest.File(skilltest.DemoManifest), "skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{"."},
		},
		{
			name: "skills dir sorted by name",
			tree: fstest.MapFS{"skills/zeta/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/alpha/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/beta/skill.md": skilltest.File("x"), "skills/no-manifest/README.md": skilltest.File(""), "skills/file.md": skilltest.File("")},
			want: []string{"skills/alpha", "skills/beta", "skills/zeta"},
		},
		{name: "curated", tree: fstest.MapFS{"skills/.curated/b/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/.curated/a/SKILL.md": skilltest.File(skilltest.DemoManifest)}, want: []string{"skills/.curated/a", "skills/.curated/b"}},
		{name: "experimental", tree: fstest.MapFS{"skills/.experimental/x/SKILL.md": skilltest.File(skilltest.DemoManifest)}, want: []string{"skills/.experimental/x"}},
		{name: "system", tree: fstest.MapFS{"skills/.system/x/SKILL.md": skilltest.File(skilltest.DemoManifest)}, want: []string{"skills/.system/x"}},
		{name: "agents", tree: fstest.MapFS{".agents/skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)}, want: []string{".agents/skills/x"}},
		{name: "claude", tree: fstest.MapFS{".claude/skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)}, want: []string{".claude/skills/x"}},
		{name: "github", tree: fstest.MapFS{".github/skills/b/SKILL.md": skilltest.File(skilltest.DemoManifest), ".github/skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest)}, want: []string{".github/skills/a", ".github/skills/b"}},
		{
			name: "github plugins",
			tree: fstest.MapFS{".github/plugins/p/skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest), ".github/plugins/q/skills/y/SKILL.md": skilltest.File(skilltest.DemoManifest), ".github/plugins/README.md": skilltest.File("")},
			want: []string{".github/plugins/p/skills/x@p", ".github/plugins/q/skills/y@q"},
		},
		{
			name: "github skills beyond the search depth",
			tree: fstest.MapFS{".github/skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest), ".github/plugins/p/skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			// The recursive search sees one level only: the places are
			// searched whatever the depth.
			maxDepth: 1,
			want:     []string{".github/plugins/p/skills/x@p", ".github/skills/a"},
		},
		{
			name: "every place, the search and the plugins, sorted by Rel",
			tree: fstest.MapFS{
				".claude/skills/c/SKILL.md":       skilltest.File(skilltest.DemoManifest),
				".agents/skills/g/SKILL.md":       skilltest.File(skilltest.DemoManifest),
				"skills/.system/s/SKILL.md":       skilltest.File(skilltest.DemoManifest),
				"skills/.experimental/e/SKILL.md": skilltest.File(skilltest.DemoManifest),
				"skills/.curated/k/SKILL.md":      skilltest.File(skilltest.DemoManifest),
				"skills/b/SKILL.md":               skilltest.File(skilltest.DemoManifest),
				"skills/a/SKILL.md":               skilltest.File(skilltest.DemoManifest),
				"skills/.hidden/h/SKILL.md":       skilltest.File(skilltest.DemoManifest),
				"elsewhere/z/SKILL.md":            skilltest.File(skilltest.DemoManifest),
				"plugins/p/skills/x/SKILL.md":     skilltest.File(skilltest.DemoManifest),
			},
			want: []string{
				".agents/skills/g", ".claude/skills/c", "elsewhere/z", "plugins/p/skills/x@p",
				"skills/.curated/k", "skills/.experimental/e", "skills/.system/s", "skills/a", "skills/b",
			},
		},
		{
			name: "standard places do not hide other folders",
			tree: fstest.MapFS{"skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest), "b/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{"b", "skills/a"},
		},
		{
			name: "standard places do not hide plugins",
			tree: fstest.MapFS{".claude/skills/helper/SKILL.md": skilltest.File(skilltest.DemoManifest), "plugins/p/skills/setup/SKILL.md": skilltest.File(skilltest.DemoManifest), "plugins/q/skills/setup/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{".claude/skills/helper", "plugins/p/skills/setup@p", "plugins/q/skills/setup@q"},
		},
		{
			name: "recursive search",
			tree: fstest.MapFS{
				"b/SKILL.md":                             skilltest.File(skilltest.DemoManifest),
				"a/nested/SKILL.md":                      skilltest.File(skilltest.DemoManifest),
				"plugins/p/skills/x/SKILL.md":            skilltest.File(skilltest.DemoManifest),
				"plugins/p/.claude/skills/y/SKILL.md":    skilltest.File(skilltest.DemoManifest),
				"node_modules/pkg/SKILL.md":              skilltest.File(skilltest.DemoManifest),
				".git/hooks/SKILL.md":                    skilltest.File(skilltest.DemoManifest),
				".hidden/s/SKILL.md":                     skilltest.File(skilltest.DemoManifest),
				"__MACOSX/m/SKILL.md":                    skilltest.File(skilltest.DemoManifest),
				"top/inner/SKILL.md":                     skilltest.File(skilltest.DemoManifest),
				"top/SKILL.md":                           skilltest.File(skilltest.DemoManifest),
				"d1/d2/d3/d4/d5/d6/d7/too-deep/SKILL.md": skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"a/nested", "b", "plugins/p/.claude/skills/y", "plugins/p/skills/x@p", "top"},
		},
		{
			name:     "bounded depth",
			tree:     fstest.MapFS{"a/b/c/SKILL.md": skilltest.File(skilltest.DemoManifest), "x/y/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			maxDepth: 2,
			want:     []string{"x/y"},
		},
		{
			name: "skill inside another skill's folder is part of it",
			tree: fstest.MapFS{
				"skills/outer/SKILL.md":               skilltest.File(skilltest.DemoManifest),
				"skills/outer/inner/SKILL.md":         skilltest.File(skilltest.DemoManifest),
				"skills/outer/skills/deeper/SKILL.md": skilltest.File(skilltest.DemoManifest),
				".claude-plugin/marketplace.json":     skilltest.File(`{"plugins": [{"name": "n", "source": "./", "skills": ["./skills/outer/inner", "./skills/outer/skills"]}]}`),
			},
			want: []string{"skills/outer"},
		},
		{
			name: "a skills folder that is itself a skill",
			tree: fstest.MapFS{"skills/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{"skills"},
		},
		{
			name: "nothing",
			tree: fstest.MapFS{"README.md": skilltest.File("x"), "d1/d2/d3/deep/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			// Too deep for the search, and in no place.
			maxDepth: 3,
			wantErr:  skills.ErrNoManifest,
		},
	}
	runDiscoverCases(t, cases)
}

func TestDiscoverPlugins(t *testing.T) {
	cases := []discoverCase{
		{
			name: "marketplace with two plugins holding the same skill name, beside a helper skill",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"name": "market", "owner": {"name": "o"}, "plugins": [
					{"name": "alpha", "source": "./plugins/one", "description": "d"},
					{"name": "beta", "source": "./plugins/two"}]}`),
				"plugins/one/skills/setup/SKILL.md": skilltest.File(skilltest.DemoManifest),
				"plugins/two/skills/setup/SKILL.md": skilltest.File(skilltest.DemoManifest),
				".claude/skills/helper/SKILL.md":    skilltest.File(skilltest.DemoManifest),
			},
			want: []string{".claude/skills/helper", "plugins/one/skills/setup@alpha", "plugins/two/skills/setup@beta"},
		},
		{
			name: "plugin.json names the plugin when the marketplace entry does not",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json":        skilltest.File(`{"plugins": [{"source": "./plugins/one"}]}`),
				"plugins/one/.claude-plugin/plugin.json": skilltest.File(`{"name": "from-manifest"}`),
				"plugins/one/skills/a/SKILL.md":          skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"plugins/one/skills/a@from-manifest"},
		},
		{
			name: "marketplace name wins over plugin.json",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json":                         skilltest.File(`{"plugins": [{"name": "azure", "source": "./.github/plugins/azure-skills", "skills": ["./skills/"]}]}`),
				".github/plugins/azure-skills/.claude-plugin/plugin.json": skilltest.File(`{"name": "other", "skills": "./skills/"}`),
				".github/plugins/azure-skills/skills/deploy/SKILL.md":     skilltest.File(skilltest.DemoManifest),
			},
			want: []string{".github/plugins/azure-skills/skills/deploy@azure"},
		},
		{
			name: "plugin.json declares a custom skills folder",
			tree: fstest.MapFS{
				"plugins/p/.claude-plugin/plugin.json": skilltest.File(`{"name": "pp", "skills": ["./custom", "./more/x"]}`),
				"plugins/p/custom/a/SKILL.md":          skilltest.File(skilltest.DemoManifest),
				"plugins/p/more/x/SKILL.md":            skilltest.File(skilltest.DemoManifest),
				"plugins/p/skills/default/SKILL.md":    skilltest.File(skilltest.DemoManifest),
			},
			// Beyond the search: only the manifest finds them, and the
			// declared folders replace the default one.
			maxDepth: 1,
			want:     []string{"plugins/p/custom/a@pp", "plugins/p/more/x@pp"},
		},
		{
			name:     "an empty list of skills folders declares none",
			tree:     fstest.MapFS{"plugins/p/.claude-plugin/plugin.json": skilltest.File(`{"name": "pp", "skills": []}`), "plugins/p/skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			maxDepth: 1,
			want:     []string{"skills/x"},
		},
		{
			name: "pluginRoot beside sources that start with ./",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"metadata": {"pluginRoot": "./.github/plugins"}, "renames": {"azure-skills": "azure"}, "plugins": [
					{"name": "azure", "source": "./.github/plugins/azure-skills", "skills": ["./skills/"], "strict": true},
					{"name": "wiki", "source": "./.github/plugins/deep-wiki"}]}`),
				".github/plugins/azure-skills/.claude-plugin/plugin.json": skilltest.File(`{"name": "azure", "skills": "./skills/", "mcpServers": "./.mcp.json"}`),
				".github/plugins/azure-skills/skills/deploy/SKILL.md":     skilltest.File(skilltest.DemoManifest),
				".github/plugins/deep-wiki/skills/wiki/SKILL.md":          skilltest.File(skilltest.DemoManifest),
			},
			want: []string{".github/plugins/azure-skills/skills/deploy@azure", ".github/plugins/deep-wiki/skills/wiki@wiki"},
		},
		{
			name: "the path rule takes the plugin's name from its manifest",
			tree: fstest.MapFS{
				"plugins/p/.claude-plugin/plugin.json": skilltest.File(`{"name": "pp", "skills": "./custom"}`),
				"plugins/p/custom/a/SKILL.md":          skilltest.File(skilltest.DemoManifest),
				"plugins/p/skills/default/SKILL.md":    skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"plugins/p/custom/a@pp", "plugins/p/skills/default@pp"},
		},
		{
			name: "skills listed one by one from a root source",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"name": "anthropic-agent-skills", "plugins": [
					{"name": "document-skills", "source": "./", "strict": false, "skills": ["./skills/xlsx", "./skills/docx"]},
					{"name": "example-skills", "source": "./", "strict": false, "skills": ["./skills/art", "./skills/docx"]}]}`),
				"skills/xlsx/SKILL.md":  skilltest.File(skilltest.DemoManifest),
				"skills/docx/SKILL.md":  skilltest.File(skilltest.DemoManifest),
				"skills/art/SKILL.md":   skilltest.File(skilltest.DemoManifest),
				"skills/loose/SKILL.md": skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"skills/art@example-skills", "skills/docx@document-skills", "skills/loose", "skills/xlsx@document-skills"},
		},
		{
			name: "bare source under pluginRoot",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json":       skilltest.File(`{"metadata": {"pluginRoot": "./plugins"}, "plugins": [{"name": "formatter-plugin", "source": "formatter"}]}`),
				"plugins/formatter/skills/fmt/SKILL.md": skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"plugins/formatter/skills/fmt@formatter-plugin"},
		},
		{
			name: "source written relative to pluginRoot",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"metadata": {"pluginRoot": "./vendor"}, "plugins": [{"name": "legacy", "source": "./x", "skills": "skills/"}]}`),
				"vendor/x/skills/s/SKILL.md":      skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"vendor/x/skills/s@legacy"},
		},
		{
			name: "hidden skills folder declared",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [{"name": "h", "source": "./.hidden/plug", "skills": "${CLAUDE_PLUGIN_ROOT}/skills"}]}`),
				".hidden/plug/skills/s/SKILL.md":  skilltest.File(skilltest.DemoManifest),
			},
			want: []string{".hidden/plug/skills/s@h"},
		},
		{
			name: "copilot marketplace",
			tree: fstest.MapFS{
				".github/plugin/marketplace.json": skilltest.File(`{"plugins": [{"name": "cop", "source": "./tools/c", "skills": "skills/"}]}`),
				"tools/c/skills/s/SKILL.md":       skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"tools/c/skills/s@cop"},
		},
		{
			name: "root plugin.json makes the repository a plugin",
			tree: fstest.MapFS{".claude-plugin/plugin.json": skilltest.File(`{"name": "solo"}`), "skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest), ".claude/skills/b/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{".claude/skills/b", "skills/a@solo"},
		},
		{
			name: "malformed marketplace falls back to the layout search",
			tree: fstest.MapFS{".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [ {"name": "x", `), "plugins/p/skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{"plugins/p/skills/s@p", "skills/x"},
			wantWarn: []string{
				".claude-plugin/marketplace.json: not valid JSON",
				"the usual places are still searched",
			},
		},
		{
			name:     "marketplace that is no object",
			tree:     fstest.MapFS{".claude-plugin/marketplace.json": skilltest.File(`[1, 2]`), "skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want:     []string{"skills/x"},
			wantWarn: []string{".claude-plugin/marketplace.json: not a JSON object"},
		},
		{
			name:     "marketplace without plugins",
			tree:     fstest.MapFS{".claude-plugin/marketplace.json": skilltest.File(`{"plugins": {"a": 1}}`), "skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want:     []string{"skills/x"},
			wantWarn: []string{".claude-plugin/marketplace.json: no list of plugins"},
		},
		{
			name:     "malformed plugin.json",
			tree:     fstest.MapFS{"plugins/p/.claude-plugin/plugin.json": skilltest.File(`{"name": `), "plugins/p/skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want:     []string{"plugins/p/skills/s@p"},
			wantWarn: []string{"plugins/p/.claude-plugin/plugin.json: not valid JSON"},
		},
		{
			name: "sources in other repositories",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [
					{"name": "gh", "source": {"source": "github", "repo": "owner/repo"}},
					{"name": "url", "source": "https://example.com/r.git"},
					{"name": "scp", "source": "git@example.com:o/r.git"},
					{"name": "npm", "source": {"source": "npm", "package": "@acme/plugin"}},
					{"name": "odd", "source": 42},
					{"name": "none"},
					{"name": "local", "source": "./plugins/local"}]}`),
				"plugins/local/skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"plugins/local/skills/s@local"},
			wantWarn: []string{
				`plugin "gh": source is "github" "owner/repo", outside this repository: skipped`,
				`plugin "url": source "https://example.com/r.git" is another repository`,
				`plugin "scp": source "git@example.com:o/r.git" is another repository`,
				`plugin "npm": source is "npm" "@acme/plugin"`,
				`plugin "odd": source 42 is neither a folder nor a source object`,
				`plugin "none": no source: skipped`,
			},
		},
		{
			name: "declared paths outside the root",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"metadata": {"pluginRoot": "/etc"}, "plugins": [
					{"name": "up", "source": "../outside"},
					{"name": "abs", "source": "/etc"},
					{"name": "in", "source": "./plugins/in", "skills": ["../../../x", "/abs", "C:/win", "a\\b", "./ok"]}]}`),
				"plugins/in/ok/s/SKILL.md": skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"plugins/in/ok/s@in"},
			wantWarn: []string{
				`metadata.pluginRoot "/etc" is not a folder of this repository`,
				`plugin "up": source "../outside" is not a folder of this repository`,
				`plugin "abs": source "/etc" is not a folder of this repository`,
				`plugin "in": skills path "../../../x" is not a folder`,
				`skills path "/abs" is not a folder`,
				`skills path "C:/win" is not a folder`,
				`skills path "a\\b" is not a folder`,
			},
		},
		{
			name: "declared folders that are missing",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [{"name": "gone", "source": "./plugins/gone"}, {"name": "p", "source": "./plugins/p", "skills": ["./nope", "./file"]}]}`),
				"plugins/p/file":                  skilltest.File("x"),
				"skills/s/SKILL.md":               skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"skills/s"},
			wantWarn: []string{
				`.claude-plugin/marketplace.json: plugin "gone": source "plugins/gone": not found: skipped`,
				`plugin "p": skills folder "plugins/p/nope": not found`,
				`plugin "p": skills folder "plugins/p/file": not a folder`,
			},
		},
		{
			name: "bad names fall back to the folder",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [{"name": "bad\u0001name", "source": "./plugins/p"}, {"name": ["x"], "source": "./plugins/q"}]}`),
				"plugins/p/skills/s/SKILL.md":     skilltest.File(skilltest.DemoManifest),
				"plugins/q/skills/t/SKILL.md":     skilltest.File(skilltest.DemoManifest),
			},
			want:     []string{"plugins/p/skills/s@p", "plugins/q/skills/t@q"},
			wantWarn: []string{"is not a usable name"},
		},
		{
			name: "skills field of the wrong type",
			tree: fstest.MapFS{
				".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [{"name": "w", "source": "./plugins/w", "skills": {"a": 1}}, {"name": "v", "source": "./plugins/v", "skills": ["./s", 3]}]}`),
				"plugins/w/skills/s/SKILL.md":     skilltest.File(skilltest.DemoManifest),
				"plugins/v/s/t/SKILL.md":          skilltest.File(skilltest.DemoManifest),
			},
			want: []string{"plugins/v/s/t@v", "plugins/w/skills/s@w"},
			wantWarn: []string{
				`plugin "w": skills {"a":1} is neither a path nor a list of paths`,
				`plugin "v": skills list: 1 entries that are not paths ignored`,
			},
		},
		{
			name: "a manifest that is not a regular file",
			tree: fstest.MapFS{".claude-plugin/marketplace.json": skilltest.Dir(), "skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want: []string{"skills/s"},
			wantWarn: []string{
				".claude-plugin/marketplace.json: a folder, not a file",
			},
		},
		{
			name:     "a manifest that is too big",
			tree:     fstest.MapFS{".claude-plugin/marketplace.json": skilltest.File(`{"plugins": [], "pad": "` + strings.Repeat("x", maxPluginManifest) + `"}`), "skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			want:     []string{"skills/s"},
			wantWarn: []string{".claude-plugin/marketplace.json: ", "not read"},
		},
	}
	runDiscoverCases(t, cases)
}

func TestDiscoverSymlinks(t *testing.T) {
	cases := []discoverCase{
		{
			name:  "symlinked skill inside the root counts once, at its real path",
			tree:  fstest.MapFS{".store/one/SKILL.md": skilltest.File(skilltest.DemoManifest), "skills/two/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{{"../.store/one", "skills/linked"}, {"../../.store/one", ".claude/skills/again"}, {"$ROOT/.store/one", "skills/absolute"}},
			want:  []string{".store/one", "skills/two"},
		},
		{
			name:  "symlinked skills dir",
			tree:  fstest.MapFS{"elsewhere/one/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{{"elsewhere", "skills"}},
			want:  []string{"elsewhere/one"},
		},
		{
			name:  "symlinked directory in the search",
			tree:  fstest.MapFS{".vendor/deep/one/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{{".vendor", "alias"}},
			want:  []string{".vendor/deep/one"},
		},
		{
			name:  "symlinked plugin folder",
			tree:  fstest.MapFS{".cache/p/skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{{"../.cache/p", "plugins/linked"}},
			want:  []string{".cache/p/skills/s@linked"},
		},
		{
			name: "symlinks that lead outside are skipped",
			tree: fstest.MapFS{"skills/in/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{
				{"$OUT/evil", "skills/absolute"}, {"../../outside/evil", "skills/relative"},
				{"$OUT", "deep"}, {"../outside", "plugins"},
			},
			want: []string{"skills/in"},
			wantWarn: []string{
				"skills/absolute: a symbolic link leads outside the source: skipped",
				"skills/relative: a symbolic link leads outside the source: skipped",
				"deep: a symbolic link leads outside the source: skipped",
				"plugins: a symbolic link leads outside the source: skipped",
			},
		},
		{
			name: "a marketplace reached through a link outside is not read",
			tree: fstest.MapFS{"skills/in/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{
				{"$OUT/plugin", ".claude-plugin"},
			},
			want:     []string{"skills/in"},
			wantWarn: []string{".claude-plugin: a symbolic link leads outside the source: skipped", ".claude-plugin/marketplace.json: a symbolic link leads outside the source: not read"},
		},
		{
			name:  "link loops end",
			tree:  fstest.MapFS{"a/b/skill/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{{"..", "a/b/up"}, {"loop2", "loop1"}, {"loop1", "loop2"}},
			want:  []string{"a/b/skill"},
			wantWarn: []string{
				"loop1: too many levels of symbolic links: skipped",
			},
		},
		{
			name:  "broken links are no skills",
			tree:  fstest.MapFS{"skills/ok/SKILL.md": skilltest.File(skilltest.DemoManifest)},
			links: [][2]string{{"missing", "skills/broken"}},
			want:  []string{"skills/ok"},
		},
	}
	runDiscoverCases(t, cases)
}

// runDiscoverCases builds each case's tree in a fresh root, with a folder
// beside it ("outside") holding skills and a marketplace that must never be
// read, and checks what Discover returns.
func runDiscoverCases(t *testing.T, cases []discoverCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "repo")
			out := filepath.Join(base, "outside")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			skilltest.WriteDir(t, out, fstest.MapFS{
				"evil/SKILL.md":           skilltest.File(skilltest.DemoManifest),
				"plugin/marketplace.json": skilltest.File(`{"plugins": [{"name": "evil", "source": "./"}]}`),
			})
			skilltest.WriteDir(t, root, tc.tree)
			realRootDir, err := filepath.EvalSymlinks(root)
			if err != nil {
				t.Fatal(err)
			}
			links := fstest.MapFS{}
			for _, l := range tc.links {
				links[l[1]] = skilltest.Symlink(strings.NewReplacer("$ROOT", realRootDir, "$OUT", out).Replace(l[0]))
			}
			skilltest.WriteDir(t, root, links)
			got, warns, err := Discover(root, tc.maxDepth)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Discover error %v, want %v", err, tc.wantErr)
			}
			var rels []string
			for _, c := range got {
				s := c.Rel
				if c.Plugin != "" {
					s += "@" + c.Plugin
				}
				rels = append(rels, s)
				wantDir := filepath.Join(realRootDir, filepath.FromSlash(c.Rel))
				if c.Dir != wantDir || !filepath.IsAbs(c.Dir) {
					t.Errorf("%s: Dir %q, want %q", c.Rel, c.Dir, wantDir)
				}
				if c.Name != filepath.Base(wantDir) {
					t.Errorf("%s: Name %q", c.Rel, c.Name)
				}
			}
			if !slices.Equal(rels, tc.want) {
				t.Errorf("Discover = %q, want %q", rels, tc.want)
			}
			checkWarnings(t, warns, tc.wantWarn)
		})
	}
}

// checkWarnings checks that each wanted text is part of some warning, and
// that there are none when none is wanted.
func checkWarnings(t *testing.T, warns, want []string) {
	t.Helper()
	if want == nil && len(warns) > 0 {
		t.Errorf("unexpected warnings:\n%s", strings.Join(warns, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(warns, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no warning holds %q; warnings:\n%s", w, strings.Join(warns, "\n"))
		}
	}
}

func TestDiscoverSearchBounds(t *testing.T) {
	root := t.TempDir()
	tree := fstest.MapFS{"skills/a/SKILL.md": skilltest.File(skilltest.DemoManifest), "plugins/p/skills/b/SKILL.md": skilltest.File(skilltest.DemoManifest), "zz/deep/SKILL.md": skilltest.File(skilltest.DemoManifest)}
	for i := range 20 {
		tree[fmt.Sprintf("d%02d", i)] = skilltest.Dir()
	}
	skilltest.WriteDir(t, root, tree)

	old := maxDiscoverDirs
	t.Cleanup(func() { maxDiscoverDirs = old })
	maxDiscoverDirs = 10
	got, warns, err := Discover(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, c := range got {
		rels = append(rels, c.Rel)
	}
	// The search ran out before zz; the places are searched all the same.
	if want := []string{"plugins/p/skills/b", "skills/a"}; !slices.Equal(rels, want) {
		t.Errorf("Discover = %q, want %q", rels, want)
	}
	checkWarnings(t, warns, []string{"the search stopped after listing 10 directories"})

	maxDiscoverDirs = old
	got, warns, err = Discover(root, 0)
	if err != nil || len(got) != 3 || len(warns) != 0 {
		t.Errorf("Discover with the default bound = %+v, %q, %v", got, warns, err)
	}
}

func TestDiscoverWarningsBounded(t *testing.T) {
	root := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"plugins": [`)
	for i := range maxDiscoverWarnings + 30 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "p%d", "source": "https://example.com/%d.git"}`, i, i)
	}
	b.WriteString("]}")
	skilltest.WriteDir(t, root, fstest.MapFS{".claude-plugin/marketplace.json": skilltest.File(b.String()), "skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest)})
	_, warns, err := Discover(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != maxDiscoverWarnings+1 || warns[len(warns)-1] != "and 30 more warnings" {
		t.Errorf("%d warnings, last %q", len(warns), warns[len(warns)-1])
	}
}

func TestDiscoverTooManyPlugins(t *testing.T) {
	root := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"plugins": [`)
	for i := range maxPlugins + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "p%d", "source": "./x/p%d"}`, i, i)
	}
	b.WriteString("]}")
	skilltest.WriteDir(t, root, fstest.MapFS{
		".claude-plugin/marketplace.json":                  skilltest.File(b.String()),
		"x/p0/skills/s/SKILL.md":                           skilltest.File(skilltest.DemoManifest),
		fmt.Sprintf("x/p%d/skills/t/SKILL.md", maxPlugins): skilltest.File(skilltest.DemoManifest),
	})
	got, warns, err := Discover(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, c := range got {
		rels = append(rels, c.Rel+"@"+c.Plugin)
	}
	// The plugin past the bound is still found by the search, without
	// its name from the marketplace.
	want := []string{"x/p0/skills/s@p0", fmt.Sprintf("x/p%d/skills/t@", maxPlugins)}
	if !slices.Equal(rels, want) {
		t.Errorf("Discover = %q, want %q", rels, want)
	}
	checkWarnings(t, warns, []string{fmt.Sprintf("lists %d plugins: only the first %d are read", maxPlugins+1, maxPlugins)})
}

func TestDeclaredPath(t *testing.T) {
	tests := []struct {
		base, p, want string
		err           bool
	}{
		{".", "./skills", "skills", false},
		{".", "skills/", "skills", false},
		{".", ".//skills//x/", "skills/x", false},
		{".", "./", ".", false},
		{".", "", ".", false},
		{"plugins/p", ".", "plugins/p", false},
		{"plugins/p", "./skills/", "plugins/p/skills", false},
		{"plugins/p", "${CLAUDE_PLUGIN_ROOT}/skills", "plugins/p/skills", false},
		{"plugins/p", "${CLAUDE_PLUGIN_ROOT}", "plugins/p", false},
		{"plugins/p", "${CLAUDE_PLUGIN_ROOT}x", "", true},
		{"plugins/p", "../q", "", true},
		{"plugins/p", "./a/../../q", "", true},
		{"plugins/p", "/etc", "", true},
		{".", "C:/x", "", true},
		{".", `a\b`, "", true},
		{".", "%2e%2e/x", "", true},
		{".", "a\x00b", "", true},
	}
	for _, tc := range tests {
		got, err := declaredPath(tc.base, tc.p)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("declaredPath(%q, %q) = %q, %v; want %q, error %v", tc.base, tc.p, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, skills.ErrUnsafePath) {
			t.Errorf("declaredPath(%q, %q) error %v, want ErrUnsafePath", tc.base, tc.p, err)
		}
	}
}

// FuzzDiscoverPluginManifests feeds any marketplace.json and plugin.json:
// Discover must never panic, never fail for them, and never return a skill
// outside the root (beside which lies a skill it must never list), and the
// parsers must never declare a path that leaves the root.
func FuzzDiscoverPluginManifests(f *testing.F) {
	for _, s := range [][2]string{
		{`{"plugins": [{"name": "a", "source": "./plugins/p", "skills": ["./skills/"]}]}`, `{"name": "p", "skills": "./custom"}`},
		{`{"metadata": {"pluginRoot": "./plugins"}, "plugins": [{"name": "a", "source": "p"}]}`, `{}`},
		{`{"plugins": [{"name": "a", "source": "../outside"}, {"source": {"source": "github", "repo": "o/r"}}]}`, `{"skills": ["../../outside/evil", "/etc"]}`},
		{`{"plugins": [{"name": "a", "source": "./", "skills": ["./plugins/p/link/evil"]}]}`, `{"name": 1}`},
		{`{"plugins": [`, `[`},
		{`{"plugins": [{"source": "${CLAUDE_PLUGIN_ROOT}/../outside"}]}`, `null`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, marketplace, plugin []byte) {
		decls, _, err := parseMarketplace(marketplace, "m")
		if err == nil {
			for _, d := range decls {
				for _, s := range d.sources {
					checkConfined(t, s)
				}
			}
		}
		base := t.TempDir()
		root := filepath.Join(base, "repo")
		skilltest.WriteDir(t, base, fstest.MapFS{
			"outside/evil/SKILL.md":                     skilltest.File(skilltest.DemoManifest),
			"repo/.claude-plugin/marketplace.json":      skilltest.File(string(marketplace)),
			"repo/plugins/p/.claude-plugin/plugin.json": skilltest.File(string(plugin)),
			"repo/plugins/p/skills/s/SKILL.md":          skilltest.File(skilltest.DemoManifest),
			"repo/plugins/p/custom/c/SKILL.md":          skilltest.File(skilltest.DemoManifest),
			"repo/plugins/p/link":                       skilltest.Symlink("../../../outside"),
		})
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			t.Fatal(err)
		}
		cands, _, err := Discover(root, 0)
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		for i, c := range cands {
			checkConfined(t, c.Rel)
			if c.Dir != filepath.Join(real, filepath.FromSlash(c.Rel)) {
				t.Fatalf("candidate %+v: Dir is not Rel under the root", c)
			}
			if i > 0 && cands[i-1].Rel >= c.Rel {
				t.Fatalf("candidates out of order or repeated: %q, %q", cands[i-1].Rel, c.Rel)
			}
		}
	})
}

// checkConfined fails unless rel is "." or a clean slash path below a root.
func checkConfined(t *testing.T, rel string) {
	t.Helper()
	if rel == "." {
		return
	}
	if clean, err := skills.CleanRelPath(rel); err != nil || clean != rel {
		t.Fatalf("path %q leaves the root or is not clean (%v)", rel, err)
	}
}

// A marketplace may name one folder any number of times: 1 MiB of "."
// paths over a few hundred plugins is a quarter of a million declarations.
// Each folder is listed once, so discovery stays quick instead of listing
// the root hundreds of thousands of times.
func TestDiscoverRepeatedDeclarationsAreCheap(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 500; i++ {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%03d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	skilltest.WriteDir(t, root, fstest.MapFS{"x/SKILL.md": skilltest.File(skilltest.DemoManifest)})
	paths := strings.TrimSuffix(strings.Repeat(`".",`, maxDeclaredPaths), ",")
	var b strings.Builder
	b.WriteString(`{"plugins":[`)
	for n := 0; b.Len() < maxPluginManifest-5000; n++ {
		if n > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"p%d","source":".","skills":[%s]}`, n, paths)
	}
	b.WriteString("]}")
	skilltest.WriteDir(t, root, fstest.MapFS{".claude-plugin/marketplace.json": skilltest.File(b.String())})
	done := make(chan []Candidate, 1)
	go func() {
		cands, _, _ := Discover(root, 0)
		done <- cands
	}()
	select {
	case cands := <-done:
		if len(cands) != 1 || cands[0].Rel != "x" || cands[0].Plugin != "p0" {
			t.Errorf("candidates %+v, want x of plugin p0", cands)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("discovery still running after 20s: a folder named again and again is listed again and again")
	}
}
