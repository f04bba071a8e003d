package daemon

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/activation"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/catalog/confine"
	"skillfs/fs/fusetest"
	"skillfs/index"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// newTestDaemon is a daemon over a fresh data directory with a real mount,
// without the socket: tests call its methods and routes directly.
func newTestDaemon(t testing.TB) *Daemon {
	return newTestDaemonOn(t, nil, false)
}

// newTestDaemonOn is newTestDaemon whose recorder sees the index through
// wrap (nil: as it is); with opens, every open of a SKILL.md reaches the
// recorder (fs.Options.Opens). Its recorder keeps what the index cannot
// take in a journal in the data directory, as serve's does.
func newTestDaemonOn(t testing.TB, wrap func(*index.DB) activation.Index, opens bool) *Daemon {
	t.Helper()
	return newTestHostOn(t, "", wrap, opens, nil)
}

// newTestDaemonRoots is newTestDaemon whose import roots are roots: the
// folders sources named through its API may read.
func newTestDaemonRoots(t testing.TB, roots ...string) *Daemon {
	t.Helper()
	r, err := confine.OpenImportRoots(roots)
	if err != nil {
		t.Fatal(err)
	}
	return newTestHostOn(t, "", nil, false, r)
}

// newTestHost is newTestDaemon on the shared index at shared ("" for the
// data directory's own), registered as a host.
func newTestHost(t testing.TB, shared string) *Daemon {
	t.Helper()
	return newTestHostOn(t, shared, nil, false, nil)
}

// newTestHostOn is newTestDaemonOn on the shared index at shared, with
// the import roots roots (nil: none): the daemon New makes, without Serve
// (nothing in the background: tests call its methods and handlers).
func newTestHostOn(t testing.TB, shared string, wrap func(*index.DB) activation.Index, opens bool, roots *confine.ImportRoots) *Daemon {
	t.Helper()
	fusetest.Require(t)
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	cat, err := catalog.Open(ctx, home, catalog.Options{Index: shared, ImportRoots: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	d, err := New(ctx, cat, Options{HostName: filepath.Base(filepath.Dir(home)), CountOpens: opens,
		FsName: testFsName, recorderIndex: wrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// install imports a one-file skill with the given frontmatter.
func install(t testing.TB, d *Daemon, front string, share string) {
	t.Helper()
	dir := skilltest.WriteDir(t, filepath.Join(t.TempDir(), "src"), skilltest.Skill(front, "body\n", nil))
	req := catalog.ImportRequest{Source: dir}
	if share != "" {
		req.Share = &skills.Share{Read: skills.Scope{Kind: share}}
	}
	if _, err := d.cat.Import(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// A revocation that lands while a session is being created is never pinned
// into it: the readable set is computed under the daemon's lock.
func TestCreateSessionSeesRevocationsThatLandMeanwhile(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: x\ndescription: soon disabled", skills.ScopeGlobal)
	// y stays: a session none of whose skills is readable is refused.
	install(t, d, "name: y\ndescription: stays", skills.ScopeGlobal)
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock() // the daemon is busy with another session change
	done := make(chan *api.SessionInfo, 1)
	go func() {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x", "y"}})
		if err != nil {
			t.Error(err)
		}
		done <- info
	}()
	time.Sleep(100 * time.Millisecond) // let it get as far as it can
	if _, err := d.cat.SetEnabled(ctx, "", "x", false); err != nil {
		t.Fatal(err)
	}
	d.mu.Unlock()
	info := <-done
	if info == nil {
		t.Fatal("no session created")
	}
	if slices.Contains(info.Readable, "x") || !slices.Contains(info.Readable, "y") {
		t.Fatalf("session created after x was disabled: readable %v, want y alone", info.Readable)
	}
	if _, err := os.Stat(filepath.Join(d.mountRoot, info.ID, "x")); !os.IsNotExist(err) {
		t.Fatalf("x is served in the new session: %v", err)
	}
}

// A pinned version whose content is gone is left out of the view and
// reported, and does not keep the session from being served.
func TestSessionWithMissingContentIsServedWithoutIt(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: kept\ndescription: fine", skills.ScopeGlobal)
	install(t, d, "name: lost\ndescription: its content goes", skills.ScopeGlobal)
	lost, _ := d.db.Skill(ctx, "lost")
	if _, err := d.cat.Store().Quarantine("lost", lost.Version, "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Join(d.cat.Home(), "store", "quarantine")) })
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(info.Skipped, func(s api.Skipped) bool { return s.Slug == "lost" && strings.Contains(s.Reason, "missing") }) {
		t.Errorf("skipped = %+v, want lost reported", info.Skipped)
	}
	if _, err := os.Stat(filepath.Join(info.Path, "kept", "SKILL.md")); err != nil {
		t.Errorf("the rest of the session is not served: %v", err)
	}
}

// A restart serves every open session again, less what its user lost
// while the daemon was down, and records the loss.
func TestRestoreLeavesOutWhatWasRevokedMeanwhile(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: kept\ndescription: stays", skills.ScopeGlobal)
	install(t, d, "name: gone\ndescription: disabled while down", skills.ScopeGlobal)
	for _, uid := range []string{"alice", "bob"} {
		if err := d.cat.PutUser(ctx, "", skills.User{UID: uid, Role: skills.RoleUser}, true); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, uid := range []string{"alice", "alice", "bob"} {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: uid, Skills: []string{"kept", "gone"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	// The daemon stops; the catalog changes without it.
	for _, id := range ids {
		d.fs.RemoveSession(id)
	}
	if _, err := d.cat.SetEnabled(ctx, "", "gone", false); err != nil {
		t.Fatal(err)
	}
	// bob deleted with a session open. The index refuses that now, but a
	// data directory from before it did may hold one: made in the file.
	raw, err := sql.Open("sqlite3", "file:"+d.db.Path()+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, "DELETE FROM users WHERE uid = 'bob'"); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.restore(ctx); err != nil {
		t.Fatal(err)
	}
	if n := d.fs.NumSessions(); n != len(ids) {
		t.Fatalf("%d sessions served after restore, want %d", n, len(ids))
	}
	for i, id := range ids {
		want := []string{"kept"}
		if i == 2 {
			want = []string{} // bob is gone
		}
		s, err := d.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var pinned []string
		for _, p := range s.Pins {
			pinned = append(pinned, p.Slug)
		}
		entries, err := os.ReadDir(filepath.Join(d.mountRoot, id))
		if err != nil {
			t.Fatal(err)
		}
		var served []string
		for _, e := range entries {
			served = append(served, e.Name())
		}
		if !slices.Equal(pinned, want) || !slices.Equal(served, pinned) {
			t.Errorf("session %d after restore: pinned %v, served %v; want %v", i, pinned, served, want)
		}
	}
}

// post sends a request to the daemon's routes in-process.
func post(t testing.TB, d *Daemon, path, as, contentType string, body []byte) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	if as != "" {
		req.Header.Set(api.ActAsHeader, as)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	d.http.Handler("").ServeHTTP(rec, req)
	var out map[string]any
	json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

// Ordinary users prepare drafts from bytes they send or remote URLs, never
// from paths on the daemon's machine; uploads are cut at the limits.
func TestDraftSources(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d := newTestDaemonRoots(t, root)
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	secret := skilltest.WriteDir(t, filepath.Join(root, "secret"), fstest.MapFS{
		"SKILL.md": {Data: []byte(skilltest.Manifest("name: secret\ndescription: TOP-SECRET-CONTENT", "")), Mode: 0o600},
	})
	for _, src := range []string{secret, filepath.Join(secret, "SKILL.md"), "file://" + secret, "/dev/zero", "/etc/shadow"} {
		body, _ := json.Marshal(map[string]any{"source": src})
		code, out := post(t, d, "/v1/drafts", "alice", "application/json", body)
		if code != http.StatusForbidden || strings.Contains(fmt.Sprint(out), "TOP-SECRET") {
			t.Errorf("alice prepares %s: %d %v", src, code, out)
		}
	}
	code, out := post(t, d, "/v1/drafts", "alice", "text/markdown", []byte("---\nname: mine\ndescription: uploaded\n---\nbody\n"))
	if code != http.StatusOK || out["source"] != "SKILL.md" {
		t.Fatalf("alice uploads a SKILL.md: %d %v", code, out)
	}
	big := bytes.Repeat([]byte("a"), int(d.cat.Limits().MaxManifest)+10)
	if code, out := post(t, d, "/v1/drafts?name=big.md", "alice", "text/markdown", big); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(out), "manifest-bytes limit") {
		t.Fatalf("an oversized upload: %d %v", code, out)
	}
	if code, _ := post(t, d, "/v1/drafts?name=../x.zip", "alice", "application/zip", []byte("PK")); code != http.StatusBadRequest {
		t.Fatalf("an upload named ../x.zip: %d", code)
	}
	// The operator may name a path in an import root.
	body, _ := json.Marshal(map[string]any{"source": secret})
	if code, out := post(t, d, "/v1/drafts", "", "application/json", body); code != http.StatusOK {
		t.Fatalf("the operator prepares a local path: %d %v", code, out)
	}
	if l, _ := os.ReadDir(filepath.Join(d.cat.Home(), "tmp")); len(l) != 0 {
		t.Errorf("uploads left %d entries in tmp", len(l))
	}
}
