package integration

import (
	"bytes"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/fs/fusetest"
	"skillfs/index/pgtest"
)

// fleetHost is one host of a fleet: a data directory whose daemon serves
// from the index all hosts share (its env's index).
type fleetHost struct {
	*env
	d *daemon
}

// newFleetOf starts n hosts, one after the other, on one shared index: a
// SQLite file, or with SKILLFS_TEST_INDEX=postgres a PostgreSQL database.
// Each host has its own data directory and mount root.
func newFleetOf(t *testing.T, n int) []*fleetHost {
	t.Helper()
	fusetest.Require(t)
	index := filepath.Join(t.TempDir(), "fleet.db")
	if onPostgres() {
		index = pgtest.Database(t)
	}
	hosts := make([]*fleetHost, n)
	for i := range hosts {
		h := &fleetHost{env: &env{t: t, home: filepath.Join(t.TempDir(), "home"), index: index}}
		h.d = h.serve()
		hosts[i] = h
	}
	return hosts
}

// versionFiles lists the content of a version directory (as a session
// shows it: bookkeeping files left out), path to mode and bytes.
func versionFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		if strings.HasPrefix(d.Name(), ".skillfs") {
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		desc := "dir"
		if !fi.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc = fi.Mode().Perm().String()[1:4] + " " + string(data)
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFleetServesContentPublishedElsewhere: two daemons, two data
// directories and mount roots, one shared index. A skill imported on host
// A, with a file over the index's chunk size, an executable and an empty
// folder, is read through a session of host B byte for byte: B fetched it
// from the index when the session was created, and keeps it in its store.
// The bundled skills A registered are served by B too.
func TestFleetServesContentPublishedElsewhere(t *testing.T) {
	hosts := newFleetOf(t, 2)
	a, b := hosts[0], hosts[1]
	src := filepath.Join(t.TempDir(), "fleet-notes")
	big := make([]byte, 2<<20+321)
	rand.Read(big)
	writeSkill(t, src, "name: fleet-notes\ndescription: written on one host, read on another", map[string]string{
		"scripts/run.sh":      "#!/bin/sh\necho fleet\n",
		"references/guide.md": "# Guide\n",
		"assets/big.bin":      string(big),
	})
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	var imported struct {
		Installed []struct {
			Slug    string `json:"slug"`
			Version string `json:"version"`
		} `json:"installed"`
	}
	a.okJSON(&imported, "skill", "import", src, "--share", "global")
	if len(imported.Installed) != 1 {
		t.Fatalf("import on host A: %+v", imported)
	}
	hash := imported.Installed[0].Version
	inB := filepath.Join(b.home, "store", "skills", "fleet-notes", hash)
	if _, err := os.Lstat(inB); err == nil {
		t.Fatal("host B holds the version before any session asked for it")
	}

	b.ok("user", "add", "alice")
	var s struct {
		ID       string   `json:"id"`
		Path     string   `json:"path"`
		Readable []string `json:"readable"`
		Skipped  []any    `json:"skipped"`
	}
	b.okJSON(&s, "session", "create", "--user", "alice", "--skills", "fleet-notes,release-notes")
	if len(s.Skipped) != 0 || !strings.HasPrefix(s.Path, b.d.mount) {
		t.Fatalf("session on host B: %+v (mount %s)", s, b.d.mount)
	}
	want := versionFiles(t, filepath.Join(a.home, "store", "skills", "fleet-notes", hash))
	got := versionFiles(t, filepath.Join(s.Path, "fleet-notes"))
	if len(got) != len(want) {
		t.Errorf("host B shows %d entries, host A's version holds %d", len(got), len(want))
	}
	for rel, w := range want {
		if got[rel] != w {
			t.Errorf("%s through host B's mount differs from host A's version (%d bytes, want %d)", rel, len(got[rel]), len(w))
		}
	}
	if g := got["assets/big.bin"]; !bytes.Equal([]byte(g[4:]), big) {
		t.Error("the big file read through host B is not the one imported on host A")
	}
	if _, err := os.Lstat(inB); err != nil {
		t.Errorf("host B did not keep the version it fetched: %v", err)
	}
	if rn := versionFiles(t, filepath.Join(s.Path, "release-notes")); rn["SKILL.md"] == "" {
		t.Error("a bundled skill is not served by host B")
	}
	if !strings.Contains(b.d.logs(), "version fetched from the shared index") {
		t.Errorf("host B's log does not say it fetched the version:\n%s", b.d.logs())
	}

	// Each host's check sees its own cache, the shared index sound.
	for name, h := range map[string]*fleetHost{"A": a, "B": b} {
		out := h.ok("check")
		if !strings.Contains(out, "shared by the hosts of a fleet") || !strings.Contains(out, "\nok\n") {
			t.Errorf("check on host %s:\n%s", name, out)
		}
	}
}
