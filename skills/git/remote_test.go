package git

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

func TestParseRemoteName(t *testing.T) {
	gh := func(repo, ref, p string) Source {
		return Source{URL: "https://github.com/" + repo + ".git", Ref: ref, Path: p}
	}
	gl := func(repo, ref, p string) Source {
		return Source{URL: "https://gitlab.com/" + repo + ".git", Ref: ref, Path: p}
	}
	for _, tc := range []struct {
		in   string
		want Source
	}{
		{"owner/repo", gh("owner/repo", "", "")},
		{" owner/repo.git ", gh("owner/repo", "", "")},
		{"owner/repo/skills/pdf", gh("owner/repo", "", "skills/pdf")},
		{"owner/repo/skills//pdf/", gh("owner/repo", "", "skills/pdf")},
		{"owner/repo#v1", gh("owner/repo", "v1", "")},
		{"owner/repo#v1:skills/x", gh("owner/repo", "v1", "skills/x")},
		{"github:owner/repo", gh("owner/repo", "", "")},
		{"GitHub:owner/repo/a/b", gh("owner/repo", "", "a/b")},
		{"gitlab:group/repo", gl("group/repo", "", "")},
		{"gitlab:group/repo//skills/x#main", gl("group/repo", "main", "skills/x")},
		{"gitlab:group/repo#main:skills/x", gl("group/repo", "main", "skills/x")},
		// GitLab groups nest: every component is the project's path.
		{"gitlab:group/sub/repo", gl("group/sub/repo", "", "")},
		{"gitlab:group/sub/deeper/repo.git//a//b/", gl("group/sub/deeper/repo", "", "a/b")},
		// A leading '.' is a repository name (.github), not an owner's.
		{"o/.github", gh("o/.github", "", "")},
		{"github:o/.github/skills/x", gh("o/.github", "", "skills/x")},
		{"https://github.com/o/.github/tree/main/x", gh("o/.github", "main", "x")},
		{"gitlab:g/.sub/r", gl("g/.sub/r", "", "")},
		{"https://github.com/o/r/tree/main", gh("o/r", "main", "")},
		{"https://github.com/o/r/tree/v1.2/skills/pdf", gh("o/r", "v1.2", "skills/pdf")},
		{"http://www.github.com/o/r.git/tree/dev/x/", gh("o/r", "dev", "x")},
		{"https://github.com/o/r/blob/main/skills/pdf/SKILL.md", gh("o/r", "main", "skills/pdf")},
		{"https://github.com/o/r/blob/main/SKILL.md", gh("o/r", "main", "")},
		{"https://gitlab.com/g/r/-/tree/main/skills/x", gl("g/r", "main", "skills/x")},
		{"https://gitlab.com/g/sub/r/-/tree/v2", gl("g/sub/r", "v2", "")},
		{"https://gitlab.com/g/r/-/blob/main/a/SKILL.md", gl("g/r", "main", "a")},
	} {
		got, ok := ParseRemoteName(tc.in)
		if !ok || got != tc.want {
			t.Errorf("ParseRemoteName(%q) = %+v, %v; want %+v", tc.in, got, ok, tc.want)
		}
	}
	for _, in := range []string{
		"", "repo", "./owner/repo", "../o/r", "/abs/o/r", "~/o/r", "owner/", "/repo", "-o/r", ".o/r", "o/..", "o/.", "o/.git", "o/..git", "gitlab:.g/r", "gitlab:g/../r", "gitlab:g/r//", "gitlab:g", "gitlab:g/r//a#v1:b",
		"https://gitlab.com/.g/r/-/tree/main", "https://github.com/.o/r/tree/main",
		"dist/skill.zip", "docs/SKILL.md", "git@github.com:o/r", `C:\o\r`, "file:///o/r", "o/r/a#v1:b",
		"https://github.com/o/r", "https://github.com/o/r.git", "https://github.com/o/r/tree/", "https://github.com/o/r/blob/main/README.md",
		"https://github.com/o/r/issues/1", "https://github.com/o/r/tree/main?x=1", "https://gitlab.com/g/r", "https://gitlab.com/r/-/tree/main",
		"https://example.com/o/r/tree/main", "https://github.com/o/r/tree/-x", "o/r\nx", "ssh://github.com/o/r",
	} {
		if got, ok := ParseRemoteName(in); ok {
			t.Errorf("ParseRemoteName(%q) = %+v, want not a remote name", in, got)
		}
	}
}

// A URL rewrite (url.<base>.insteadOf) in the global git configuration of
// whoever runs skillfs applies to a clone; the rest of it does not (see
// the hostile configuration tests).
func TestCloneGitHonoursURLRewrites(t *testing.T) {
	gittest.Require(t)
	root := t.TempDir()
	makeBareRepo(t, filepath.Join(root, "mirror", "o", "r.git"), "d")
	src, ok := ParseRemoteName("o/r")
	if !ok {
		t.Fatal("o/r is not a remote name")
	}
	// Without the rewrite, the name cannot be reached: the control.
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(root, "gitconfig"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte("[url \"file:///nonexistent/\"]\n\tinsteadOf = https://example.invalid/\n"), 0o644)
	if _, err := Clone(context.Background(), Source{URL: "https://github.com/o/r.git", Ref: "main"}, filepath.Join(root, "c0"),
		CloneOptions{Timeout: 0}); err == nil {
		t.Skip("github.com answered: this machine has network")
	}
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte("[url \"file://"+filepath.Join(root, "mirror")+"/\"]\n\tinsteadOf = https://github.com/\n"), 0o644)
	dir := filepath.Join(root, "clone")
	commit, err := Clone(context.Background(), src, dir, CloneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(commit) < 40 {
		t.Errorf("commit %q", commit)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "SKILL.md")); err != nil || !strings.Contains(string(b), "name: x") {
		t.Errorf("clone holds %q, %v", b, err)
	}
}

func FuzzParseRemoteName(f *testing.F) {
	for _, s := range []string{
		"owner/repo", "o/r/a/b#v1", "github:o/r", "gitlab:g/r/x", "gitlab:g/s/r//x#v1", "o/.github", "https://github.com/o/r/tree/main/a",
		"https://github.com/o/r/blob/v1/a/SKILL.md", "https://gitlab.com/g/s/r/-/tree/m/x", "./o/r", "o/r/../..", "o/r/a#:b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, ok := ParseRemoteName(s)
		if !ok {
			if g != (Source{}) {
				t.Fatalf("not a name, but %+v", g)
			}
			return
		}
		if !strings.HasPrefix(g.URL, githubBase) && !strings.HasPrefix(g.URL, gitlabBase) || !strings.HasSuffix(g.URL, ".git") {
			t.Fatalf("URL %q", g.URL)
		}
		if !ParseSpec(g.URL).IsRemote() || gitURLProblem(g.URL) != "" || dotSegmentProblem(g.URL) != "" {
			t.Fatalf("URL %q is not a remote git URL", g.URL)
		}
		// A ref after '#' is kept as written, for Clone to refuse; one
		// from a URL is safe (below).
		if strings.ContainsAny(g.Ref, "#:") {
			t.Fatalf("ref %q", g.Ref)
		}
		if !strings.Contains(s, "://") && g.Ref != ParseSource(s).Ref {
			t.Fatalf("ref %q of a shorthand, want %q as written after '#'", g.Ref, ParseSource(s).Ref)
		}
		if strings.Contains(strings.ToLower(s), "://") && g.Ref != "" && gitRefProblem(g.Ref) != "" {
			t.Fatalf("ref %q of a URL accepted", g.Ref)
		}
		if g.Path != "" {
			if clean, err := skills.CleanRelPath(g.Path); err == nil && clean != g.Path {
				t.Fatalf("path %q kept uncleaned (%q)", g.Path, clean)
			}
		}
		// The canonical spelling reads back as the same source.
		if back := ParseSource(g.String()); back != g {
			t.Fatalf("ParseGitSource(%q) = %+v, want %+v", g.String(), back, g)
		}
		for _, p := range []string{".", "/", "~"} {
			if strings.HasPrefix(strings.TrimSpace(s), p) {
				t.Fatalf("%q starts with %q, a local path, but resolved to %+v", s, p, g)
			}
		}
	})
}
