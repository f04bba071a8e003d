package skills

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDiscover(t *testing.T) {
	m := func(dir string) tfile { return tfile{name: dir + "/SKILL.md", body: testManifest} }
	cases := []struct {
		name     string
		tree     []tfile
		links    [][2]string // target, link (relative to root)
		maxDepth int
		want     []string // Rel of each candidate, in order
		wantErr  error
	}{
		{
			name: "root skill wins over everything",
			tree: []tfile{{name: "SKILL.md", body: testManifest}, m("skills/a"), m("other/b")},
			want: []string{"."},
		},
		{
			name: "root lowercase manifest",
			tree: []tfile{{name: "skill.md", body: testManifest}, m("skills/a")},
			want: []string{"."},
		},
		{
			name: "skills dir sorted by name",
			tree: []tfile{m("skills/zeta"), m("skills/alpha"), {name: "skills/beta/skill.md", body: "x"}, {name: "skills/no-manifest/README.md"}, {name: "skills/file.md"}},
			want: []string{"skills/alpha", "skills/beta", "skills/zeta"},
		},
		{name: "curated", tree: []tfile{m("skills/.curated/b"), m("skills/.curated/a")}, want: []string{"skills/.curated/a", "skills/.curated/b"}},
		{name: "experimental", tree: []tfile{m("skills/.experimental/x")}, want: []string{"skills/.experimental/x"}},
		{name: "system", tree: []tfile{m("skills/.system/x")}, want: []string{"skills/.system/x"}},
		{name: "agents", tree: []tfile{m(".agents/skills/x")}, want: []string{".agents/skills/x"}},
		{name: "claude", tree: []tfile{m(".claude/skills/x")}, want: []string{".claude/skills/x"}},
		{
			name: "all places in order",
			tree: []tfile{
				m(".claude/skills/c"), m(".agents/skills/g"), m("skills/.system/s"), m("skills/.experimental/e"),
				m("skills/.curated/k"), m("skills/b"), m("skills/a"), m("skills/.hidden/h"), m("elsewhere/z"),
			},
			want: []string{
				"skills/a", "skills/b", "skills/.curated/k", "skills/.experimental/e",
				"skills/.system/s", ".agents/skills/g", ".claude/skills/c",
			},
		},
		{
			name: "top-level folders are not a standard place",
			tree: []tfile{m("skills/a"), m("b")},
			want: []string{"skills/a"},
		},
		{
			name: "recursive fallback",
			tree: []tfile{
				m("b"), m("a/nested"), m("plugins/p/skills/x"), m("plugins/p/.claude/skills/y"),
				m("node_modules/pkg"), m(".git/hooks"), m(".hidden/s"), m("__MACOSX/m"),
				m("top/inner"), {name: "top/SKILL.md", body: testManifest},
				m("d1/d2/d3/d4/d5/d6/d7/too-deep"),
			},
			want: []string{"a/nested", "b", "plugins/p/.claude/skills/y", "plugins/p/skills/x", "top"},
		},
		{
			name:     "bounded depth",
			tree:     []tfile{m("a/b/c"), m("x/y")},
			maxDepth: 2,
			want:     []string{"x/y"},
		},
		{
			name:  "symlinked skill is not followed",
			tree:  []tfile{m("real/one"), m("skills/two")},
			links: [][2]string{{"../real/one", "skills/linked"}},
			want:  []string{"skills/two"},
		},
		{
			name:  "symlinked skills dir is not followed",
			tree:  []tfile{m("elsewhere/one")},
			links: [][2]string{{"elsewhere", "skills"}},
			want:  []string{"elsewhere/one"},
		},
		{
			name:  "symlinked directory in the search is not followed",
			tree:  []tfile{m("real/one")},
			links: [][2]string{{"real", "alias"}},
			want:  []string{"real/one"},
		},
		{
			name:     "nothing",
			tree:     []tfile{{name: "README.md", body: "x"}, m("d1/d2/d3/deep")},
			maxDepth: 3,
			wantErr:  ErrNoManifest,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "repo")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			writeTree(t, root, tc.tree...)
			for _, l := range tc.links {
				symlink(t, l[0], filepath.Join(root, filepath.FromSlash(l[1])))
			}
			got, err := Discover(root, tc.maxDepth)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Discover error %v, want %v", err, tc.wantErr)
			}
			var rels []string
			for _, c := range got {
				rels = append(rels, c.Rel)
				wantDir := filepath.Join(root, filepath.FromSlash(c.Rel))
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
		})
	}
}
