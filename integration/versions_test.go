package integration

import (
	"archive/zip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// versionJSON is one element of `skill versions --json`.
type versionJSON struct {
	Hash     string `json:"hash"`
	Current  bool   `json:"current"`
	Against  string `json:"against"`
	Source   string `json:"source"`
	Ref      string `json:"ref"`
	Commit   string `json:"commit"`
	DiffStat *struct {
		FilesAdded   int `json:"files_added"`
		FilesRemoved int `json:"files_removed"`
		FilesChanged int `json:"files_changed"`
		Insertions   int `json:"insertions"`
		Deletions    int `json:"deletions"`
	} `json:"diffstat"`
}

func (e *env) versions(slug string) []versionJSON {
	e.t.Helper()
	var vs []versionJSON
	e.okJSON(&vs, "skill", "versions", slug)
	return vs
}

// readIn reads a file of a skill in a session's view.
func readIn(t *testing.T, s sessionInfo, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.Path, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s in session %s: %v", rel, s.ID, err)
	}
	return string(data)
}

// TestVersionsDiffRollbackPins: versions list with diffstats, an exact
// diff, a rollback that running sessions see only when they refresh, and a
// slug@version pin that survives refreshes, a new version and a daemon
// restart; export of an older version; the same through the API.
func TestVersionsDiffRollbackPins(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	src := filepath.Join(t.TempDir(), "delta")
	writeSkill(t, src, "name: delta\ndescription: Delta one.", map[string]string{"a.txt": "one\n"})
	v1 := e.mustImport(src, "--share", "global").Installed[0].Version
	writeSkill(t, src, "name: delta\ndescription: Delta two.", map[string]string{"a.txt": "two\n", "b.txt": "bee\n"})
	v2 := e.mustImport(src).Installed[0].Version
	if v1 == v2 {
		t.Fatal("the second import made no new version")
	}

	vs := e.versions("delta")
	if len(vs) != 2 || vs[0].Hash != v2 || !vs[0].Current || vs[1].Hash != v1 || vs[1].Current {
		t.Fatalf("versions: %+v", vs)
	}
	if st := vs[0].DiffStat; vs[0].Against != v1 || st == nil || st.FilesAdded != 1 || st.FilesChanged != 2 || st.FilesRemoved != 0 ||
		st.Insertions != 3 || st.Deletions != 2 {
		t.Errorf("diffstat of v2: against %s, %+v", vs[0].Against, vs[0].DiffStat)
	}
	if vs[1].DiffStat != nil {
		t.Errorf("the first version has a diffstat: %+v", vs[1].DiffStat)
	}

	// The default diff is previous → current, exact.
	got := e.ok("skill", "diff", "delta")
	want := "delta " + v1[:12] + ".." + v2[:12] + ": +1 -0 ~2 files, +3 -2 lines\n" +
		"changed SKILL.md (+1 -1)\n" +
		"changed a.txt (+1 -1)\n" +
		"added   b.txt (+1 -0)\n" +
		"--- a/SKILL.md\n+++ b/SKILL.md\n@@ -1,6 +1,6 @@\n ---\n name: delta\n-description: Delta one.\n+description: Delta two.\n ---\n \n # Instructions\n" +
		"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n" +
		"--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+bee\n"
	if got != want {
		t.Errorf("skill diff:\n%s\nwant:\n%s", got, want)
	}
	if again := e.ok("skill", "diff", "delta", v1[:6], v2[:8]); again != want {
		t.Errorf("skill diff with prefixes differs:\n%s", again)
	}

	// Sessions: one pinned at v1 by a prefix, one following the current.
	pinned := e.newSession("alice", "--skills", "delta@"+strings.ToUpper(v1[:8]))
	follow := e.newSession("alice", "--skills", "delta")
	if readIn(t, pinned, "delta/a.txt") != "one\n" || readIn(t, follow, "delta/a.txt") != "two\n" {
		t.Fatalf("pinned reads %q, following reads %q", readIn(t, pinned, "delta/a.txt"), readIn(t, follow, "delta/a.txt"))
	}
	// An unknown version is reported missing; a bad one is refused.
	unknown := "0000"
	if strings.HasPrefix(v1, unknown) || strings.HasPrefix(v2, unknown) {
		unknown = "ffff"
	}
	var missing struct {
		Readable []string `json:"readable"`
		Skipped  []struct{ Slug, Reason string }
	}
	// Alone it leaves nothing to read: exit 3, naming it.
	if r := e.run("session", "create", "--user", "alice", "--skills", "delta@"+unknown); r.code != 3 || !strings.Contains(r.stderr, "no version "+unknown) {
		t.Errorf("only an unknown version: exit %d, %s", r.code, r.stderr)
	}
	e.okJSON(&missing, "session", "create", "--user", "alice", "--skills", "delta@"+unknown+",release-notes")
	if !slices.Contains(missing.Readable, "release-notes") || slices.Contains(missing.Readable, "delta") || len(missing.Skipped) != 1 || missing.Skipped[0].Slug != "delta" || !strings.Contains(missing.Skipped[0].Reason, "no version "+unknown) {
		t.Errorf("unknown version: %+v", missing)
	}
	if r := e.run("session", "create", "--user", "alice", "--skills", "delta@xyz1"); r.code != 5 {
		t.Errorf("bad version: exit %d, %s", r.code, r.stderr)
	}

	// Rollback: not visible in the running session until it refreshes.
	out := e.ok("skill", "rollback", "delta", v1[:10])
	if !strings.Contains(out, "rolled back to "+v1[:12]) {
		t.Errorf("rollback said %q", out)
	}
	if vs := e.versions("delta"); !vs[1].Current || vs[0].Current {
		t.Errorf("after rollback: %+v", vs)
	}
	if got := readIn(t, follow, "delta/a.txt"); got != "two\n" {
		t.Errorf("a running session sees the rollback before refresh: %q", got)
	}
	e.ok("session", "refresh", follow.ID)
	if got := readIn(t, follow, "delta/a.txt"); got != "one\n" {
		t.Errorf("after refresh: %q, want the rolled-back %q", got, "one\n")
	}
	if !strings.Contains(readIn(t, follow, "delta/SKILL.md"), "Delta one.") {
		t.Error("SKILL.md after the rollback is not v1's")
	}

	// A third version: the pinned session stays at v1 across refresh and
	// a restart, the other moves.
	writeSkill(t, src, "name: delta\ndescription: Delta three.", map[string]string{"a.txt": "three\n"})
	e.mustImport(src)
	var info sessionInfo
	e.okJSON(&info, "session", "refresh", pinned.ID)
	e.ok("session", "refresh", follow.ID)
	if readIn(t, pinned, "delta/a.txt") != "one\n" || readIn(t, follow, "delta/a.txt") != "three\n" {
		t.Errorf("after refresh: pinned %q, following %q", readIn(t, pinned, "delta/a.txt"), readIn(t, follow, "delta/a.txt"))
	}
	d.stop()
	e.serve()
	if got := readIn(t, pinned, "delta/a.txt"); got != "one\n" {
		t.Errorf("pinned session after restart: %q", got)
	}
	e.ok("session", "refresh", pinned.ID)
	if got := readIn(t, pinned, "delta/a.txt"); got != "one\n" {
		t.Errorf("pinned session after restart and refresh: %q", got)
	}
	var shown struct {
		Pinned []string `json:"pinned"`
	}
	e.okJSON(&shown, "session", "show", pinned.ID)
	if len(shown.Pinned) != 1 || shown.Pinned[0] != "delta@"+v1 {
		t.Errorf("pinned = %v", shown.Pinned)
	}

	// session set: an asked-for version moves a kept skill to it; without
	// one, a kept skill keeps its version (a set is not a refresh), and the
	// pin is dropped from the list, so the next refresh moves it.
	e.ok("session", "set", follow.ID, "--skills", "delta@"+v2[:8])
	if got := readIn(t, follow, "delta/a.txt"); got != "two\n" {
		t.Errorf("after session set delta@v2: %q", got)
	}
	e.ok("session", "set", follow.ID, "--skills", "delta")
	if got := readIn(t, follow, "delta/a.txt"); got != "two\n" {
		t.Errorf("after session set delta: %q, want the kept version", got)
	}
	e.ok("session", "refresh", follow.ID)
	if got := readIn(t, follow, "delta/a.txt"); got != "three\n" {
		t.Errorf("refresh after the pin was dropped: %q", got)
	}

	// Export of an older version.
	zp := filepath.Join(t.TempDir(), "v2.zip")
	e.ok("skill", "export", "delta", "--version", v2[:7], "-o", zp)
	if got := zipFile(t, zp, "delta/a.txt"); got != "two\n" {
		t.Errorf("export --version: a.txt = %q", got)
	}
	if r := e.run("skill", "export", "delta", "--version", unknown); r.code != 3 {
		t.Errorf("export of an unknown version: exit %d", r.code)
	}

	// The API: versions, diff, rollback, export, all against the contract.
	c := newAPIClient(e.home)
	var avs []versionJSON
	if code := c.do(t, "GET", "/v1/skills/delta/versions", "", nil, &avs); code != http.StatusOK || len(avs) != 3 || !avs[0].Current {
		t.Errorf("GET versions: %d %+v", code, avs)
	}
	var df struct {
		From, To string
		Files    []struct{ Path, Status, Diff string }
	}
	if code := c.do(t, "GET", "/v1/skills/delta/diff?a="+v1[:8]+"&b="+v2[:8], "", nil, &df); code != http.StatusOK || df.From != v1 || df.To != v2 || len(df.Files) != 3 ||
		df.Files[1].Diff != "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n" {
		t.Errorf("GET diff: %d %+v", code, df)
	}
	var rb struct{ Version, Previous string }
	if code := c.do(t, "POST", "/v1/skills/delta/rollback", "", map[string]string{"version": v2[:8]}, &rb); code != http.StatusOK || rb.Version != v2 {
		t.Errorf("POST rollback: %d %+v", code, rb)
	}
	if code := c.do(t, "POST", "/v1/skills/delta/rollback", "alice", map[string]string{"version": v1[:8]}, nil); code != http.StatusForbidden {
		t.Errorf("rollback by a reader: %d, want 403", code)
	}
	if code := c.do(t, "POST", "/v1/skills/delta/rollback", "", map[string]string{"version": "zz"}, nil); code != http.StatusBadRequest {
		t.Errorf("rollback to a bad version: %d, want 400", code)
	}
	if code := c.do(t, "GET", "/v1/skills/delta/export?version="+unknown, "", nil, nil); code != http.StatusNotFound {
		t.Errorf("export of an unknown version: %d", code)
	}
	c.conform(t)
	if e.versions("delta")[0].Current != false || !e.versions("delta")[1].Current {
		t.Errorf("after the API rollback to v2: %+v", e.versions("delta"))
	}
}

func zipFile(t *testing.T, zp, name string) string {
	t.Helper()
	zr, err := zip.OpenReader(zp)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, _ := io.ReadAll(rc)
			return string(b)
		}
	}
	t.Fatalf("%s holds no %s", zp, name)
	return ""
}
