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

// TestSourceCredentials: credentials in a source's URL are never shown or
// logged. A curated source holding them is refused (exit 5 / 400, saying
// why and what to do), since every user lists curated sources. An import
// of such a URL may go ahead, but no answer of the API or the CLI, no
// recorded source and no log line holds the token. (The URL is served
// from a local mirror through insteadOf: tests have no network.)
func TestSourceCredentials(t *testing.T) {
	const token = "TOK3N-SECRET"
	const withToken = "https://bot:" + token + "@github.com/"
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "skills-repo"))
	writeSkill(t, filepath.Join(repo.dir, "pub"), "name: pub\ndescription: public skill", nil)
	repo.commit("public")
	mirror := filepath.Join(t.TempDir(), "mirror")
	repo.git("clone", "-q", "--bare", repo.dir, filepath.Join(mirror, "acme", "skills.git"))
	config := filepath.Join(t.TempDir(), "gitconfig")
	skilltest.WriteFile(t, config, []byte("[url \"file://"+mirror+"/\"]\n\tinsteadOf = "+withToken+"\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")

	d := e.serve("--examples=false", "--import-root", mirror) // the rewrite reads the mirror, here
	e.ok("user", "add", "carol", "--role", "admin")
	api := newHostileAPI(e.home)
	send := func(method, path, user string, body any) apiAnswer {
		t.Helper()
		b, _ := json.Marshal(body)
		a := api.send(t, method, path, user, "application/json", nil, bytes.NewReader(b))
		if bytes.Contains(a.body, []byte(token)) {
			t.Errorf("%s %s: the answer shows the token: %s", method, path, a)
		}
		return a
	}
	noToken := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, token) {
			t.Errorf("%s shows the token:\n%s\n%s", what, r.stdout, r.stderr)
		}
	}

	// Curated: refused, through the CLI and the API, and nothing registered.
	r := e.run("skill", "curated", "add", withToken+"acme/skills.git")
	noToken("curated add", r)
	if r.code != 5 || !strings.Contains(r.stderr, "credentials") || !strings.Contains(r.stderr, "mirror") {
		t.Errorf("curated add of a URL with credentials: exit %d, want 5 saying why and what to do (%s)", r.code, r.stderr)
	}
	if a := send("POST", "/v1/curated", "carol", map[string]string{"source": withToken + "acme/skills.git"}); a.status != 400 || !strings.Contains(a.err.Error, "credentials") {
		t.Errorf("POST /v1/curated with credentials: %s, want 400", a)
	}
	if a := send("GET", "/v1/curated", "", nil); a.status != 200 || strings.TrimSpace(string(a.body)) != "[]" {
		t.Errorf("curated sources after refused adds: %s", a)
	}

	// An import: it works, and the token is nowhere.
	a := send("POST", "/v1/drafts", "", map[string]string{"source": withToken + "acme/skills.git#main"})
	var dr struct {
		ID     string `json:"draft"`
		Source string `json:"source"`
	}
	if a.status != 200 || json.Unmarshal(a.body, &dr) != nil || dr.Source != "https://xxxxx@github.com/acme/skills.git#main" {
		t.Fatalf("draft of a URL with credentials: %s", a)
	}
	if a := send("POST", "/v1/drafts/"+dr.ID+"/confirm", "", map[string]string{}); a.status != 200 {
		t.Fatalf("confirm: %s", a)
	}
	if a := send("POST", "/v1/drafts", "", map[string]string{"source": withToken + "acme/missing.git"}); a.status != 404 {
		t.Errorf("draft of a missing repository: %s, want 404", a)
	}
	r = e.run("skill", "import", withToken+"acme/skills.git", "--json")
	noToken("skill import", r)
	r = e.run("skill", "import", withToken+"acme/nothing.git")
	noToken("skill import of a missing repository", r)
	if r.code == 0 {
		t.Errorf("import of a missing repository succeeded")
	}
	for _, args := range [][]string{{"skill", "show", "pub", "--json"}, {"skill", "versions", "pub", "--json"}, {"skill", "list", "--json"}} {
		r := e.run(args...)
		noToken(strings.Join(args, " "), r)
		if r.code != 0 {
			t.Errorf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
	for _, p := range []string{"/v1/skills", "/v1/skills/pub", "/v1/skills/pub/versions"} {
		if a := send("GET", p, "", nil); a.status != 200 {
			t.Errorf("GET %s: %s", p, a)
		}
	}
	// The rows are redacted before either backend stores them; the SQLite
	// file is what can be read here.
	if !onPostgres() {
		if b, err := os.ReadFile(filepath.Join(e.home, "index.db")); err != nil || bytes.Contains(b, []byte(token)) {
			t.Errorf("the index holds the token (%v)", err)
		}
	}
	d.stop()
	if strings.Contains(d.logs(), token) {
		t.Errorf("the daemon's log shows the token:\n%s", d.logs())
	}
}
