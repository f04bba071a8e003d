package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionsWithMissingContent: `skill versions` (and its route) still
// lists every version when an old version's content is gone from the
// store; the diffstat that needed it is replaced by diffstat_error.
func TestVersionsWithMissingContent(t *testing.T) {
	ownIndexOnly(t, "a version missing from a host's store is fetched again from the shared index")
	e := newCatalogEnv(t)
	src := filepath.Join(t.TempDir(), "notes")
	var hashes []string
	for _, body := range []string{"one\n", "two\n", "three\n"} {
		writeSkill(t, src, "name: notes\ndescription: Notes.", map[string]string{"notes.txt": body})
		hashes = append(hashes, e.mustImport(src).Installed[0].Version)
	}
	old := filepath.Join(e.home, "store", "skills", "notes", hashes[0])
	makeWritable(old)
	if err := os.RemoveAll(old); err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Hash     string `json:"hash"`
		DiffStat *struct {
			FilesChanged int `json:"files_changed"`
		} `json:"diffstat"`
		DiffStatError string `json:"diffstat_error"`
	}
	e.okJSON(&vs, "skill", "versions", "notes")
	if len(vs) != 3 || vs[0].DiffStat == nil || vs[0].DiffStat.FilesChanged != 1 || vs[1].DiffStat != nil ||
		!strings.Contains(vs[1].DiffStatError, "missing from the store") || strings.Contains(vs[1].DiffStatError, e.home) {
		t.Fatalf("versions with one missing: %+v", vs)
	}
	if out := e.ok("skill", "versions", "notes"); !strings.Contains(out, "not compared with "+hashes[0][:12]+": the content of version") {
		t.Errorf("versions said:\n%s", out)
	}
	e.serve()
	c := newAPIClient(e.home)
	if code := c.do(t, "GET", "/v1/skills/notes/versions", "", nil, &vs); code != http.StatusOK || len(vs) != 3 || vs[1].DiffStatError == "" {
		t.Errorf("GET versions: %d %+v", code, vs)
	}
	c.conform(t)
}
