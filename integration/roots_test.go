package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// leaks fails the test when an answer holds any of the secrets, or a line
// of /etc/shadow.
func leaks(t testing.TB, what string, answer []byte, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && bytes.Contains(answer, []byte(s)) {
			t.Errorf("%s: the answer holds %q: %s", what, s, answer)
		}
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	for _, line := range strings.Split(string(shadow), "\n") {
		if name, rest, _ := strings.Cut(line, ":"); name != "" && len(rest) > 2 && bytes.Contains(answer, []byte(line)) {
			t.Errorf("%s: the answer holds a line of /etc/shadow", what)
		}
	}
}

// TestAPIReadsOnlyInsideImportRoots: through the API an
// admin and a superadmin, named with X-Skillfs-As, draft /etc/shadow,
// /proc/self/environ (the daemon's environment, holding a secret here), a
// link in an import root that leads out of it, and the same paths missing:
// each is refused with 403, one answer for existing and missing paths, and
// no byte of any of them in it. A folder in the root is drafted. An
// ordinary user reads no local path, root or not.
func TestAPIReadsOnlyInsideImportRoots(t *testing.T) {
	const envSecret = "ENVIRON-SECRET-5b7f"
	t.Setenv("SKILLFS_TEST_SECRET", envSecret) // in the daemon's /proc/self/environ
	e := newCatalogEnv(t)
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "out")
	writeSkill(t, filepath.Join(root, "pdf"), "name: pdf\ndescription: inside the root", nil)
	writeSkill(t, out, "name: secret\ndescription: OUTSIDE-SECRET", nil)
	if err := os.Symlink(out, filepath.Join(root, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	e.serve("--examples=false", "--import-root", root)
	e.ok("user", "add", "alice")
	e.ok("user", "add", "carol", "--role", "admin")
	e.ok("user", "add", "sam", "--role", "superadmin")
	api := newHostileAPI(e.home)
	send := func(method, path, user string, body any) apiAnswer {
		t.Helper()
		b, _ := json.Marshal(body)
		a := api.send(t, method, path, user, "application/json", nil, bytes.NewReader(b))
		leaks(t, user+" "+method+" "+path, a.body, envSecret, "OUTSIDE-SECRET")
		return a
	}
	outside := []string{
		"/etc/shadow", "/etc/no-such-file",
		"/proc/self/environ", "/proc/self/no-such", "/proc/self/root/etc/shadow",
		"/etc/shadow#main", "file:///etc/shadow", "file:///proc/self/environ#main",
		filepath.Join(root, "link-out"), filepath.Join(root, "link-out", "SKILL.md"), filepath.Join(root, "link-out", "no-such"),
		filepath.Join(root, "etc", "shadow"), filepath.Join(root, "etc", "no-such"),
	}
	tried, refused := 0, 0
	for _, user := range []string{"carol", "sam", "operator", ""} {
		var first string
		for _, src := range outside {
			tried++
			a := send("POST", "/v1/drafts", user, map[string]string{"source": src})
			if a.status != 403 || a.err.Code != "permission" || !strings.Contains(a.err.Error, "import root") {
				t.Errorf("%q drafts %s: %s, want 403 naming the import roots", user, src, a)
				continue
			}
			refused++
			msg := strings.Replace(a.err.Error, src, "SOURCE", 1)
			if first == "" {
				first = msg
			} else if msg != first {
				t.Errorf("%q drafts %s: %q, unlike the others' %q: the answer tells paths apart", user, src, msg, first)
			}
		}
		if a := send("POST", "/v1/drafts", user, map[string]string{"source": filepath.Join(root, "pdf")}); a.status != 200 || !bytes.Contains(a.body, []byte("inside the root")) {
			t.Errorf("%q drafts a folder in the import root: %s", user, a)
		}
	}
	for _, src := range append(outside, filepath.Join(root, "pdf")) {
		tried++
		if a := send("POST", "/v1/drafts", "alice", map[string]string{"source": src}); a.status != 403 || !strings.Contains(a.err.Error, "admins only") {
			t.Errorf("alice drafts %s: %s, want 403", src, a)
			continue
		}
		refused++
	}
	// A curated source added through the API: the same rule.
	for _, src := range []string{"/etc", out, filepath.Join(root, "link-out")} {
		tried++
		if a := send("POST", "/v1/curated", "carol", map[string]string{"source": src}); a.status != 403 {
			t.Errorf("carol adds %s as curated: %s, want 403", src, a)
			continue
		}
		refused++
	}
	if ents, _ := os.ReadDir(filepath.Join(e.home, "drafts")); len(ents) != 4 {
		t.Errorf("%d drafts, want the 4 of the folder in the root", len(ents))
	}
	if a := send("GET", "/v1/curated", "", nil); strings.TrimSpace(string(a.body)) != "[]" {
		t.Errorf("curated sources after refused adds: %s", a)
	}
	t.Logf("local paths through the API: %d tried by an admin, two superadmins and a user, %d refused with 403 (one answer for existing and missing paths, no byte of them); 4 drafts of a folder in the import root made", tried, refused)
}

// TestImportRootRefusedAtStart: /proc, /sys, /dev, a
// folder in them, or a link to one, given as an import root on the command
// line, in the configuration file or in $SKILLFS_IMPORT_ROOTS, stops serve
// with exit 2 naming it, before the data directory is touched; so does a
// root that does not exist or is not a folder.
func TestImportRootRefusedAtStart(t *testing.T) {
	e := newCatalogEnv(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "proc-link")
	if err := os.Symlink("/proc/self", link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	skilltest.WriteFile(t, file, []byte("x"), 0o644)
	// A token file that does not exist: should a root pass, serve stops
	// right after with another message (exit 3), instead of serving.
	noToken := filepath.Join(dir, "no-token")
	type start struct {
		name string
		args []string
		env  []string
		bad  string
	}
	var starts []start
	for _, bad := range []string{"/proc", "/proc/self/cwd", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm", link, filepath.Join(dir, "missing"), file} {
		starts = append(starts, start{"--import-root " + bad, []string{"--import-root", dir, "--import-root", bad}, nil, bad})
	}
	config := filepath.Join(dir, "skillfs.yaml")
	skilltest.WriteFile(t, config, []byte("import-root:\n  - "+dir+"\n  - /proc\n"), 0o644)
	starts = append(starts,
		start{"import-root in the file", []string{"--config", config}, nil, "/proc"},
		start{"$SKILLFS_IMPORT_ROOTS", nil, []string{"SKILLFS_IMPORT_ROOTS=" + dir + ":/proc/1"}, "/proc/1"})
	for _, s := range starts {
		r, took := e.runBoundedEnv(20*time.Second, s.env, append(append([]string{"serve"}, s.args...), "--listen", "127.0.0.1:0", "--token-file", noToken)...)
		if r.code != 2 || !strings.Contains(r.stderr, `"`+s.bad+`"`) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("serve %s: exit %d in %v\n%s%s", s.name, r.code, took, r.stdout, r.stderr)
		}
		if _, err := os.Stat(e.home); !os.IsNotExist(err) {
			t.Fatalf("serve %s touched the data directory: %v", s.name, err)
		}
	}
	t.Logf("import roots refused at start: %d (flag, file, environment), each exit 2 naming it, the data directory untouched", len(starts))
}

// TestUpdateChecksTheSourceAsADraft: through the API an
// update reads what a draft of its source may read today, no more.
// (a) A skill alice installed from https://gitlab.com/... while git's
// rewrite sent it to a remote (a git server on loopback) is not updated
// once the operator points the rewrite at a folder of this machine: not
// at the recorded ref, not at a branch she names ({"ref":"secretbranch"}),
// not for an admin while no import root holds the folder, as a draft of
// the URL is 403. (b) A skill she installed from the operator's local
// curated source is updated at its curated ref only: a ref or tag of an
// uncurated branch is 403, as her draft of that source is. Each refusal
// is 403, holds nothing of the branch or of where the rewrite leads, and
// leaves the skill as it was.
func TestUpdateChecksTheSourceAsADraft(t *testing.T) {
	e := newCatalogEnv(t)
	remote, local := t.TempDir(), t.TempDir()
	work := newGitRepo(t, filepath.Join(t.TempDir(), "work"))
	writeSkill(t, work.dir, "name: notes\ndescription: from the remote", nil)
	work.commit("remote")
	work.git("clone", "-q", "--bare", work.dir, filepath.Join(remote, "team", "skills.git"))
	work.git("clone", "-q", "--bare", work.dir, filepath.Join(local, "team", "skills.git"))
	work.git("checkout", "-q", "-b", "secretbranch")
	writeSkill(t, work.dir, "name: notes\ndescription: LOCAL-SECRET", nil)
	work.commit("secret")
	work.git("push", "-q", filepath.Join(local, "team", "skills.git"), "secretbranch")
	config := filepath.Join(t.TempDir(), "gitconfig")
	rewrite := func(base string) {
		skilltest.WriteFile(t, config, []byte("[url \""+base+"\"]\n\tinsteadOf = https://gitlab.com/\n"), 0o644)
	}
	rewrite(gittest.Serve(t, remote))
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")

	// (b)'s source: the operator's local repository, curated at main.
	curated := newGitRepo(t, filepath.Join(t.TempDir(), "curated"))
	writeSkill(t, filepath.Join(curated.dir, "pdf"), "name: pdf\ndescription: curated", nil)
	curated.commit("curated")
	curated.git("tag", "v1")
	curated.git("checkout", "-q", "-b", "secretbranch")
	writeSkill(t, filepath.Join(curated.dir, "pdf"), "name: pdf\ndescription: UNCURATED-SECRET", nil)
	curated.commit("not curated")
	curated.git("tag", "v2")
	curated.git("checkout", "-q", "main")

	e.serve("--examples=false")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "carol", "--role", "admin")
	e.ok("skill", "curated", "add", curated.dir, "--ref", "main")
	api := newHostileAPI(e.home)
	send := func(method, path, user string, body any) apiAnswer {
		t.Helper()
		b, _ := json.Marshal(body)
		a := api.send(t, method, path, user, "application/json", nil, bytes.NewReader(b))
		leaks(t, user+" "+method+" "+path, a.body, "LOCAL-SECRET", "UNCURATED-SECRET", local)
		return a
	}
	const url = "https://gitlab.com/team/skills.git"
	a := send("POST", "/v1/drafts", "alice", map[string]string{"source": url})
	var dr struct {
		ID string `json:"draft"`
	}
	if a.status != 200 || json.Unmarshal(a.body, &dr) != nil {
		t.Fatalf("alice drafts %s, read from the remote: %s", url, a)
	}
	if a := send("POST", "/v1/drafts/"+dr.ID+"/confirm", "alice", map[string]string{}); a.status != 200 {
		t.Fatalf("confirm: %s", a)
	}
	if a := send("POST", "/v1/curated/install", "alice", map[string]string{"name": "pdf"}); a.status != 200 {
		t.Fatalf("alice installs the curated pdf: %s", a)
	}
	before := map[string]string{"notes": e.show("notes").Version, "pdf": e.show("pdf").Version}

	rewrite("file://" + local + "/") // the operator points the rewrite here
	tried, refused := 0, 0
	refuse := func(what, user, path string, body any, why string) {
		t.Helper()
		tried++
		a := send("POST", path, user, body)
		if a.status != 403 || a.err.Code != "permission" || !strings.Contains(a.err.Error, why) {
			t.Errorf("%s: %s, want 403 (%s)", what, a, why)
			return
		}
		refused++
	}
	refuse("(a) alice drafts the URL now rewritten here", "alice", "/v1/drafts", map[string]string{"source": url}, "admins only")
	refuse("(a) alice updates notes at secretbranch", "alice", "/v1/skills/notes/update", map[string]string{"ref": "secretbranch"}, "admins only")
	refuse("(a) alice updates notes", "alice", "/v1/skills/notes/update", map[string]string{}, "admins only")
	refuse("(a) alice updates notes, dry run", "alice", "/v1/skills/notes/update", map[string]any{"dry_run": true}, "admins only")
	refuse("(a) alice updates notes by the list route", "alice", "/v1/skills/update", map[string]any{"skills": []string{"notes"}, "ref": "secretbranch"}, "admins only")
	refuse("(a) carol, an admin, updates notes at secretbranch", "carol", "/v1/skills/notes/update", map[string]string{"ref": "secretbranch"}, "--import-root")
	refuse("(b) alice drafts the curated source", "alice", "/v1/drafts", map[string]string{"source": curated.dir}, "admins only")
	refuse("(b) alice updates pdf at secretbranch", "alice", "/v1/skills/pdf/update", map[string]string{"ref": "secretbranch"}, "admins only")
	refuse("(b) alice updates pdf at tag v2", "alice", "/v1/skills/pdf/update", map[string]string{"tag": "v2"}, "admins only")
	a = send("POST", "/v1/skills/update", "alice", map[string]any{"all": true, "ref": "secretbranch"})
	var all updateJSON
	tried++
	if json.Unmarshal(a.body, &all) != nil || a.status != 200 || len(all.Skills) != 2 || all.Skills[0].Status != "failed" || all.Skills[1].Status != "failed" {
		t.Errorf("alice updates all at secretbranch: %s, want each failed", a)
	} else {
		refused++
	}
	for slug, v := range before {
		if got := e.show(slug); got.Version != v || len(got.Versions) != 1 || strings.Contains(got.Description, "SECRET") {
			t.Errorf("%s after the refused updates: %s %q (%d versions), want %s unchanged", slug, got.Version, got.Description, len(got.Versions), v)
		}
	}
	// (b) at the curated ref: read, nothing new.
	a = send("POST", "/v1/skills/pdf/update", "alice", map[string]string{})
	var u updateJSON
	if json.Unmarshal(a.body, &u) != nil || a.status != 200 || len(u.Skills) != 1 || u.Skills[0].Status != "unchanged" || u.Skills[0].Ref != "main" {
		t.Errorf("alice updates pdf at its curated ref: %s", a)
	}
	t.Logf("updates through the API of a rewritten and of a curated source: %d tried, %d refused as a draft is (403, or failed for --all), skills unchanged; the curated ref still read", tried, refused)
}
