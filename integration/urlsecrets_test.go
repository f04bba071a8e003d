package integration

import (
	"bytes"
	"encoding/json"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// TestURLSecretsNeverShown: a password holding '#' (and '?', ':'), and a
// secret query parameter (access_token, private_token, X-Amz-Signature),
// are hidden before the source is split into URL, ref and folder: no
// answer of the CLI or the API, no log line of the daemon and no file of
// the data directory (the index's rows of provenance included) holds a
// part of them. The sources are loopback addresses nothing listens on,
// and a GitHub URL served from a local mirror through insteadOf: the test
// has no network.
func TestURLSecretsNeverShown(t *testing.T) {
	// The parts of the secrets that must never show; each is unique.
	secrets := []string{"pa#ssw0rd-S1", "ssw0rd-S1", "tok3n-S2", "ssh-pw#S3", "ssh-pw", "S1G-S4", "m1rr0r-S5"}
	failing := []struct {
		source, shows string // what an error names instead
	}{
		{"https://user:pa#ssw0rd-S1@127.0.0.1:1/x.git", `"https://xxxxx@127.0.0.1:1/x.git"`},
		{"https://user:pa#ssw0rd-S1@127.0.0.1:1/x.git#main:skills/x", `"https://xxxxx@127.0.0.1:1/x.git" at ref "main"`},
		{"https://127.0.0.1:1/x.git?access_token=tok3n-S2", `"https://127.0.0.1:1/x.git?access_token=xxxxx"`},
		{"https://127.0.0.1:1/x.git?ref=a&private_token=tok3n-S2#main", `"https://127.0.0.1:1/x.git?ref=a&private_token=xxxxx" at ref "main"`},
		{"ssh://git:ssh-pw#S3@127.0.0.1:1/x.git#v1", `"ssh://git:xxxxx@127.0.0.1:1/x.git" at ref "v1"`},
		{"https://127.0.0.1:1/x.zip?X-Amz-Signature=S1G-S4&X-Amz-Date=20250101", `X-Amz-Signature=xxxxx`},
	}
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "skills-repo"))
	writeSkill(t, filepath.Join(repo.dir, "skills", "pub"), "name: pub\ndescription: public skill", nil)
	repo.commit("public")
	repo.git("branch", "-M", "main")
	mirror := filepath.Join(t.TempDir(), "mirror")
	repo.git("clone", "-q", "--bare", repo.dir, filepath.Join(mirror, "acme", "skills.git"))
	const withPassword = "https://bot:m1rr0r-S5#x@github.com/"
	config := filepath.Join(t.TempDir(), "gitconfig")
	skilltest.WriteFile(t, config, []byte("[url \"file://"+mirror+"/\"]\n\tinsteadOf = \""+withPassword+"\"\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")

	// The mirror the rewrite sends the one readable URL to is on this
	// machine: through the API, it is read only inside an import root.
	d := e.serve("--examples=false", "--import-root", mirror)
	e.ok("user", "add", "carol", "--role", "admin")
	api := newHostileAPI(e.home)
	shown := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows %q:\n%s", what, s, text)
			}
		}
	}
	send := func(path, user string, body any) apiAnswer {
		t.Helper()
		b, _ := json.Marshal(body)
		a := api.send(t, "POST", path, user, "application/json", nil, bytes.NewReader(b))
		shown("POST "+path, string(a.body))
		return a
	}

	tried := 0
	for _, f := range failing {
		for _, args := range [][]string{{"skill", "import", f.source}, {"skill", "import", f.source, "--json"}, {"skill", "prepare", f.source},
			{"skill", "import", f.source, "--list"}, {"skill", "curated", "add", f.source}} {
			r := e.run(args...)
			tried++
			shown(strings.Join(args[:2], " "), r.stdout+r.stderr)
			if r.code == 0 {
				t.Errorf("%v: exit 0", args)
			}
			if args[1] == "curated" {
				if r.code != 5 || !strings.Contains(r.stderr, "credentials") {
					t.Errorf("curated add of a source with credentials: exit %d, %s", r.code, r.stderr)
				}
			} else if !strings.Contains(r.stdout+r.stderr, f.shows) {
				t.Errorf("%v: the answer does not name %s:\n%s%s", args, f.shows, r.stdout, r.stderr)
			}
		}
		for _, user := range []string{"", "carol"} {
			tried++
			if a := send("/v1/drafts", user, map[string]string{"source": f.source}); a.status == 200 {
				t.Errorf("draft of %s: %s", f.shows, a)
			} else if !strings.Contains(a.err.Error, f.shows) {
				t.Errorf("draft of a source with credentials: %s, want it named as %s", a, f.shows)
			}
		}
		tried++
		if a := send("/v1/curated", "carol", map[string]string{"source": f.source}); a.status != 400 {
			t.Errorf("POST /v1/curated of a source with credentials: %s, want 400", a)
		}
	}

	// One that is read: the password holds a '#' and the ref and folder
	// follow it; the skill's provenance names the ref and folder, not the
	// password.
	source := withPassword + "acme/skills.git#main:skills"
	a := send("/v1/drafts", "", map[string]string{"source": source})
	var dr struct {
		ID     string `json:"draft"`
		Source string `json:"source"`
	}
	if a.status != 200 || json.Unmarshal(a.body, &dr) != nil || dr.Source != "https://xxxxx@github.com/acme/skills.git#main:skills" {
		t.Fatalf("draft of a URL whose password holds '#': %s", a)
	}
	if a := send("/v1/drafts/"+dr.ID+"/confirm", "", map[string]string{}); a.status != 200 {
		t.Fatalf("confirm: %s", a)
	}
	r := e.run("skill", "import", source, "--json")
	shown("skill import", r.stdout+r.stderr)
	if r.code != 0 {
		t.Errorf("import of a URL whose password holds '#': exit %d %s", r.code, r.stderr)
	}
	var show struct {
		Source   string `json:"source"`
		Versions []struct {
			Source string `json:"source"`
			Ref    string `json:"ref"`
		} `json:"versions"`
	}
	e.okJSON(&show, "skill", "show", "pub")
	if len(show.Versions) == 0 || show.Versions[0].Ref != "main" || !strings.HasPrefix(show.Versions[0].Source, "git:https://xxxxx@github.com/acme/skills.git") {
		t.Errorf("provenance of pub: %+v, want the redacted URL at ref main", show)
	}
	for _, args := range [][]string{{"skill", "show", "pub", "--json"}, {"skill", "versions", "pub", "--json"}, {"skill", "list", "--json"}} {
		r := e.run(args...)
		shown(strings.Join(args, " "), r.stdout+r.stderr)
	}
	d.stop()
	shown("the daemon's log", d.logs())
	// Every file of the data directory: the index (and its WAL), the
	// journal, the store. On PostgreSQL the rows are redacted by the same
	// code before either backend stores them.
	files := 0
	filepath.WalkDir(e.home, func(p string, de iofs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case de.IsDir() && p == filepath.Join(e.home, "mnt"):
			return iofs.SkipDir
		}
		if de.Type().IsRegular() {
			files++
			if b, err := os.ReadFile(p); err == nil {
				shown(p, string(b))
			}
		}
		return nil
	})
	t.Logf("%d failing sources tried %d ways, one read through a mirror; %d files of the data directory read", len(failing), tried, files)
}
