package git

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

func TestResolveGitURL(t *testing.T) {
	rules := []gitRewrite{
		{base: "file:///srv/mirror/", prefix: "https://github.com/"},
		{base: "https://mirror.example/gl/", prefix: "https://gitlab.com/"},
		{base: "https://mirror.example/special/", prefix: "https://gitlab.com/special/"},
		{base: "https://first.example/", prefix: "https://dup.example/"},
		{base: "https://second.example/", prefix: "https://dup.example/"},
		{base: "/srv/plain", prefix: "https://plain.example"},
		{base: "file:///srv/dots/../elsewhere/", prefix: "https://dots.example/"},
	}
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/o/r.git", "file:///srv/mirror/o/r.git"},
		{"https://gitlab.com/g/sub/r.git", "https://mirror.example/gl/g/sub/r.git"},
		// The longest prefix wins, whatever the order; of equal ones, the first.
		{"https://gitlab.com/special/r.git", "https://mirror.example/special/r.git"},
		{"https://dup.example/r.git", "https://first.example/r.git"},
		{"https://plain.example/r.git", "/srv/plain/r.git"},
		// Rewritten once: the result is not rewritten again.
		{"https://example.com/a..b/r...git", "https://example.com/a..b/r...git"},
		{"git@host:o/r.git", "git@host:o/r.git"},
		// A path on this machine is an admin's, and kept as written.
		{"/srv/repos/../r.git", "/srv/repos/../r.git"},
		{"file:///srv/./r.git", "file:///srv/./r.git"},
	} {
		got, err := resolveGitURL(tc.in, rules)
		if err != nil || got != tc.want {
			t.Errorf("resolveGitURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"https://github.com/../../home/team-b/private.git",
		"https://github.com/o/../../x.git",
		"https://github.com/%2e%2e/%2E%2e/etc",
		"https://github.com/%252e%252E/x",
		"https://github.com/o/%2E/r.git",
		"https://github.com/..%2f..%2Fhome/x",
		`https://github.com/..\x`,
		"https://github.com/..?x",
		"https://example.com/../r.git",
		"ssh://host/../r.git",
		"git@host:../r.git",
		"git@host:o/./r.git",
		// A local rewrite must stay in its folder: a sibling named alike is outside.
		"https://plain.example.evil/r.git",
		"https://plain.example-x/r.git",
		// A base with a dot segment makes every result refused.
		"https://dots.example/r.git",
	} {
		if got, err := resolveGitURL(in, rules); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("resolveGitURL(%q) = %q, %v; want ErrInvalid", in, got, err)
		} else if strings.Contains(err.Error(), "/srv/") {
			t.Errorf("resolveGitURL(%q): the error %q names where the rewrite leads", in, err)
		}
	}
}

func TestRewriteGitURLReadsTheConfiguration(t *testing.T) {
	gittest.Require(t)
	root := t.TempDir()
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(root, "gitconfig"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte("[url \"file:///srv/Mirror.dir/\"]\n\tinsteadOf = https://github.com/\n"+
		"[URL \"https://m.example/x/\"]\n\tINSTEADOF = https://github.com/x/\n\tinsteadOf = git@github.com:x/\n"), 0o644)
	got := gitRewrites()
	want := []gitRewrite{{"file:///srv/Mirror.dir/", "https://github.com/"}, {"https://m.example/x/", "https://github.com/x/"}, {"https://m.example/x/", "git@github.com:x/"}}
	if len(got) != len(want) {
		t.Fatalf("gitRewrites() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("gitRewrites()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	for in, want := range map[string]SourcePaths{
		"https://github.com/o/r.git":        {Rewritten: "/srv/Mirror.dir/o/r.git"}, // remote as written, read from this machine
		"https://github.com/o/r.git#main":   {Rewritten: "/srv/Mirror.dir/o/r.git"},
		"https://example.com/o/r.git":       {},
		"git@github.com:x/r.git":            {}, // rewritten to another host
		"/srv/Mirror.dir/o/r.git":           {Named: []string{"/srv/Mirror.dir/o/r.git"}},
		"/srv/a#b":                          {Named: []string{"/srv/a#b", "/srv/a"}},
		"file:///srv/x%20y.git#v1":          {Named: []string{"/srv/x y.git"}},
		"FILE://localhost/srv/x.git":        {Named: []string{"/srv/x.git"}},
		"ext::sh -c touch% /tmp/pwned":      {Named: []string{"ext::sh -c touch% /tmp/pwned"}}, // not a URL git may read: a (relative) path, refused as one
		"gopher://example.com/r.git":        {},
		"https://github.com/x/r.git#v2:sub": {}, // the longest prefix that matches, github.com/x/, sends it to another host
	} {
		got, err := ParseSpec(in).LocalPaths()
		if err != nil || !slices.Equal(got.Named, want.Named) || got.Rewritten != want.Rewritten {
			t.Errorf("ParseSpec(%q).LocalPaths() = %+v, %v; want %+v", in, got, err, want)
		}
		if got.Local() != (len(want.Named) > 0 || want.Rewritten != "") {
			t.Errorf("ParseSpec(%q).LocalPaths().Local() = %v", in, got.Local())
		}
	}
	for _, in := range []string{"https://github.com/../../home/b/x.git#main", "file://otherhost/srv/x.git", "file:///srv/x.git?q=1"} {
		if got, err := ParseSpec(in).LocalPaths(); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("ParseSpec(%q).LocalPaths() = %+v, %v; want ErrInvalid", in, got, err)
		}
	}

	// Rules in an included file apply, as they do for git; of equally long
	// prefixes, the base that appears first wins, as in git.
	skilltest.WriteFile(t, filepath.Join(root, "included"), []byte("[url \"https://b.example/\"]\n\tinsteadOf = q://\n"+
		"[url \"https://a.example/\"]\n\tinsteadOf = p://\n[url \"https://b.example/\"]\n\tinsteadOf = p://\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte("[include]\n\tpath = "+filepath.Join(root, "included")+"\n"), 0o644)
	read, _, ok := rewriteGitURL("p://r.git", gitRewrites())
	if !ok || read != "https://b.example/r.git" {
		t.Errorf("p://r.git is read from %q (%v), want https://b.example/r.git as git reads it", read, ok)
	}
	if out, err := exec.Command("git", "ls-remote", "--get-url", "p://r.git").Output(); err != nil || strings.TrimSpace(string(out)) != read {
		t.Errorf("git itself reads p://r.git from %q (%v), skillfs from %q", out, err, read)
	}
}

// makeBareRepo makes a bare repository at dir holding one skill whose
// description is desc.
func makeBareRepo(t *testing.T, dir, desc string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	skilltest.WriteFile(t, filepath.Join(work, "SKILL.md"), []byte("---\nname: x\ndescription: "+desc+"\n---\n"), 0o644)
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	for _, args := range [][]string{
		{"init", "--quiet", "-b", "main", work},
		{"-C", work, "add", "."},
		{"-C", work, "commit", "--quiet", "-m", "one"},
		{"clone", "--quiet", "--bare", work, dir},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// A rewrite to a mirror on this machine cannot be walked out of: the
// repository next to the mirror is never read, by any spelling of "..", nor
// through a sibling folder whose name starts like the mirror's.
func TestCloneGitRewriteStaysInItsFolder(t *testing.T) {
	gittest.Require(t)
	root := t.TempDir()
	makeBareRepo(t, filepath.Join(root, "mirror", "o", "r.git"), "mirrored")
	makeBareRepo(t, filepath.Join(root, "private.git"), "PRIVATE")
	makeBareRepo(t, filepath.Join(root, "mirror-x", "r.git"), "PRIVATE")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(root, "gitconfig"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte("[url \"file://"+filepath.Join(root, "mirror")+"/\"]\n\tinsteadOf = https://github.com/\n"+
		"[url \"file://"+filepath.Join(root, "mirror")+"\"]\n\tinsteadOf = https://mirror.example\n"), 0o644)

	for _, m := range readModes {
		if _, err := Clone(context.Background(), Source{URL: "https://github.com/o/r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{viaClone: m.viaClone}); err != nil {
			t.Fatalf("%s: the mirror itself: %v", m.name, err)
		}
		for _, u := range []string{
			"https://github.com/../private.git",
			"https://github.com/o/../../private.git",
			"https://github.com/%2e%2e/private.git",
			"https://github.com/%2E%2e/private.git",
			"https://github.com/o/%252e%252e/../private.git",
			"https://mirror.example-x/r.git",
		} {
			dir := filepath.Join(t.TempDir(), "c")
			_, err := Clone(context.Background(), Source{URL: u}, dir, CloneOptions{viaClone: m.viaClone})
			if !errors.Is(err, skills.ErrInvalid) {
				t.Errorf("%s: CloneGit(%q) = %v, want ErrInvalid", m.name, u, err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "SKILL.md")); strings.Contains(string(b), "PRIVATE") {
				t.Errorf("%s: CloneGit(%q) read the repository outside the mirror", m.name, u)
			}
			if err != nil && strings.Contains(err.Error(), root) {
				t.Errorf("%s: CloneGit(%q): the error names the mirror's folder: %v", m.name, u, err)
			}
		}
	}
}

// Git is handed the rewritten URL and no rewrite configuration: a URL is
// rewritten once, as git does, never a second time by git itself.
func TestCloneGitRewritesOnce(t *testing.T) {
	gittest.Require(t)
	root := t.TempDir()
	makeBareRepo(t, filepath.Join(root, "mirror", "o", "r.git"), "mirrored")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(root, "gitconfig"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte("[url \"file://"+filepath.Join(root, "mirror")+"/\"]\n\tinsteadOf = https://b.invalid/\n"+
		"[url \"https://b.invalid/\"]\n\tinsteadOf = https://a.invalid/\n"), 0o644)
	if _, err := Clone(context.Background(), Source{URL: "https://b.invalid/o/r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{viaClone: true}); err != nil {
		t.Fatalf("the rewritten name: %v", err)
	}
	_, err := Clone(context.Background(), Source{URL: "https://a.invalid/o/r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{viaClone: true})
	if err == nil {
		t.Fatal("https://a.invalid/ was rewritten twice: git applied a rewrite of its own")
	}
}

func TestSourceCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://tok@github.com/o/r.git#main:skills/x": "https://xxxxx@github.com/o/r.git#main:skills/x",
		"https://me:s3cret@host:bad/r.git":             "https://xxxxx@host:bad/r.git",
		"ssh://git:pw@host/r.git#v1":                   "ssh://git:xxxxx@host/r.git#v1",
		"https://user:p#s3cret@github.com/a/b.git":     "https://xxxxx@github.com/a/b.git", // a '#' in the password, no ref
	} {
		if !ParseSpec(in).HasCredentials() {
			t.Errorf("ParseSpec(%q).HasCredentials() = false", in)
		}
		if got := ParseSpec(in).String(); got != want {
			t.Errorf("ParseSpec(%q).String() = %q, want %q", in, got, want)
		}
		if err := ParseSpec(in).RefuseCredentials("curated source"); !errors.Is(err, skills.ErrInvalid) || strings.Contains(err.Error(), "s3cret") ||
			strings.Contains(err.Error(), "tok@") || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("RefuseCredentials(%q) = %v", in, err)
		}
	}
	for _, in := range []string{"https://github.com/o/r.git", "git@github.com:o/r.git", "ssh://git@host/r.git", "/srv/a@b/r", "owner/repo", "https://xxxxx@host/r.git"} {
		if ParseSpec(in).HasCredentials() || ParseSpec(in).String() != in || ParseSpec(in).RefuseCredentials("curated source") != nil {
			t.Errorf("%q seen to carry credentials", in)
		}
	}
	if got := gitSecrets("https://me:a%40b@host/r"); !slices.Contains(got, "a%40b") || !slices.Contains(got, "a@b") || !slices.Contains(got, "me") {
		t.Errorf("gitSecrets = %q", got)
	}
}

// FuzzResolveGitURL: whatever URL is asked for, what a mirror rewrite
// yields is refused or stays in the mirror's folder, and no URL that is
// let through reads a "." or ".." segment.
func FuzzResolveGitURL(f *testing.F) {
	for _, s := range []string{
		"https://github.com/o/r.git", "https://github.com/../../etc", "https://github.com/%2e%2e/x",
		"https://github.com/o/%252e%252e/r", "https://github.com/o\\..\\r", "https://github.com/o/r;..",
		"https://gitlab.com/o/r", "git@github.com:o/r.git", "file:///srv/mirror/x", "HTTPS://github.com/o/r",
		"https://github.com", "https://github.com/", "https://github.com/./r",
	} {
		f.Add(s)
	}
	const mirror = "/srv/mirror"
	rules := []gitRewrite{
		{base: "file://" + mirror + "/", prefix: "https://github.com/"},
		{base: mirror + "/gl/", prefix: "https://gitlab.com/"},
		{base: "https://mirror.example/", prefix: "git@github.com:"},
	}
	f.Fuzz(func(t *testing.T, u string) {
		out, err := resolveGitURL(u, rules)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("resolveGitURL(%q): %v, want ErrInvalid", u, err)
			}
			return
		}
		if _, _, rewritten := rewriteGitURL(u, rules); !rewritten {
			return
		}
		if dotSegmentProblem(out) != "" {
			t.Fatalf("resolveGitURL(%q) = %q, which reads a dot segment", u, out)
		}
		if !isRemoteURL(out) {
			p := filepath.Clean(rewriteLocalPath(out))
			if p != mirror && !strings.HasPrefix(p, mirror+"/") {
				t.Fatalf("resolveGitURL(%q) = %q, outside %s", u, out, mirror)
			}
		}
	})
}

// Git never runs where skillfs happens to run: the configuration of a
// repository enclosing the working directory (a rewrite to a repository of
// this machine, here) does not apply to a clone, so a name it maps is not
// found, not read.
func TestCloneGitIgnoresTheWorkingDirectory(t *testing.T) {
	gittest.Require(t)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	skilltest.WriteFile(t, filepath.Join(secret, "SKILL.md"), []byte("---\nname: s\ndescription: secret\n---\n"), 0o644)
	gittest.Git(t, secret, gittest.FixtureEnv, "init", "-q")
	gittest.Git(t, secret, gittest.FixtureEnv, "add", ".")
	gittest.Git(t, secret, gittest.FixtureEnv, "commit", "-q", "-m", "x")
	cwd := filepath.Join(root, "cwd")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	const url = "https://example.invalid/acme/x.git"
	gittest.Git(t, cwd, gittest.FixtureEnv, "init", "-q")
	gittest.Git(t, cwd, gittest.FixtureEnv, "config", "url."+secret+".insteadOf", url)
	t.Chdir(cwd)
	dst := filepath.Join(root, "out")
	_, err := Clone(context.Background(), Source{URL: url}, dst, CloneOptions{})
	if !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("clone of %s beside a repository rewriting it: %v, want not found", url, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "SKILL.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the clone read the rewritten repository: %v", err)
	}
}
