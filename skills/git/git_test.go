package git

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// fixtureRepo is a repository with history to clone:
//
//	c1  SKILL.md (v1); annotated tag v1, lightweight tag "clash"
//	c2  + scripts/run.sh (executable), assets/blob.bin, link -> SKILL.md; main
//	c3  + feature.txt; branches feature and "clash"
type fixtureRepo struct {
	dir        string
	c1, c2, c3 string
	blob       []byte
}

func makeFixtureRepo(tb testing.TB) fixtureRepo {
	tb.Helper()
	gittest.Require(tb)
	r := fixtureRepo{dir: filepath.Join(tb.TempDir(), "src")}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "init", "--quiet", "--initial-branch=main")
	skilltest.WriteFile(tb, filepath.Join(r.dir, "SKILL.md"), []byte("---\nname: demo\ndescription: first\n---\n# v1\n"), 0o644)
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "add", "-A")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "commit", "--quiet", "-m", "one")
	r.c1 = gittest.Git(tb, r.dir, gittest.FixtureEnv, "rev-parse", "HEAD")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "tag", "-a", "v1", "-m", "release one")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "tag", "clash")

	for i := 0; i < 4096; i++ {
		r.blob = append(r.blob, byte(i*7), 0, 0xff)
	}
	skilltest.WriteFile(tb, filepath.Join(r.dir, "SKILL.md"), []byte("---\nname: demo\ndescription: second\n---\n# v2\n"), 0o644)
	skilltest.WriteFile(tb, filepath.Join(r.dir, "scripts", "run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	skilltest.WriteFile(tb, filepath.Join(r.dir, "assets", "blob.bin"), r.blob, 0o644)
	if err := os.Symlink("SKILL.md", filepath.Join(r.dir, "link")); err != nil {
		tb.Fatal(err)
	}
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "add", "-A")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "commit", "--quiet", "-m", "two")
	r.c2 = gittest.Git(tb, r.dir, gittest.FixtureEnv, "rev-parse", "HEAD")

	gittest.Git(tb, r.dir, gittest.FixtureEnv, "checkout", "--quiet", "-b", "feature")
	skilltest.WriteFile(tb, filepath.Join(r.dir, "feature.txt"), []byte("feature\n"), 0o644)
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "add", "-A")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "commit", "--quiet", "-m", "three")
	r.c3 = gittest.Git(tb, r.dir, gittest.FixtureEnv, "rev-parse", "HEAD")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "branch", "clash")
	gittest.Git(tb, r.dir, gittest.FixtureEnv, "checkout", "--quiet", "main")
	return r
}

// TestCloneGit runs the cases that only read the fixture repository against
// one copy of it.
func TestCloneGit(t *testing.T) {
	r := makeFixtureRepo(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, fixtureRepo)
	}{
		{"refs", testCloneGitRefs},
		{"content", testCloneGitContent},
		{"into existing empty dir", testCloneGitIntoExistingEmptyDir},
		{"errors", testCloneGitErrors},
		{"not found reasons", testCloneGitNotFoundReasons},
		{"non empty target", testCloneGitNonEmptyTarget},
		{"runs no hooks", testCloneGitRunsNoHooks},
		{"overrides hooks path", testCloneGitOverridesHooksPath},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

func testCloneGitRefs(t *testing.T, r fixtureRepo) {
	tests := []struct {
		name    string
		src     Source
		want    string // commit
		present []string
		absent  []string
	}{
		{"default branch", Source{URL: r.dir}, r.c2, []string{"scripts/run.sh", "assets/blob.bin"}, []string{"feature.txt"}},
		{"file URL", Source{URL: "file://" + r.dir}, r.c2, []string{"scripts/run.sh"}, []string{"feature.txt"}},
		{"HEAD is the default branch", Source{URL: r.dir, Ref: "HEAD"}, r.c2, []string{"scripts/run.sh"}, nil},
		{"branch", Source{URL: r.dir, Ref: "feature"}, r.c3, []string{"feature.txt"}, nil},
		{"full branch name", Source{URL: r.dir, Ref: "refs/heads/feature"}, r.c3, []string{"feature.txt"}, nil},
		{"annotated tag", Source{URL: r.dir, Ref: "v1"}, r.c1, []string{"SKILL.md"}, []string{"scripts", "feature.txt"}},
		{"full tag name", Source{URL: r.dir, Ref: "refs/tags/v1"}, r.c1, nil, []string{"scripts"}},
		{"branch wins over tag of the same name", Source{URL: r.dir, Ref: "clash"}, r.c3, []string{"feature.txt"}, nil},
		{"full tag name beside a branch of the same name", Source{URL: r.dir, Ref: "refs/tags/clash"}, r.c1, nil, []string{"scripts"}},
		{"full commit hash", Source{URL: r.dir, Ref: r.c1}, r.c1, nil, []string{"scripts"}},
		{"abbreviated commit hash off the default branch", Source{URL: r.dir, Ref: r.c3[:10]}, r.c3, []string{"feature.txt"}, nil},
		{"upper-case commit hash", Source{URL: r.dir, Ref: strings.ToUpper(r.c2)}, r.c2, []string{"scripts/run.sh"}, nil},
	}
	for _, tc := range tests {
		for _, m := range readModes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) { testCloneGitRef(t, tc.src, tc.want, tc.present, tc.absent, m.viaClone) })
		}
	}
}

// testCloneGitRef reads src and checks the commit read and the paths the
// tree must and must not hold.
func testCloneGitRef(t *testing.T, src Source, want string, present, absent []string, viaClone bool) {
	dir := filepath.Join(t.TempDir(), "clone")
	got, err := Clone(context.Background(), src, dir, CloneOptions{viaClone: viaClone})
	if err != nil {
		t.Fatalf("CloneGit(%v): %v", src, err)
	}
	if got != want {
		t.Errorf("commit = %s, want %s", got, want)
	}
	for _, p := range present {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s missing: %v", p, err)
		}
	}
	for _, p := range absent {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s present, want absent (err %v)", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".git left in the clone (err %v)", err)
	}
}

func testCloneGitContent(t *testing.T, r fixtureRepo) {
	dir := filepath.Join(t.TempDir(), "clone")
	if _, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "scripts", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("scripts/run.sh mode %v lost its execute bits", fi.Mode())
	}
	fi, err = os.Stat(filepath.Join(dir, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o111 != 0 {
		t.Errorf("SKILL.md mode %v gained execute bits", fi.Mode())
	}
	blob, err := os.ReadFile(filepath.Join(dir, "assets", "blob.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blob, r.blob) {
		t.Errorf("assets/blob.bin differs: %d bytes, want %d", len(blob), len(r.blob))
	}
	// Symlinks stay symlinks so that the import step rejects them by path.
	fi, err = os.Lstat(filepath.Join(dir, "link"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link has mode %v, want a symlink", fi.Mode())
	}
}

func testCloneGitIntoExistingEmptyDir(t *testing.T, r fixtureRepo) {
	dir := t.TempDir()
	got, err := Clone(context.Background(), Source{URL: r.dir, Ref: "feature"}, dir, CloneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != r.c3 {
		t.Errorf("commit = %s, want %s", got, r.c3)
	}
	if _, err := os.Stat(filepath.Join(dir, "feature.txt")); err != nil {
		t.Error(err)
	}
}

func testCloneGitErrors(t *testing.T, r fixtureRepo) {
	missing := filepath.Join(t.TempDir(), "no-such-repo")
	notRepo := t.TempDir()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, empty, gittest.FixtureEnv, "init", "--quiet")
	tests := []struct {
		name string
		src  Source
		want error
	}{
		{"missing repository", Source{URL: missing}, skills.ErrNotFound},
		{"missing repository with a ref", Source{URL: missing, Ref: "main"}, skills.ErrNotFound},
		{"directory that is no repository", Source{URL: notRepo}, skills.ErrNotFound},
		{"empty repository", Source{URL: empty}, skills.ErrNotFound},
		{"missing branch", Source{URL: r.dir, Ref: "no-such-branch"}, skills.ErrNotFound},
		{"missing full commit", Source{URL: r.dir, Ref: strings.Repeat("0", 40)}, skills.ErrNotFound},
		{"missing abbreviated commit", Source{URL: r.dir, Ref: "deadbeef"}, skills.ErrNotFound},
		{"option as URL", Source{URL: "-oProxyCommand=false"}, skills.ErrInvalid},
		{"newline in URL", Source{URL: "https://example.com/a\nb"}, skills.ErrInvalid},
		{"empty URL", Source{}, skills.ErrInvalid},
		{"option as ref", Source{URL: r.dir, Ref: "--upload-pack=false"}, skills.ErrInvalid},
		{"ref with dot-dot", Source{URL: r.dir, Ref: "main..feature"}, skills.ErrInvalid},
		{"ref with space", Source{URL: r.dir, Ref: "a b"}, skills.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, existing := range []bool{false, true} {
				dir := filepath.Join(t.TempDir(), "clone")
				if existing {
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				commit, err := Clone(context.Background(), tc.src, dir, CloneOptions{})
				if !errors.Is(err, tc.want) {
					t.Fatalf("CloneGit(%v) = %q, %v; want %v", tc.src, commit, err, tc.want)
				}
				var ge *Error
				if !errors.As(err, &ge) {
					t.Fatalf("error %v is not a *GitError", err)
				}
				if tc.src.URL != "" && !strings.Contains(err.Error(), tc.src.URL[:min(len(tc.src.URL), 20)]) {
					t.Errorf("error %q does not name the URL %q", err, tc.src.URL)
				}
				if tc.src.Ref != "" && !strings.Contains(err.Error(), tc.src.Ref) {
					t.Errorf("error %q does not name the ref %q", err, tc.src.Ref)
				}
				entries, rerr := os.ReadDir(dir)
				switch {
				case existing && (rerr != nil || len(entries) != 0):
					t.Errorf("existing target not left empty: %v %v", entries, rerr)
				case !existing && !errors.Is(rerr, os.ErrNotExist):
					t.Errorf("target left behind: %v %v", entries, rerr)
				}
			}
		})
	}
}

// The reason says which of the two was missing.
func testCloneGitNotFoundReasons(t *testing.T, r fixtureRepo) {
	var ge *Error
	_, err := Clone(context.Background(), Source{URL: filepath.Join(t.TempDir(), "nope")}, filepath.Join(t.TempDir(), "a"), CloneOptions{})
	if !errors.As(err, &ge) || !strings.Contains(ge.Reason, "repository") {
		t.Errorf("missing repository: %v", err)
	}
	_, err = Clone(context.Background(), Source{URL: r.dir, Ref: "nope"}, filepath.Join(t.TempDir(), "b"), CloneOptions{})
	if !errors.As(err, &ge) || !strings.Contains(ge.Reason, "ref not found") {
		t.Errorf("missing ref: %v", err)
	}
}

func testCloneGitNonEmptyTarget(t *testing.T, r fixtureRepo) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.txt")
	skilltest.WriteFile(t, keep, []byte("mine"), 0o644)
	_, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{})
	if !errors.Is(err, skills.ErrExists) {
		t.Fatalf("err = %v, want ErrExists", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
		t.Errorf("existing file touched: %q %v", b, err)
	}
}

// hostileGitEnv points the process environment at a git configuration and
// template that run a post-checkout hook and hand out credentials, and
// returns the marker file the hook creates.
func hostileGitEnv(t *testing.T) (marker string) {
	t.Helper()
	root := t.TempDir()
	marker = filepath.Join(root, "hook-ran")
	hook := []byte("#!/bin/sh\ntouch '" + marker + "'\n")
	skilltest.WriteFile(t, filepath.Join(root, "template", "hooks", "post-checkout"), hook, 0o755)
	skilltest.WriteFile(t, filepath.Join(root, "hooks", "post-checkout"), hook, 0o755)
	config := "[core]\n\thooksPath = " + filepath.Join(root, "hooks") + "\n" +
		"[init]\n\ttemplateDir = " + filepath.Join(root, "template") + "\n" +
		"[credential]\n\thelper = \"!f() { echo username=leak; echo password=leaked-secret; }; f\"\n" +
		"[http]\n\textraHeader = X-Leak: leaked-secret\n" +
		"[protocol \"file\"]\n\tallow = always\n"
	skilltest.WriteFile(t, filepath.Join(root, "gitconfig"), []byte(config), 0o644)
	skilltest.WriteFile(t, filepath.Join(root, "home", ".gitconfig"), []byte(config), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(root, "gitconfig"))
	t.Setenv("GIT_TEMPLATE_DIR", filepath.Join(root, "template"))
	t.Setenv("HOME", filepath.Join(root, "home"))
	return marker
}

func testCloneGitRunsNoHooks(t *testing.T, r fixtureRepo) {
	marker := hostileGitEnv(t)

	// Control: plain git in this environment does run the hook.
	ctrl := filepath.Join(t.TempDir(), "control")
	if out, err := exec.Command("git", "clone", "--quiet", r.dir, ctrl).CombinedOutput(); err != nil {
		t.Fatalf("control clone: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control clone did not run the hook, so this test proves nothing: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}

	for _, m := range readModes {
		for _, ref := range []string{"", "feature", r.c1, r.c3[:8]} {
			dir := filepath.Join(t.TempDir(), "clone")
			if _, err := Clone(context.Background(), Source{URL: r.dir, Ref: ref}, dir, CloneOptions{viaClone: m.viaClone}); err != nil {
				t.Fatalf("%s, ref %q: %v", m.name, ref, err)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s, ref %q: a hook ran during CloneGit (marker: %v)", m.name, ref, err)
			}
		}
	}
}

// A wrapper that puts its own hooksPath in front of Clone's arguments
// shows that Clone's own -c core.hooksPath takes effect.
func testCloneGitOverridesHooksPath(t *testing.T, r fixtureRepo) {
	gitBin := gittest.Require(t)
	root := t.TempDir()
	marker := filepath.Join(root, "hook-ran")
	skilltest.WriteFile(t, filepath.Join(root, "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755)
	wrapper := "#!/bin/sh\nexec '" + gitBin + "' -c core.hooksPath='" + filepath.Join(root, "hooks") + "' \"$@\"\n"
	skilltest.WriteFile(t, filepath.Join(root, "bin", "git"), []byte(wrapper), 0o755)
	t.Setenv("PATH", filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))

	ctrl := filepath.Join(t.TempDir(), "control")
	if out, err := exec.Command("git", "clone", "--quiet", r.dir, ctrl).CombinedOutput(); err != nil {
		t.Fatalf("control clone: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control clone through the wrapper did not run the hook: %v", err)
	}
	os.Remove(marker)

	if _, err := Clone(context.Background(), Source{URL: r.dir, Ref: "feature"}, filepath.Join(t.TempDir(), "clone"), CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hook ran during CloneGit (marker: %v)", err)
	}
}

func TestCloneGitSendsNoCredentials(t *testing.T) {
	gittest.Require(t)
	hostileGitEnv(t)
	var authSeen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Leak") != "" {
			authSeen.Add(1)
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	}))
	defer srv.Close()
	repoURL := srv.URL + "/private/repo.git"

	// Control: plain git in this environment offers the helper's credentials.
	cmd := exec.Command("git", "ls-remote", repoURL)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	cmd.Run()
	if authSeen.Load() == 0 {
		t.Fatal("control ls-remote sent no credentials, so this test proves nothing")
	}
	authSeen.Store(0)

	dir := filepath.Join(t.TempDir(), "clone")
	_, err := Clone(context.Background(), Source{URL: repoURL}, dir, CloneOptions{})
	if !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if n := authSeen.Load(); n != 0 {
		t.Errorf("CloneGit sent credentials %d times", n)
	}
	for _, leak := range []string{"leaked-secret", "Username for", "terminal prompts"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q contains %q", err, leak)
		}
	}

	// Credentials written into the URL are never echoed back.
	secretURL := strings.Replace(srv.URL, "http://", "http://someone:hunter2-secret@", 1) + "/private/repo.git"
	_, err = Clone(context.Background(), Source{URL: secretURL, Ref: "main"}, dir, CloneOptions{})
	if !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for _, leak := range []string{"hunter2-secret", "someone"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q contains %q", err, leak)
		}
	}
}

func TestCloneGitCancel(t *testing.T) {
	gittest.Require(t)
	started := make(chan struct{}, 1)
	gone := make(chan struct{}, 1)
	// The server never answers; only killing git and its remote helper
	// (a child process) closes the connection.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		select {
		case gone <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
		}
		cancel()
	}()
	dir := filepath.Join(t.TempDir(), "clone")
	begin := time.Now()
	_, err := Clone(ctx, Source{URL: srv.URL + "/slow/repo.git"}, dir, CloneOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(begin); d > 8*time.Second {
		t.Errorf("CloneGit took %v to return after cancel", d)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the connection stayed open: git's remote helper survived the cancel")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target left behind: %v", err)
	}
}

func TestCloneGitSkipsSubmodules(t *testing.T) {
	r := makeFixtureRepo(t)
	sub := filepath.Join(t.TempDir(), "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, sub, gittest.FixtureEnv, "init", "--quiet")
	skilltest.WriteFile(t, filepath.Join(sub, "inner.txt"), []byte("inner"), 0o644)
	gittest.Git(t, sub, gittest.FixtureEnv, "add", "-A")
	gittest.Git(t, sub, gittest.FixtureEnv, "commit", "--quiet", "-m", "sub")
	gittest.Git(t, r.dir, gittest.FixtureEnv, "-c", "protocol.file.allow=always", "submodule", "add", "--quiet", sub, "vendor/sub")
	gittest.Git(t, r.dir, gittest.FixtureEnv, "commit", "--quiet", "-m", "add submodule")

	for _, m := range readModes {
		dir := filepath.Join(t.TempDir(), "clone")
		if _, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{viaClone: m.viaClone}); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, ".gitmodules")); err != nil {
			t.Errorf("%s: .gitmodules missing: %v", m.name, err)
		}
		entries, err := os.ReadDir(filepath.Join(dir, "vendor", "sub"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Errorf("%s: submodule was cloned: %v", m.name, entries)
		}
	}
}

func TestIsGitURL(t *testing.T) {
	gittest.Require(t)
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, gittest.FixtureEnv, "init", "--quiet")
	bare := filepath.Join(root, "bare")
	gittest.Git(t, root, gittest.FixtureEnv, "init", "--quiet", "--bare", bare)
	plain := filepath.Join(root, "plain")
	skilltest.WriteFile(t, filepath.Join(plain, "SKILL.md"), []byte("x"), 0o644)
	file := filepath.Join(root, "file.txt")
	skilltest.WriteFile(t, file, []byte("x"), 0o644)

	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"https", "https://github.com/owner/repo", true},
		{"https with ref", "https://github.com/owner/repo.git#v1.2", true},
		{"upper-case scheme", "HTTPS://example.com/r", true},
		{"http", "http://example.com/r.git", true},
		{"ssh", "ssh://git@example.com/r.git", true},
		{"git+ssh", "git+ssh://git@example.com/r.git", true},
		{"git protocol", "git://example.com/r", true},
		{"file URL", "file:///srv/repos/r", true},
		{"scp-like", "git@github.com:owner/repo.git", true},
		{"scp-like without .git", "deploy@host.example:team/repo", true},
		{"bare scheme", "https://", false},
		{"ftp", "ftp://example.com/r.git", false},
		{"remote helper", "ext::sh -c touch% /tmp/x", false},
		{"host:path without user", "host:repo", false},
		{"colon after slash", "./dir/a:b", false},
		{"path ending in .git", "../repos/skills.git", true},
		{"path ending in .git/", "../repos/skills.git/", true},
		{"working tree", work, true},
		{"working tree with ref", work + "#main", true},
		{"bare repository", bare, true},
		{"plain directory", plain, false},
		{"file", file, false},
		{"missing path", filepath.Join(root, "missing"), false},
		{"zip archive", "skill.zip", false},
		{"empty", "", false},
		{"only a ref", "#main", false},
		{"option", "-x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseSpec(tc.in).IsGit(); got != tc.want {
				t.Errorf("IsGitURL(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseGitSource(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Source
	}{
		{"no ref", "https://example.com/r.git", Source{URL: "https://example.com/r.git"}},
		{"branch", "https://example.com/r.git#main", Source{URL: "https://example.com/r.git", Ref: "main"}},
		{"slashed branch", "git@host:o/r.git#feature/x", Source{URL: "git@host:o/r.git", Ref: "feature/x"}},
		{"commit", "./repo#0123abcd", Source{URL: "./repo", Ref: "0123abcd"}},
		{"empty ref", "./repo#", Source{URL: "./repo"}},
		{"path with '#' and empty ref", "./a#b#", Source{URL: "./a#b"}},
		{"path with '#' and a ref", "./a#b#v1", Source{URL: "./a#b", Ref: "v1"}},
		{"spaces trimmed", "  ./repo # v1 ", Source{URL: "./repo", Ref: "v1"}},
		{"empty", "", Source{}},
		{"ref and path", "https://example.com/r.git#v1:skills/x", Source{URL: "https://example.com/r.git", Ref: "v1", Path: "skills/x"}},
		{"default branch and path", "https://example.com/r.git#:skills/x", Source{URL: "https://example.com/r.git", Path: "skills/x"}},
		{"scp-like with ref and path", "git@host:org/repo.git#v1:skills/x", Source{URL: "git@host:org/repo.git", Ref: "v1", Path: "skills/x"}},
		{"scp-like with path only", "git@host:org/repo.git#:x", Source{URL: "git@host:org/repo.git", Path: "x"}},
		{"port in URL", "ssh://git@host:2222/o/r.git#main:a/b", Source{URL: "ssh://git@host:2222/o/r.git", Ref: "main", Path: "a/b"}},
		{"colon in URL without fragment", "git@host:org/repo.git", Source{URL: "git@host:org/repo.git"}},
		{"slashed ref and path", "./repo#feature/x:plugins/p", Source{URL: "./repo", Ref: "feature/x", Path: "plugins/p"}},
		{"path cleaned", "./repo#v1:./skills//x/", Source{URL: "./repo", Ref: "v1", Path: "skills/x"}},
		{"path trimmed", " ./repo # v1 : skills/x ", Source{URL: "./repo", Ref: "v1", Path: "skills/x"}},
		{"path naming the root", "./repo#v1:./", Source{URL: "./repo", Ref: "v1"}},
		{"empty path", "./repo#v1:", Source{URL: "./repo", Ref: "v1"}},
		{"colon in path", "./repo#v1:a:b", Source{URL: "./repo", Ref: "v1", Path: "a:b"}},
		{"path with '#' in URL", "./a#b#v1:x", Source{URL: "./a#b", Ref: "v1", Path: "x"}},
		// Unsafe paths are kept as written, for SubRoot to refuse.
		{"path with ..", "./repo#:../x", Source{URL: "./repo", Path: "../x"}},
		{"path with inner ..", "./repo#v1:a/../../x", Source{URL: "./repo", Ref: "v1", Path: "a/../../x"}},
		{"absolute path", "./repo#:/etc", Source{URL: "./repo", Path: "/etc"}},
		{"windows path as URL", `C:\repos\r#v1:sub\dir`, Source{URL: `C:\repos\r`, Ref: "v1", Path: `sub\dir`}},
		{"windows drive as path", "./repo#:C:/x", Source{URL: "./repo", Path: "C:/x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseSource(tc.in); got != tc.want {
				t.Errorf("ParseGitSource(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestGitSourceString(t *testing.T) {
	tests := []struct {
		name string
		in   Source
		want string
	}{
		{"plain", Source{URL: "https://example.com/r.git", Ref: "v1"}, "https://example.com/r.git#v1"},
		{"token as user", Source{URL: "https://ghp_token123@github.com/o/r"}, "https://xxxxx@github.com/o/r"},
		{"user and password", Source{URL: "https://me:pw@example.com/r.git", Ref: "main"}, "https://xxxxx@example.com/r.git#main"},
		{"ssh user kept", Source{URL: "ssh://git@example.com/r.git"}, "ssh://git@example.com/r.git"},
		{"ssh password hidden", Source{URL: "ssh://git:pw@example.com/r.git"}, "ssh://git:xxxxx@example.com/r.git"},
		{"scp-like", Source{URL: "git@example.com:o/r.git"}, "git@example.com:o/r.git"},
		{"path with '#'", Source{URL: "./a#b"}, "./a#b#"},
		{"ref and path", Source{URL: "https://example.com/r.git", Ref: "v1", Path: "skills/x"}, "https://example.com/r.git#v1:skills/x"},
		{"path only", Source{URL: "git@example.com:o/r.git", Path: "skills/x"}, "git@example.com:o/r.git#:skills/x"},
		{"path with credentials", Source{URL: "https://tok@example.com/r.git", Path: "x"}, "https://xxxxx@example.com/r.git#:x"},
		{"URL with '#' and a path", Source{URL: "./a#b", Path: "x"}, "./a#b#:x"},
		// URLs that do not parse still have their credentials hidden.
		{"bad port", Source{URL: "https://me:tok3n@example.com:bad/r.git"}, "https://xxxxx@example.com:bad/r.git"},
		{"space in password", Source{URL: "https://me:to ken@example.com/r.git"}, "https://xxxxx@example.com/r.git"},
		{"'@' in password", Source{URL: "HTTPS://me:a@b@example.com/r.git"}, "HTTPS://xxxxx@example.com/r.git"},
		{"'@' in the path only", Source{URL: "https://example.com/o/r@v1.git"}, "https://example.com/o/r@v1.git"},
		{"ssh bad port", Source{URL: "ssh://git:pw@example.com:x/r.git"}, "ssh://git:xxxxx@example.com:x/r.git"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.String()
			if got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if strings.Contains(tc.in.URL, "@") || strings.Contains(tc.in.URL, "#") {
				return
			}
			if back := ParseSource(got); back != tc.in {
				t.Errorf("ParseGitSource(%q) = %+v, want %+v", got, back, tc.in)
			}
		})
	}
}

func TestGitDetail(t *testing.T) {
	tests := []struct {
		name    string
		stderr  string
		secrets []string
		want    string
	}{
		{"last fatal line", "Cloning into 'x'...\nfatal: repository 'x' does not exist\n", nil, "Cloning into 'x'...; repository 'x' does not exist"},
		{"prompt replaced", "fatal: could not read Username for 'https://h': terminal prompts disabled\n", nil, "the server asked for credentials, which are never sent"},
		{"hints dropped", "hint: do this\nerror: bad\n", nil, "bad"},
		{"secret removed", "fatal: unable to access 'https://tok3n@h/': 401\n", []string{"tok3n"}, "unable to access 'https://xxxxx@h/': 401"},
		{"last three lines", "a\nb\nc\nd\n", nil, "b; c; d"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := gitDetail(tc.stderr, tc.secrets); got != tc.want {
				t.Errorf("gitDetail = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzParseGitSource(f *testing.F) {
	for _, s := range []string{
		"https://github.com/o/r.git#main", "git@host:o/r#v1", "./a#b#", "#", "##", " x # y ",
		"file:///r#0123456789abcdef0123456789abcdef01234567", "https://u:p@h/r#refs/tags/v1",
		"-oProxyCommand=x", "a\nb#c", "ssh://h/r#a..b", "\xff#\xfe",
		"git@host:o/r.git#v1:skills/x", "./r#:../x", "./r#v1:./a//b/", "./r#: x /", `C:\r#v1:a\b`, "./r#:.", "u#a:b:c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := ParseSource(s)
		if strings.Contains(g.Ref, "#") || strings.Contains(g.Ref, ":") {
			t.Fatalf("ref %q holds '#' or ':'", g.Ref)
		}
		if strings.Contains(g.Path, "#") {
			t.Fatalf("path %q holds '#'", g.Path)
		}
		if g.URL != strings.TrimSpace(g.URL) || g.Ref != strings.TrimSpace(g.Ref) || g.Path != strings.TrimSpace(g.Path) {
			t.Fatalf("untrimmed %+v", g)
		}
		if g.Path != "" {
			// A path is clean, or refused where it is used.
			clean, err := skills.CleanRelPath(g.Path)
			if err == nil && clean != g.Path {
				t.Fatalf("path %q kept uncleaned (%q)", g.Path, clean)
			}
			if err != nil && !errors.Is(err, skills.ErrUnsafePath) {
				t.Fatalf("path %q: %v", g.Path, err)
			}
		}
		if back := ParseSource(g.Spec()); back != g {
			t.Fatalf("ParseGitSource(%q) = %+v, want %+v", g.Spec(), back, g)
		}
		if redactGitURL(g.URL) == g.URL {
			if back := ParseSource(g.String()); back != g {
				t.Fatalf("ParseGitSource(%q) = %+v, want %+v", g.String(), back, g)
			}
		}
		if gitRefProblem(g.Ref) == "" && g.Ref != "" {
			if strings.HasPrefix(g.Ref, "-") || strings.ContainsAny(g.Ref, " \n\r\t\x00:") || strings.Contains(g.Ref, "..") {
				t.Fatalf("unsafe ref %q accepted", g.Ref)
			}
		}
		if gitURLProblem(g.URL) == "" && (strings.HasPrefix(g.URL, "-") || strings.ContainsAny(g.URL, "\n\r\x00")) {
			t.Fatalf("unsafe URL %q accepted", g.URL)
		}
		if u, err := url.Parse(g.URL); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" && p != "xxxxx" && redactGitURL(g.URL) == g.URL {
				t.Fatalf("URL %q with password %q not seen to carry credentials", g.URL, p)
			}
		}
		if r := redactGitURL(g.URL); r != g.URL {
			if _, user, _, _ := splitUserinfo(r); strings.Contains(r, "@") && !strings.Contains(user, "xxxxx") {
				t.Fatalf("redacted URL %q keeps its user information %q", r, user)
			}
			if redactGitURL(r) != r {
				t.Fatalf("redacting %q again changes it: %q", r, redactGitURL(r))
			}
		}
		_ = IsSCPLike(g.URL)
		_, _ = gitLocalPath(g.URL)
		d := gitDetail(s, nil)
		if len(d) > gitDetailMax+len("…") {
			t.Fatalf("detail of %d bytes", len(d))
		}
	})
}

// testGitInput is testGit with standard input.
func testGitInput(tb testing.TB, dir string, stdin io.Reader, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gittest.FixtureEnv...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// noise returns n incompressible bytes, the same on every run.
func noise(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{'s', 'k', 'i', 'l', 'l', 'f', 's'}).Read(b)
	return b
}

// zeroReader reads zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// craftRepo is a repository whose trees are written object by object, so
// that it can hold what no working tree could: millions of paths, names git
// itself would refuse to check out, files far larger than the repository.
type craftRepo struct {
	tb  testing.TB
	dir string
}

func newCraftRepo(tb testing.TB) *craftRepo {
	tb.Helper()
	gittest.Require(tb)
	dir := filepath.Join(tb.TempDir(), "craft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	gittest.Git(tb, dir, gittest.FixtureEnv, "init", "--quiet", "--initial-branch=main")
	return &craftRepo{tb: tb, dir: dir}
}

// blob stores the bytes of r and returns their hash.
func (r *craftRepo) blob(rd io.Reader) string {
	r.tb.Helper()
	return testGitInput(r.tb, r.dir, rd, "hash-object", "-w", "--stdin")
}

// craftEntry is one entry of a crafted tree.
type craftEntry struct{ mode, hash, name string }

func file(hash, name string) craftEntry { return craftEntry{"100644", hash, name} }
func tree(hash, name string) craftEntry { return craftEntry{"040000", hash, name} }

// tree stores a tree of entries, with names taken byte for byte.
func (r *craftRepo) tree(entries ...craftEntry) string {
	r.tb.Helper()
	var in bytes.Buffer
	for _, e := range entries {
		typ := "blob"
		if e.mode == "040000" {
			typ = "tree"
		}
		in.WriteString(e.mode + " " + typ + " " + e.hash + "\t" + e.name + "\x00")
	}
	return testGitInput(r.tb, r.dir, &in, "mktree", "-z")
}

// commit commits tree on branch (created or moved) and returns the commit.
func (r *craftRepo) commit(branch, tree string) string {
	r.tb.Helper()
	c := gittest.Git(r.tb, r.dir, gittest.FixtureEnv, "commit-tree", "-m", branch, tree)
	gittest.Git(r.tb, r.dir, gittest.FixtureEnv, "update-ref", "refs/heads/"+branch, c)
	return c
}

// manifest is the hash of a SKILL.md for crafted trees.
func (r *craftRepo) manifest() string {
	return r.blob(strings.NewReader("---\nname: crafted\ndescription: crafted tree\n---\n"))
}

// checkedOut reports whether any logged git command could have written a
// work tree.
func checkedOut(lines []string) bool {
	return gittest.RanSubcommand(lines, "read-tree") || gittest.RanSubcommand(lines, "checkout") || gittest.RanSubcommand(lines, "checkout-index") ||
		gittest.RanSubcommand(lines, "archive")
}

// readModes are the two ways Clone reads a repository on this machine:
// from its objects (git archive), and by cloning it as a remote one is.
var readModes = []struct {
	name     string
	viaClone bool
}{{"archive", false}, {"clone", true}}

// peakSize measures the bytes below dir every few milliseconds until the
// returned function is called, which returns the largest size seen.
func peakSize(dir string) func() int64 {
	var peak atomic.Int64
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := diskBytes(dir, ""); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(quit)
		<-done
		return peak.Load()
	}
}

// wantRefused checks that a Clone error is a refusal that left nothing
// behind and does not name the temporary clone directory.
func wantRefused(t *testing.T, err error, target error, dir string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
	var ge *Error
	if !errors.As(err, &ge) {
		t.Errorf("error %v is not a *GitError", err)
	}
	if strings.Contains(err.Error(), dir) {
		t.Errorf("error %q names the clone directory", err)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("clone directory left behind: %v", serr)
	}
}

func wantLimit(t *testing.T, err error, limit, path string) *skills.LimitError {
	t.Helper()
	var le *skills.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *LimitError", err)
	}
	if le.Limit != limit || le.Path != path {
		t.Fatalf("limit %q at %q (%v), want %q at %q", le.Limit, le.Path, err, limit, path)
	}
	return le
}

// cloneRefused reads the default branch of r within lim, which must be
// refused for limit at path with nothing left behind and no work tree
// written, and returns the limit error, how long the refusal took and the
// most the target directory held meanwhile.
func cloneRefused(t *testing.T, r *craftRepo, lim skills.Limits, viaClone bool, limit, path string) (le *skills.LimitError, took time.Duration, most int64) {
	t.Helper()
	commands := gittest.LogCommands(t)
	dir := filepath.Join(t.TempDir(), "clone")
	peak := peakSize(dir)
	begin := time.Now()
	_, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{Limits: lim, viaClone: viaClone})
	took, most = time.Since(begin), peak()
	t.Logf("refused after %v, clone peaked at %d bytes: %v", took, most, err)
	wantRefused(t, err, skills.ErrLimit, dir)
	le = wantLimit(t, err, limit, path)
	if checkedOut(commands()) {
		t.Errorf("a work tree was written before the refusal:\n%s", strings.Join(commands(), "\n"))
	}
	return le, took, most
}

// A file far larger than its repository is refused from the objects, before
// any of it is written out; the clone on disk stays the size of the pack.
func TestCloneGitRefusesLargeFileBeforeCheckout(t *testing.T) {
	r := newCraftRepo(t)
	const size = 100 << 20
	big := r.blob(io.LimitReader(zeroReader{}, size))
	r.commit("main", r.tree(file(r.manifest(), "SKILL.md"), tree(r.tree(file(big, "zeros.bin")), "assets")))

	tests := []struct {
		name  string
		lim   skills.Limits
		limit string
		path  string
		value int64
	}{
		{"file bytes", skills.Limits{MaxFileBytes: 1 << 20}, skills.LimitFileBytes, "assets/zeros.bin", size},
		{"total bytes", skills.Limits{MaxFileBytes: 1 << 30, MaxTotalBytes: 8 << 20}, skills.LimitTotalBytes, "assets/zeros.bin", -1},
		{"compression ratio", skills.Limits{MaxFileBytes: 1 << 30, MaxTotalBytes: 1 << 30}, skills.LimitCompression, "", -1},
	}
	for _, tc := range tests {
		for _, m := range readModes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				le, _, most := cloneRefused(t, r, tc.lim, m.viaClone, tc.limit, tc.path)
				if tc.value >= 0 && le.Value != tc.value {
					t.Errorf("value %d, want %d", le.Value, tc.value)
				}
				if most > 4<<20 {
					t.Errorf("the clone grew to %d bytes before the refusal", most)
				}
			})
		}
	}
}

// A tree bomb: one small tree referenced ten times by each of five levels,
// 100,000 files in a repository of a few KB. It is refused at the first path
// over the limit, quickly, without anything checked out.
func TestCloneGitRefusesTreeBomb(t *testing.T) {
	r := newCraftRepo(t)
	h, mode := r.blob(strings.NewReader("bomb\n")), "100644"
	for level := 0; level < 4; level++ {
		var es []craftEntry
		for i := 0; i < 10; i++ {
			es = append(es, craftEntry{mode, h, "n" + strconv.Itoa(i)})
		}
		h, mode = r.tree(es...), "040000"
	}
	var es []craftEntry
	for i := 0; i < 10; i++ {
		es = append(es, tree(h, "n"+strconv.Itoa(i)))
	}
	r.commit("main", r.tree(append(es, file(r.manifest(), "SKILL.md"))...))

	tests := []struct {
		name  string
		lim   skills.Limits
		limit string
		path  string
		value int64
	}{
		// SKILL.md sorts first, then 10,000 files below each of n0 and n1.
		{"files", skills.Limits{}, skills.LimitFiles, "n1/n9/n9/n9/n9", 20001},
		// Directories count: SKILL.md, n0, n0/n0, then 111 entries for
		// each of n0/n0/n0 to n0/n0/n7 and 11 for each directory below.
		{"entries", skills.Limits{MaxEntries: 1000}, skills.LimitEntries, "n0/n0/n8/n9/n8", 1001},
	}
	for _, tc := range tests {
		for _, m := range readModes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				le, took, most := cloneRefused(t, r, tc.lim, m.viaClone, tc.limit, tc.path)
				if le.Value != tc.value {
					t.Errorf("value %d, want %d", le.Value, tc.value)
				}
				if took > 10*time.Second {
					t.Errorf("refusal took %v", took)
				}
				if most > 1<<20 {
					t.Errorf("the clone grew to %d bytes before the refusal", most)
				}
			})
		}
	}
}

func TestCloneGitRefusesDepthBomb(t *testing.T) {
	r := newCraftRepo(t)
	h := r.tree(file(r.blob(strings.NewReader("deep\n")), "f"))
	for i := 0; i < 40; i++ {
		h = r.tree(tree(h, "d"))
	}
	r.commit("main", r.tree(tree(h, "d"), file(r.manifest(), "SKILL.md")))

	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			commands := gittest.LogCommands(t)
			dir := filepath.Join(t.TempDir(), "clone")
			_, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{viaClone: m.viaClone})
			wantRefused(t, err, skills.ErrLimit, dir)
			le := wantLimit(t, err, skills.LimitDepth, strings.Repeat("d/", 32)+"d")
			if le.Value != 33 || le.Max != 32 {
				t.Errorf("depth %d > %d, want 33 > 32", le.Value, le.Max)
			}
			if checkedOut(commands()) {
				t.Errorf("a work tree was written before the refusal")
			}
		})
	}
}

// Paths that could not be imported under their name are refused from the
// tree, named as they are in the repository, before git could trip over
// them (or, worse, not) during checkout.
func TestCloneGitRefusesUnsafePaths(t *testing.T) {
	r := newCraftRepo(t)
	m := r.manifest()
	x := r.blob(strings.NewReader("x\n"))
	inDir := func(name string) string { return r.tree(tree(r.tree(file(x, "x")), name), file(m, "SKILL.md")) }
	long := strings.Repeat("n", 300)
	tests := []struct {
		name string
		tree string
		path string // as quoted in the error
	}{
		// Directories are checked before what they hold.
		{"upper-case .GIT directory", inDir(".GIT"), `".GIT"`},
		{".git directory", inDir(".git"), `".git"`},
		{"mixed-case .Git below the root", r.tree(tree(r.tree(tree(r.tree(file(x, "config")), ".Git")), "a"), file(m, "SKILL.md")), `"a/.Git"`},
		{"parent directory", inDir(".."), `".."`},
		{"dot", inDir("."), `"."`},
		{"percent-encoded parent", inDir("%2e%2e"), `"%2e%2e"`},
		{"backslash", r.tree(file(x, `a\b`), file(m, "SKILL.md")), `"a\\b"`},
		{"name over 255 bytes", r.tree(file(x, long), file(m, "SKILL.md")), `"` + long + `"`},
		{"invalid UTF-8", r.tree(file(x, "bad\xffname"), file(m, "SKILL.md")), `"bad\xffname"`},
		{"control character", r.tree(file(x, "bell\a"), file(m, "SKILL.md")), `"bell\a"`},
	}
	for i, tc := range tests {
		for _, m := range readModes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				branch := "case" + strconv.Itoa(i)
				r.commit(branch, tc.tree)
				commands := gittest.LogCommands(t)
				dir := filepath.Join(t.TempDir(), "clone")
				_, err := Clone(context.Background(), Source{URL: r.dir, Ref: branch}, dir, CloneOptions{viaClone: m.viaClone})
				wantRefused(t, err, skills.ErrUnsafePath, dir)
				if !strings.Contains(err.Error(), tc.path) {
					t.Errorf("error %q does not name %s", err, tc.path)
				}
				if checkedOut(commands()) {
					t.Errorf("a work tree was written before the refusal")
				}
			})
		}
	}
}

// A tree far larger than the objects fetched for it (one blob, named many
// times) is refused past the ratio floor; the same blob named fewer times is
// not.
func TestCloneGitCompressionRatio(t *testing.T) {
	r := newCraftRepo(t)
	copied := noise(64 << 10)
	h := r.blob(bytes.NewReader(copied))
	named := func(n int) string {
		es := []craftEntry{file(r.manifest(), "SKILL.md")}
		for i := 0; i < n; i++ {
			es = append(es, file(h, "copy"+strconv.Itoa(i)))
		}
		return r.tree(es...)
	}
	r.commit("few", named(50))    // 3.2 MiB from about 70 KB: ratio under 100
	r.commit("many", named(2000)) // 128 MiB from about 100 KB: ratio over 1000

	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			if _, err := Clone(context.Background(), Source{URL: r.dir, Ref: "few"}, dir, CloneOptions{viaClone: m.viaClone}); err != nil {
				t.Fatalf("50 copies: %v", err)
			}
			if fi, err := os.Stat(filepath.Join(dir, "copy49")); err != nil || fi.Size() != int64(len(copied)) {
				t.Errorf("copy49: %v %v", fi, err)
			}

			dir = filepath.Join(t.TempDir(), "clone")
			_, err := Clone(context.Background(), Source{URL: r.dir, Ref: "many"}, dir, CloneOptions{viaClone: m.viaClone})
			wantRefused(t, err, skills.ErrLimit, dir)
			le := wantLimit(t, err, skills.LimitCompression, "")
			if le.Value <= 200 || le.Max != 200 {
				t.Errorf("ratio %d > %d, want over 200", le.Value, le.Max)
			}
		})
	}
}

// A pack larger than the whole tree may be is refused as it is fetched,
// before the tree is even read. Read from its objects, nothing is fetched:
// the tree is refused, naming the file, before anything is written.
func TestCloneGitRefusesLargeFetch(t *testing.T) {
	r := newCraftRepo(t)
	r.commit("main", r.tree(file(r.manifest(), "SKILL.md"), file(r.blob(bytes.NewReader(noise(4<<20))), "noise.bin")))

	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			commands := gittest.LogCommands(t)
			dir := filepath.Join(t.TempDir(), "clone")
			_, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{Limits: skills.Limits{MaxTotalBytes: 1 << 20}, viaClone: m.viaClone})
			wantRefused(t, err, skills.ErrLimit, dir)
			if !m.viaClone {
				wantLimit(t, err, skills.LimitTotalBytes, "noise.bin")
				if checkedOut(commands()) {
					t.Errorf("the tree was written before the refusal")
				}
				return
			}
			le := wantLimit(t, err, skills.LimitTotalBytes, "") // no path: the fetch, not the tree, was over
			if le.Value <= 1<<20 {
				t.Errorf("value %d, want over %d", le.Value, 1<<20)
			}
			if gittest.RanSubcommand(commands(), "ls-tree") || checkedOut(commands()) {
				t.Errorf("the tree was read or checked out after an oversized fetch")
			}
		})
	}
}

// Checkout can write more than the blobs hold (here end-of-line conversion
// doubles a file of newlines); the tree on disk is still held to the total.
func TestCloneGitRefusesGrowthAtCheckout(t *testing.T) {
	r := newCraftRepo(t)
	attrs := r.blob(strings.NewReader("* text eol=crlf\n"))
	lines := r.blob(strings.NewReader(strings.Repeat("\n", 1<<20)))
	r.commit("main", r.tree(file(attrs, ".gitattributes"), file(r.manifest(), "SKILL.md"), file(lines, "lines.txt")))

	// The blobs add up to just over 1 MiB, within the total; only the
	// checkout (or the archive, which converts as checkout does) is over.
	lim := skills.Limits{MaxTotalBytes: 3 << 19, MaxCompression: 1e9}
	plain := r.blob(strings.NewReader("* -text\n"))
	r.commit("plain", r.tree(file(plain, ".gitattributes"), file(r.manifest(), "SKILL.md"), file(lines, "lines.txt")))
	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			commands := gittest.LogCommands(t)
			dir := filepath.Join(t.TempDir(), "clone")
			_, err := Clone(context.Background(), Source{URL: r.dir, Ref: "main"}, dir, CloneOptions{Limits: lim, viaClone: m.viaClone})
			wantRefused(t, err, skills.ErrLimit, dir)
			writer, path := "archive", "lines.txt" // counted entry by entry
			if m.viaClone {
				writer, path = "read-tree", "" // the checkout on disk, measured
			}
			le := wantLimit(t, err, skills.LimitTotalBytes, path)
			if le.Value <= 3<<19 {
				t.Errorf("value %d, want over %d", le.Value, 3<<19)
			}
			if !gittest.RanSubcommand(commands(), writer) {
				t.Errorf("refused before %s, so this test proves nothing", writer)
			}

			// Without the conversion the same tree is within the limits.
			dir = filepath.Join(t.TempDir(), "clone")
			if _, err := Clone(context.Background(), Source{URL: r.dir, Ref: "plain"}, dir, CloneOptions{Limits: lim, viaClone: m.viaClone}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// watchSize cancels while git would still be running, not only at the end.
func TestWatchSizeCancelsOnGrowth(t *testing.T) {
	dir := t.TempDir()
	over := &skills.LimitError{Limit: skills.LimitTotalBytes, Max: 64 << 10}
	ctx, stop := watchSize(context.Background(), func() int64 { return diskBytes(dir, "") }, 64<<10, func(n int64) error {
		over.Value = n
		return over
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil && i < 1000; i++ {
			os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), make([]byte, 4<<10), 0o644)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	select {
	case <-ctx.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the watch did not cancel a directory growing past its limit")
	}
	<-done
	if cause := context.Cause(ctx); cause != over {
		t.Errorf("cause %v, want the limit error", cause)
	}
	if err := stop(); err != over || over.Value <= 64<<10 {
		t.Errorf("stop() = %v (value %d), want the limit error", err, over.Value)
	}

	// Under the limit nothing is cancelled, and stop measures once more.
	small := t.TempDir()
	ctx, stop = watchSize(context.Background(), func() int64 { return diskBytes(small, "") }, 1<<10, func(n int64) error {
		return &skills.LimitError{Limit: skills.LimitTotalBytes, Value: n, Max: 1 << 10}
	})
	if err := stop(); err != nil || ctx.Err() != context.Canceled {
		t.Errorf("stop() = %v, ctx %v; want nil and a finished context", err, ctx.Err())
	}
	skilltest.WriteFile(t, filepath.Join(small, "x"), make([]byte, 2<<10), 0o644)
	_, stop = watchSize(context.Background(), func() int64 { return diskBytes(small, "") }, 1<<10, func(n int64) error {
		return &skills.LimitError{Limit: skills.LimitTotalBytes, Value: n, Max: 1 << 10}
	})
	if err := stop(); !errors.Is(err, skills.ErrLimit) {
		t.Errorf("stop() on a directory already over = %v, want ErrLimit", err)
	}
}

// A repository within the limits, above the ratio floor, clones as before;
// the tree is listed before it is checked out.
func TestCloneGitWithinLimits(t *testing.T) {
	r := newCraftRepo(t)
	data := noise(2 << 20)
	r.commit("main", r.tree(file(r.manifest(), "SKILL.md"), tree(r.tree(file(r.blob(bytes.NewReader(data)), "noise.bin")), "assets")))
	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			commands := gittest.LogCommands(t)
			dir := filepath.Join(t.TempDir(), "clone")
			if _, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{viaClone: m.viaClone}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, "assets", "noise.bin"))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("assets/noise.bin: %d bytes, %v", len(got), err)
			}
			writer := "archive"
			if m.viaClone {
				writer = "read-tree"
			}
			var list, checkout int
			for i, l := range commands() {
				if gittest.RanSubcommand([]string{l}, "ls-tree") {
					list = i + 1
				}
				if gittest.RanSubcommand([]string{l}, writer) {
					checkout = i + 1
				}
			}
			if list == 0 || checkout == 0 || list > checkout {
				t.Errorf("ls-tree at command %d, %s at %d; want the listing first", list, writer, checkout)
			}
		})
	}
}

// silentGitServer listens on loopback and accepts git:// connections that it
// never answers. Each connection is reported on accepted and, once the peer
// closes it, on closed. Everything is closed when the test ends.
func silentGitServer(t *testing.T) (url string, accepted, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan struct{}, 16)
	cls := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			acc <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(io.Discard, c) // until git is gone or the test ends
				cls <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "git://" + ln.Addr().String() + "/skills.git", acc, cls
}

// processGroupsRunning returns the process groups of live processes whose
// command line holds s, from /proc.
func processGroupsRunning(s string) map[int]bool {
	groups := map[int]bool{}
	ps, _ := liveProcesses()
	for _, p := range ps {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			groups[p.pgrp] = true
		}
	}
	return groups
}

type procInfo struct{ pid, pgrp int }

// liveProcesses lists the processes in /proc that are not zombies: a zombie
// has exited and waits only for its parent, which for a killed group's
// orphans may be an init that never reaps.
func liveProcesses() ([]procInfo, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var ps []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold anything but ends at the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pgrp, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		ps = append(ps, procInfo{pid: pid, pgrp: pgrp})
	}
	return ps, nil
}

// A server that never answers is given up after the clone's timeout, with
// git's whole process group killed and nothing left behind; a deadline of
// the caller's context works the same way.
func TestCloneGitTimeout(t *testing.T) {
	gittest.Require(t)
	if _, err := liveProcesses(); err != nil {
		t.Skipf("cannot list processes: %v", err)
	}
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		timeout time.Duration
		reason  string
	}{
		// The caller's deadline is a backstop here, far beyond the timeout.
		{"own timeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Second)
		}, 2 * time.Second, "timed out after 2s"},
		{"caller's deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, 0, "deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, accepted, closed := silentGitServer(t)
			groups := make(chan map[int]bool, 1)
			go func() {
				select {
				case <-accepted:
					groups <- processGroupsRunning(url)
				case <-time.After(10 * time.Second):
					groups <- nil
				}
			}()
			ctx, cancel := tc.ctx()
			defer cancel()
			dir := filepath.Join(t.TempDir(), "clone")
			begin := time.Now()
			_, err := Clone(ctx, Source{URL: url}, dir, CloneOptions{Timeout: tc.timeout})
			took := time.Since(begin)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want context.DeadlineExceeded", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", err, tc.reason)
			}
			if took > 6*time.Second {
				t.Errorf("CloneGit returned after %v", took)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("target left behind: %v", err)
			}
			select {
			case <-closed:
			case <-time.After(3 * time.Second):
				t.Error("the connection stayed open: git survived the timeout")
			}
			seen := <-groups
			if len(seen) == 0 {
				t.Fatal("found no git process while it waited on the server, so this test proves nothing")
			}
			ps, err := liveProcesses()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if seen[p.pgrp] {
					t.Errorf("process %d of git's group %d still runs", p.pid, p.pgrp)
				}
			}
		})
	}
}

func TestParseLsTreeRecord(t *testing.T) {
	const oid = "45b983be36b73c0788dc9cbcb76cbb80fc7bb057"
	tests := []struct {
		rec  string
		want gitTreeEntry
		ok   bool
	}{
		{"100644 blob " + oid + "       3\tSKILL.md", gitTreeEntry{"100644", "blob", 3, "SKILL.md"}, true},
		{"040000 tree " + oid + "       -\ta/b", gitTreeEntry{"040000", "tree", -1, "a/b"}, true},
		{"160000 commit " + oid + "       -\tvendor/sub", gitTreeEntry{"160000", "commit", -1, "vendor/sub"}, true},
		{"100644 blob " + oid + " 1073741824\tname\twith tab", gitTreeEntry{"100644", "blob", 1 << 30, "name\twith tab"}, true},
		{"100644 blob " + oid + "       3", gitTreeEntry{}, false},
		{"100644 blob " + oid + "      -3\tx", gitTreeEntry{}, false},
		{"100644 blob nothex       3\tx", gitTreeEntry{}, false},
		{"100644 blob " + oid + "\tx", gitTreeEntry{}, false},
	}
	for _, tc := range tests {
		got, err := parseLsTreeRecord([]byte(tc.rec))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseLsTreeRecord(%q) = %+v, %v; want %+v, ok %v", tc.rec, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseLsTreeRecord(f *testing.F) {
	const oid = "45b983be36b73c0788dc9cbcb76cbb80fc7bb057"
	for _, s := range []string{
		"100644 blob " + oid + "       3\tSKILL.md",
		"040000 tree " + oid + "       -\t.GIT",
		"120000 blob " + oid + "      12\ta/../b",
		"160000 commit " + oid + "       -\tvendor/sub",
		"100755 blob " + oid + " 99999999999\tx",
		"100644 blob " + oid + "       3\t\xff",
		"\t", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		e, err := parseLsTreeRecord(rec)
		if err != nil {
			return
		}
		b := skills.NewBudget(skills.Limits{})
		if accountGitEntry(b, e) != nil {
			return
		}
		clean, err := skills.CleanRelPath(e.path)
		if err != nil || clean != e.path {
			t.Fatalf("path %q accepted: %q %v", e.path, clean, err)
		}
		for _, c := range strings.Split(e.path, "/") {
			if strings.EqualFold(c, ".git") || len(c) > gitNameMax {
				t.Fatalf("path %q accepted", e.path)
			}
		}
		if e.typ == "blob" && (e.size < 0 || e.size > b.Limits.MaxFileBytes || b.Bytes != e.size) {
			t.Fatalf("blob of %d bytes accepted, %d counted", e.size, b.Bytes)
		}
	})
}
