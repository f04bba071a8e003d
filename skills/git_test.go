package skills

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// requireGit skips without a git binary, except in CI where it fails.
func requireGit(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("git is required when CI=true: %v", err)
		}
		tb.Skipf("git not installed: %v", err)
	}
	return p
}

// fixtureGitEnv isolates the git commands that build fixtures from the
// machine's configuration and makes their commits reproducible.
var fixtureGitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com", "GIT_AUTHOR_DATE=2024-01-02T03:04:05Z",
	"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z",
}

// testGit runs git in dir for a fixture and returns its trimmed output.
func testGit(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fixtureGitEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeTestFile(tb testing.TB, path string, data []byte, mode os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

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
	requireGit(tb)
	r := fixtureRepo{dir: filepath.Join(tb.TempDir(), "src")}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	testGit(tb, r.dir, "init", "--quiet", "--initial-branch=main")
	writeTestFile(tb, filepath.Join(r.dir, "SKILL.md"), []byte("---\nname: demo\ndescription: first\n---\n# v1\n"), 0o644)
	testGit(tb, r.dir, "add", "-A")
	testGit(tb, r.dir, "commit", "--quiet", "-m", "one")
	r.c1 = testGit(tb, r.dir, "rev-parse", "HEAD")
	testGit(tb, r.dir, "tag", "-a", "v1", "-m", "release one")
	testGit(tb, r.dir, "tag", "clash")

	for i := 0; i < 4096; i++ {
		r.blob = append(r.blob, byte(i*7), 0, 0xff)
	}
	writeTestFile(tb, filepath.Join(r.dir, "SKILL.md"), []byte("---\nname: demo\ndescription: second\n---\n# v2\n"), 0o644)
	writeTestFile(tb, filepath.Join(r.dir, "scripts", "run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	writeTestFile(tb, filepath.Join(r.dir, "assets", "blob.bin"), r.blob, 0o644)
	if err := os.Symlink("SKILL.md", filepath.Join(r.dir, "link")); err != nil {
		tb.Fatal(err)
	}
	testGit(tb, r.dir, "add", "-A")
	testGit(tb, r.dir, "commit", "--quiet", "-m", "two")
	r.c2 = testGit(tb, r.dir, "rev-parse", "HEAD")

	testGit(tb, r.dir, "checkout", "--quiet", "-b", "feature")
	writeTestFile(tb, filepath.Join(r.dir, "feature.txt"), []byte("feature\n"), 0o644)
	testGit(tb, r.dir, "add", "-A")
	testGit(tb, r.dir, "commit", "--quiet", "-m", "three")
	r.c3 = testGit(tb, r.dir, "rev-parse", "HEAD")
	testGit(tb, r.dir, "branch", "clash")
	testGit(tb, r.dir, "checkout", "--quiet", "main")
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
		src     GitSource
		want    string // commit
		present []string
		absent  []string
	}{
		{"default branch", GitSource{URL: r.dir}, r.c2, []string{"scripts/run.sh", "assets/blob.bin"}, []string{"feature.txt"}},
		{"file URL", GitSource{URL: "file://" + r.dir}, r.c2, []string{"scripts/run.sh"}, []string{"feature.txt"}},
		{"HEAD is the default branch", GitSource{URL: r.dir, Ref: "HEAD"}, r.c2, []string{"scripts/run.sh"}, nil},
		{"branch", GitSource{URL: r.dir, Ref: "feature"}, r.c3, []string{"feature.txt"}, nil},
		{"full branch name", GitSource{URL: r.dir, Ref: "refs/heads/feature"}, r.c3, []string{"feature.txt"}, nil},
		{"annotated tag", GitSource{URL: r.dir, Ref: "v1"}, r.c1, []string{"SKILL.md"}, []string{"scripts", "feature.txt"}},
		{"full tag name", GitSource{URL: r.dir, Ref: "refs/tags/v1"}, r.c1, nil, []string{"scripts"}},
		{"branch wins over tag of the same name", GitSource{URL: r.dir, Ref: "clash"}, r.c3, []string{"feature.txt"}, nil},
		{"full tag name beside a branch of the same name", GitSource{URL: r.dir, Ref: "refs/tags/clash"}, r.c1, nil, []string{"scripts"}},
		{"full commit hash", GitSource{URL: r.dir, Ref: r.c1}, r.c1, nil, []string{"scripts"}},
		{"abbreviated commit hash off the default branch", GitSource{URL: r.dir, Ref: r.c3[:10]}, r.c3, []string{"feature.txt"}, nil},
		{"upper-case commit hash", GitSource{URL: r.dir, Ref: strings.ToUpper(r.c2)}, r.c2, []string{"scripts/run.sh"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			got, err := CloneGit(context.Background(), tc.src, dir)
			if err != nil {
				t.Fatalf("CloneGit(%v): %v", tc.src, err)
			}
			if got != tc.want {
				t.Errorf("commit = %s, want %s", got, tc.want)
			}
			for _, p := range tc.present {
				if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
					t.Errorf("%s missing: %v", p, err)
				}
			}
			for _, p := range tc.absent {
				if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s present, want absent (err %v)", p, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf(".git left in the clone (err %v)", err)
			}
		})
	}
}

func testCloneGitContent(t *testing.T, r fixtureRepo) {
	dir := filepath.Join(t.TempDir(), "clone")
	if _, err := CloneGit(context.Background(), GitSource{URL: r.dir}, dir); err != nil {
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
	got, err := CloneGit(context.Background(), GitSource{URL: r.dir, Ref: "feature"}, dir)
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
	testGit(t, empty, "init", "--quiet")
	tests := []struct {
		name string
		src  GitSource
		want error
	}{
		{"missing repository", GitSource{URL: missing}, ErrNotFound},
		{"missing repository with a ref", GitSource{URL: missing, Ref: "main"}, ErrNotFound},
		{"directory that is no repository", GitSource{URL: notRepo}, ErrNotFound},
		{"empty repository", GitSource{URL: empty}, ErrNotFound},
		{"missing branch", GitSource{URL: r.dir, Ref: "no-such-branch"}, ErrNotFound},
		{"missing full commit", GitSource{URL: r.dir, Ref: strings.Repeat("0", 40)}, ErrNotFound},
		{"missing abbreviated commit", GitSource{URL: r.dir, Ref: "deadbeef"}, ErrNotFound},
		{"option as URL", GitSource{URL: "-oProxyCommand=false"}, ErrInvalid},
		{"newline in URL", GitSource{URL: "https://example.com/a\nb"}, ErrInvalid},
		{"empty URL", GitSource{}, ErrInvalid},
		{"option as ref", GitSource{URL: r.dir, Ref: "--upload-pack=false"}, ErrInvalid},
		{"ref with dot-dot", GitSource{URL: r.dir, Ref: "main..feature"}, ErrInvalid},
		{"ref with space", GitSource{URL: r.dir, Ref: "a b"}, ErrInvalid},
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
				commit, err := CloneGit(context.Background(), tc.src, dir)
				if !errors.Is(err, tc.want) {
					t.Fatalf("CloneGit(%v) = %q, %v; want %v", tc.src, commit, err, tc.want)
				}
				var ge *GitError
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
	var ge *GitError
	_, err := CloneGit(context.Background(), GitSource{URL: filepath.Join(t.TempDir(), "nope")}, filepath.Join(t.TempDir(), "a"))
	if !errors.As(err, &ge) || !strings.Contains(ge.Reason, "repository") {
		t.Errorf("missing repository: %v", err)
	}
	_, err = CloneGit(context.Background(), GitSource{URL: r.dir, Ref: "nope"}, filepath.Join(t.TempDir(), "b"))
	if !errors.As(err, &ge) || !strings.Contains(ge.Reason, "ref not found") {
		t.Errorf("missing ref: %v", err)
	}
}

func testCloneGitNonEmptyTarget(t *testing.T, r fixtureRepo) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.txt")
	writeTestFile(t, keep, []byte("mine"), 0o644)
	_, err := CloneGit(context.Background(), GitSource{URL: r.dir}, dir)
	if !errors.Is(err, ErrExists) {
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
	writeTestFile(t, filepath.Join(root, "template", "hooks", "post-checkout"), hook, 0o755)
	writeTestFile(t, filepath.Join(root, "hooks", "post-checkout"), hook, 0o755)
	config := "[core]\n\thooksPath = " + filepath.Join(root, "hooks") + "\n" +
		"[init]\n\ttemplateDir = " + filepath.Join(root, "template") + "\n" +
		"[credential]\n\thelper = \"!f() { echo username=leak; echo password=leaked-secret; }; f\"\n" +
		"[http]\n\textraHeader = X-Leak: leaked-secret\n" +
		"[protocol \"file\"]\n\tallow = always\n"
	writeTestFile(t, filepath.Join(root, "gitconfig"), []byte(config), 0o644)
	writeTestFile(t, filepath.Join(root, "home", ".gitconfig"), []byte(config), 0o644)
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

	for _, ref := range []string{"", "feature", r.c1, r.c3[:8]} {
		dir := filepath.Join(t.TempDir(), "clone")
		if _, err := CloneGit(context.Background(), GitSource{URL: r.dir, Ref: ref}, dir); err != nil {
			t.Fatalf("ref %q: %v", ref, err)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ref %q: a hook ran during CloneGit (marker: %v)", ref, err)
		}
	}
}

// A wrapper that puts its own hooksPath in front of CloneGit's arguments
// shows that CloneGit's own -c core.hooksPath takes effect.
func testCloneGitOverridesHooksPath(t *testing.T, r fixtureRepo) {
	gitBin := requireGit(t)
	root := t.TempDir()
	marker := filepath.Join(root, "hook-ran")
	writeTestFile(t, filepath.Join(root, "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755)
	wrapper := "#!/bin/sh\nexec '" + gitBin + "' -c core.hooksPath='" + filepath.Join(root, "hooks") + "' \"$@\"\n"
	writeTestFile(t, filepath.Join(root, "bin", "git"), []byte(wrapper), 0o755)
	t.Setenv("PATH", filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))

	ctrl := filepath.Join(t.TempDir(), "control")
	if out, err := exec.Command("git", "clone", "--quiet", r.dir, ctrl).CombinedOutput(); err != nil {
		t.Fatalf("control clone: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control clone through the wrapper did not run the hook: %v", err)
	}
	os.Remove(marker)

	if _, err := CloneGit(context.Background(), GitSource{URL: r.dir, Ref: "feature"}, filepath.Join(t.TempDir(), "clone")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hook ran during CloneGit (marker: %v)", err)
	}
}

func TestCloneGitSendsNoCredentials(t *testing.T) {
	requireGit(t)
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
	_, err := CloneGit(context.Background(), GitSource{URL: repoURL}, dir)
	if !errors.Is(err, ErrNotFound) {
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
	_, err = CloneGit(context.Background(), GitSource{URL: secretURL, Ref: "main"}, dir)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for _, leak := range []string{"hunter2-secret", "someone"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q contains %q", err, leak)
		}
	}
}

func TestCloneGitCancel(t *testing.T) {
	requireGit(t)
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
	_, err := CloneGit(ctx, GitSource{URL: srv.URL + "/slow/repo.git"}, dir)
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
	testGit(t, sub, "init", "--quiet")
	writeTestFile(t, filepath.Join(sub, "inner.txt"), []byte("inner"), 0o644)
	testGit(t, sub, "add", "-A")
	testGit(t, sub, "commit", "--quiet", "-m", "sub")
	testGit(t, r.dir, "-c", "protocol.file.allow=always", "submodule", "add", "--quiet", sub, "vendor/sub")
	testGit(t, r.dir, "commit", "--quiet", "-m", "add submodule")

	dir := filepath.Join(t.TempDir(), "clone")
	if _, err := CloneGit(context.Background(), GitSource{URL: r.dir}, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".gitmodules")); err != nil {
		t.Errorf(".gitmodules missing: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "vendor", "sub"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("submodule was cloned: %v", entries)
	}
}

func TestIsGitURL(t *testing.T) {
	requireGit(t)
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	testGit(t, work, "init", "--quiet")
	bare := filepath.Join(root, "bare")
	testGit(t, root, "init", "--quiet", "--bare", bare)
	plain := filepath.Join(root, "plain")
	writeTestFile(t, filepath.Join(plain, "SKILL.md"), []byte("x"), 0o644)
	file := filepath.Join(root, "file.txt")
	writeTestFile(t, file, []byte("x"), 0o644)

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
			if got := IsGitURL(tc.in); got != tc.want {
				t.Errorf("IsGitURL(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseGitSource(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want GitSource
	}{
		{"no ref", "https://example.com/r.git", GitSource{URL: "https://example.com/r.git"}},
		{"branch", "https://example.com/r.git#main", GitSource{URL: "https://example.com/r.git", Ref: "main"}},
		{"slashed branch", "git@host:o/r.git#feature/x", GitSource{URL: "git@host:o/r.git", Ref: "feature/x"}},
		{"commit", "./repo#0123abcd", GitSource{URL: "./repo", Ref: "0123abcd"}},
		{"empty ref", "./repo#", GitSource{URL: "./repo"}},
		{"path with '#' and empty ref", "./a#b#", GitSource{URL: "./a#b"}},
		{"path with '#' and a ref", "./a#b#v1", GitSource{URL: "./a#b", Ref: "v1"}},
		{"spaces trimmed", "  ./repo # v1 ", GitSource{URL: "./repo", Ref: "v1"}},
		{"empty", "", GitSource{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseGitSource(tc.in); got != tc.want {
				t.Errorf("ParseGitSource(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestGitSourceString(t *testing.T) {
	tests := []struct {
		name string
		in   GitSource
		want string
	}{
		{"plain", GitSource{URL: "https://example.com/r.git", Ref: "v1"}, "https://example.com/r.git#v1"},
		{"token as user", GitSource{URL: "https://ghp_token123@github.com/o/r"}, "https://xxxxx@github.com/o/r"},
		{"user and password", GitSource{URL: "https://me:pw@example.com/r.git", Ref: "main"}, "https://xxxxx@example.com/r.git#main"},
		{"ssh user kept", GitSource{URL: "ssh://git@example.com/r.git"}, "ssh://git@example.com/r.git"},
		{"ssh password hidden", GitSource{URL: "ssh://git:pw@example.com/r.git"}, "ssh://git:xxxxx@example.com/r.git"},
		{"scp-like", GitSource{URL: "git@example.com:o/r.git"}, "git@example.com:o/r.git"},
		{"path with '#'", GitSource{URL: "./a#b"}, "./a#b#"},
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
			if back := ParseGitSource(got); back != tc.in {
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
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := ParseGitSource(s)
		if strings.Contains(g.Ref, "#") {
			t.Fatalf("ref %q holds '#'", g.Ref)
		}
		if g.URL != strings.TrimSpace(g.URL) || g.Ref != strings.TrimSpace(g.Ref) {
			t.Fatalf("untrimmed %+v", g)
		}
		if redactGitURL(g.URL) == g.URL {
			if back := ParseGitSource(g.String()); back != g {
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
		if len(gitSecrets(g.URL)) > 0 {
			u, err := url.Parse(redactGitURL(g.URL))
			if err != nil {
				t.Fatalf("redacted URL %q does not parse: %v", redactGitURL(g.URL), err)
			}
			if p, ok := u.User.Password(); ok && p != "xxxxx" {
				t.Fatalf("redacted URL %q keeps password %q", u, p)
			}
		}
		_ = isSCPLike(g.URL)
		_, _ = gitLocalPath(g.URL)
		d := gitDetail(s, nil)
		if len(d) > gitDetailMax+len("…") {
			t.Fatalf("detail of %d bytes", len(d))
		}
	})
}
