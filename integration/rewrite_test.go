package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// TestRewriteEscape: with git configured to read https://github.com/ from
// a mirror folder (url.<base>.insteadOf), an ordinary user's draft of a
// GitHub URL is a read of that folder on the daemon's machine, refused as
// any local source is; "../" in the URL (as written or percent-encoded)
// never walks out of the mirror to another repository of the machine, for
// anyone. Nothing is cloned: no draft, nothing of the private repository
// in any answer. An admin may still read the mirror.
func TestRewriteEscape(t *testing.T) {
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "skills-repo"))
	writeSkill(t, filepath.Join(repo.dir, "pub"), "name: pub\ndescription: public skill", nil)
	repo.commit("public")
	githubMirror(t, repo, "acme/skills")
	mirror := strings.TrimSuffix(strings.TrimSuffix(mirrorOf(t, "acme/skills"), "acme/skills.git"), "/")

	// Another team's repository next to the mirror.
	private := newGitRepo(t, filepath.Join(t.TempDir(), "private-work"))
	writeSkill(t, private.dir, "name: private\ndescription: TEAM-B-SECRET", nil)
	private.commit("secret")
	private.git("clone", "-q", "--bare", private.dir, filepath.Join(filepath.Dir(mirror), "team-b", "private.git"))

	e.serve("--examples=false", "--import-root", mirror) // an admin may read the mirror, not the rest of the machine
	e.ok("user", "add", "alice")
	e.ok("user", "add", "carol", "--role", "admin")
	api := newHostileAPI(e.home)
	draft := func(user, source string) apiAnswer {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"source": source})
		a := api.send(t, "POST", "/v1/drafts", user, "application/json", nil, bytes.NewReader(body))
		if bytes.Contains(a.body, []byte("TEAM-B-SECRET")) || bytes.Contains(a.body, []byte(mirror)) {
			t.Errorf("%s drafts %s: the answer shows the private repository or the mirror's folder: %s", user, source, a)
		}
		return a
	}
	for _, src := range []string{
		"https://github.com/../team-b/private.git",
		"https://github.com/acme/../../team-b/private.git",
		"https://github.com/%2e%2e/team-b/private.git",
		"https://github.com/%2E%2e/team-b/private.git",
		"https://github.com/acme/%252e%252E/%2e%2e/team-b/private.git#main",
	} {
		for _, user := range []string{"alice", "carol"} {
			if a := draft(user, src); a.status != 400 || a.err.Code != "invalid" || !strings.Contains(a.err.Error, "segment") {
				t.Errorf("%s drafts %s: %s, want 400 naming the path segment", user, src, a)
			}
		}
	}
	// A GitHub URL or name that the rewrite sends to a folder of this
	// machine: a local read, for admins only.
	for _, src := range []string{"https://github.com/acme/skills.git", "acme/skills", "github:acme/skills#main"} {
		if a := draft("alice", src); a.status != 403 || !strings.Contains(a.err.Error, "admins only") {
			t.Errorf("alice drafts %s: %s, want 403", src, a)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(e.home, "drafts")); len(ents) != 0 {
		t.Fatalf("refused drafts left %d drafts", len(ents))
	}
	if a := draft("carol", "acme/skills"); a.status != 200 || !bytes.Contains(a.body, []byte("public skill")) {
		t.Fatalf("carol, an admin, drafts the mirrored repository: %s", a)
	}
}

// TestAPISourcesHaveNoWorkingDirectory: through the API, a name shaped like
// owner/repo is that repository even when a folder of that name exists
// where the daemon runs, so an ordinary user's answer never tells whether
// a path exists there, and an admin's read is the repository, not the
// folder. Only an absolute path names a path; other relative paths are
// refused. (github.com is a closed local port here: no network.)
func TestAPISourcesHaveNoWorkingDirectory(t *testing.T) {
	e := newCatalogEnv(t)
	cwd := t.TempDir()
	writeSkill(t, filepath.Join(cwd, "home", "alice"), "name: local\ndescription: LOCAL-FOLDER", nil)
	config := filepath.Join(t.TempDir(), "gitconfig")
	skilltest.WriteFile(t, config, []byte("[url \"https://127.0.0.1:1/\"]\n\tinsteadOf = https://github.com/\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Chdir(cwd) // the daemon runs here
	e.serve("--examples=false", "--import-root", cwd)
	e.ok("user", "add", "alice")
	api := newHostileAPI(e.home)
	draft := func(user, source string) apiAnswer {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"source": source})
		a := api.send(t, "POST", "/v1/drafts", user, "application/json", nil, bytes.NewReader(body))
		if bytes.Contains(a.body, []byte("LOCAL-FOLDER")) {
			t.Errorf("%s drafts %s: read the folder of the daemon's working directory: %s", user, source, a)
		}
		return a
	}
	for _, user := range []string{"alice", ""} {
		there, missing := draft(user, "home/alice"), draft(user, "home/nobody")
		if there.status != 404 || missing.status != 404 {
			t.Errorf("%q drafts home/alice (a folder where the daemon runs) and home/nobody: %d and %d, want the repositories, both 404", user, there.status, missing.status)
		}
	}
	for _, src := range []string{"./home/alice", "home/alice.zip", "alice"} {
		if a := draft("", src); a.status != 400 || !strings.Contains(a.err.Error, "absolute") {
			t.Errorf("the operator drafts %s: %s, want 400 asking for an absolute path", src, a)
		}
		if a := draft("alice", src); a.status != 403 {
			t.Errorf("alice drafts %s: %s, want 403", src, a)
		}
	}
	abs := filepath.Join(cwd, "home", "alice")
	body, _ := json.Marshal(map[string]string{"source": abs})
	if a := api.send(t, "POST", "/v1/drafts", "", "application/json", nil, bytes.NewReader(body)); a.status != 200 || !bytes.Contains(a.body, []byte("LOCAL-FOLDER")) {
		t.Errorf("the operator drafts the folder by its absolute path: %s", a)
	}
}
