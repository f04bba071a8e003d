package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/fs/bind/sandboxtest"
	"skillfs/skills"
	"skillfs/skills/git"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// The sandboxes of these tests run as this uid, which owns their
// workspaces.
const boxUID = 1000

// box is a sandbox with the host folder ws as /workspace and an empty
// /skills to bind a session at; stopped when the test ends.
func box(t testing.TB, ws string) *sandboxtest.Box {
	t.Helper()
	os.Chmod(filepath.Dir(ws), 0o755)
	chownTree(t, ws)
	b, err := sandboxtest.Sandboxed(ws, boxUID, boxUID, "--dir", "/skills")
	if err != nil {
		t.Fatalf("start a sandbox (bwrap): %v", err)
	}
	t.Cleanup(b.Stop)
	return b
}

// chownTree gives the sandbox's uid every entry of dir.
func chownTree(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, boxUID, boxUID)
		}
		return nil
	})
}

// demoSkill writes a skill folder named name into ws, with a file beside
// SKILL.md, a link to /etc/shadow and a .git folder.
func demoSkill(t testing.TB, ws, name, body string) string {
	t.Helper()
	dir := filepath.Join(ws, name)
	skilltest.WriteDir(t, dir, skilltest.Skill("name: "+name+"\ndescription: "+name+" things", body, map[string]string{"ref/notes.md": "notes of " + name}))
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, "shadow")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755)
	return dir
}

func addUsers(t testing.TB, d *Daemon, uids ...string) {
	t.Helper()
	for _, uid := range uids {
		if err := d.cat.PutUser(context.Background(), "", skills.User{UID: uid, Role: skills.RoleUser}, true); err != nil {
			t.Fatal(err)
		}
	}
}

// boundSession is a session of user uid asking for all it may read,
// bound into sandbox b at /skills.
func boundSession(t testing.TB, d *Daemon, uid string, b *sandboxtest.Box) string {
	t.Helper()
	ctx := context.Background()
	info, err := d.CreateSession(ctx, api.CreateRequest{User: uid, Skills: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if b != nil {
		if _, err := d.Bind(ctx, info.ID, skills.Bind{Target: "/skills", PID: b.PID}); err != nil {
			t.Fatal(err)
		}
	}
	return info.ID
}

// storeState is what the catalog holds: its rows and the store's and
// temporary area's entries.
type storeState struct {
	skills, versions int
	files            []string
}

func stateOf(t testing.TB, d *Daemon) storeState {
	t.Helper()
	var st storeState
	ctx := context.Background()
	list, err := d.db.Skills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := d.db.AllVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.skills, st.versions = len(list), len(vs)
	for _, sub := range []string{"store", "tmp"} {
		root := filepath.Join(d.cat.Home(), sub)
		filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
			if err == nil && p != root {
				rel, _ := filepath.Rel(d.cat.Home(), p)
				st.files = append(st.files, rel)
			}
			return nil
		})
	}
	return st
}

func sameState(t testing.TB, what string, before, after storeState) {
	t.Helper()
	if before.skills != after.skills || before.versions != after.versions || !slices.Equal(before.files, after.files) {
		t.Fatalf("%s changed the store: before %+v, after %+v", what, before, after)
	}
}

// readInBox reads a file of the session's view as the sandbox sees it, at
// /skills.
func readInBox(b *sandboxtest.Box, rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join("/proc", fmt.Sprint(b.PID), "root", "skills", rel))
}

// TestInstallFromSandbox: a session's install from a folder in its sandbox
// is its user's private skill, with the link to /etc/shadow and .git left
// out; it joins the session at its next refresh and is read through the
// bind in the sandbox; another user's session never sees it; the install is
// recorded with an event; the same content uploaded makes the same version.
func TestInstallFromSandbox(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	addUsers(t, d, "alice", "bob")
	ws := filepath.Join(t.TempDir(), "ws")
	demoSkill(t, ws, "demo", "demo body\n")
	b := box(t, ws)
	id := boundSession(t, d, "alice", b)
	bobs, err := d.CreateSession(ctx, api.CreateRequest{User: "bob", All: true})
	if err != nil {
		t.Fatal(err)
	}

	out, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/demo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Slug != "demo" || out.Joined || out.Version == "" {
		t.Fatalf("install = %+v", out)
	}
	warned := strings.Join(out.Warnings, "\n")
	if !strings.Contains(warned, "shadow") || !strings.Contains(warned, ".git") {
		t.Fatalf("warnings %q: want the link to /etc/shadow and .git left out", out.Warnings)
	}
	sk, err := d.db.Skill(ctx, "demo")
	if err != nil || !privateTo(sk, "alice") || sk.Creator != "alice" {
		t.Fatalf("skill = %+v, %v: want alice's, read by her alone", sk, err)
	}
	if _, err := readInBox(b, "demo/SKILL.md"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read before the refresh: %v, want it absent until the next refresh", err)
	}
	info, err := d.Refresh(ctx, id)
	if err != nil || !slices.Contains(info.Readable, "demo") {
		t.Fatalf("refresh: %+v, %v", info, err)
	}
	if got, err := readInBox(b, "demo/ref/notes.md"); err != nil || string(got) != "notes of demo" {
		t.Fatalf("read through the sandbox's bind: %q, %v", got, err)
	}
	if _, err := readInBox(b, "demo/shadow"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link to /etc/shadow: %v, want it left out", err)
	}
	if info, err := d.Refresh(ctx, bobs.ID); err != nil || slices.Contains(info.Readable, "demo") {
		t.Fatalf("bob's session reads %v (%v): alice's install is hers", info.Readable, err)
	}
	recs, err := d.db.Installs(ctx, id)
	if err != nil || len(recs) != 1 || recs[0].Outcome != skills.InstallOK || recs[0].Kind != skills.InstallPath ||
		recs[0].Source != "/workspace/demo" || recs[0].Slug != "demo" || recs[0].User != "alice" || recs[0].Version != out.Version {
		t.Fatalf("records = %+v, %v", recs, err)
	}
	page, err := d.db.Events(ctx, id, 0, 100)
	if err != nil || !slices.ContainsFunc(page.Events, func(e skills.Event) bool { return e.Type == skills.EventInstalled && e.Slug == "demo" }) {
		t.Fatalf("events = %+v, %v: want an installed event", page, err)
	}

	// With now, the skill is read when the call returns.
	demoSkill(t, ws, "now", "now body\n")
	chownTree(t, ws)
	out, err = d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/now", Now: true}, nil)
	if err != nil || !out.Joined {
		t.Fatalf("install now = %+v, %v", out, err)
	}
	if got, err := readInBox(b, "now/SKILL.md"); err != nil || !strings.Contains(string(got), "now body") {
		t.Fatalf("read after an install with now: %q, %v", got, err)
	}

	// The same content uploaded, as a ZIP and as a SKILL.md, into another
	// catalog: the same version.
	d2 := newTestDaemon(t)
	addUsers(t, d2, "alice")
	id2 := boundSession(t, d2, "alice", nil)
	src := filepath.Join(ws, "demo")
	zipped := skilltest.Zip(t, skilltest.ZipEntry{Name: "SKILL.md", Data: mustRead(t, filepath.Join(src, "SKILL.md"))},
		skilltest.ZipEntry{Name: "ref/notes.md", Data: []byte("notes of demo")})
	up, err := d2.InstallForSession(ctx, id2, api.InstallRequest{}, &catalog.Upload{Kind: catalog.UploadZip, Name: "demo.zip", Body: bytes.NewReader(zipped)})
	if err != nil || up.Slug != "demo" || up.Version != sessionVersion(t, d, "demo") {
		t.Fatalf("upload of the same content = %+v, %v; want version %s", up, err, sessionVersion(t, d, "demo"))
	}
	recs, _ = d2.db.Installs(ctx, id2)
	if len(recs) != 1 || recs[0].Kind != skills.InstallUpload || recs[0].Source != "demo.zip" {
		t.Fatalf("upload records = %+v", recs)
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sessionVersion(t testing.TB, d *Daemon, slug string) string {
	t.Helper()
	sk, err := d.db.Skill(context.Background(), slug)
	if err != nil {
		t.Fatal(err)
	}
	return sk.Version
}

// TestInstallFromGit: a remote git source is installed as a draft's would
// be read; a source on this machine is refused, for an admin's session too.
func TestInstallFromGit(t *testing.T) {
	gittest.Require(t)
	ctx := context.Background()
	root := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	skilltest.WriteDir(t, work, skilltest.Skill("name: gitted\ndescription: from git", "body\n", nil))
	gittest.Git(t, work, gittest.FixtureEnv, "init", "-q", "-b", "main")
	gittest.Git(t, work, gittest.FixtureEnv, "add", ".")
	gittest.Git(t, work, gittest.FixtureEnv, "commit", "-q", "-m", "one")
	gittest.Git(t, root, gittest.FixtureEnv, "clone", "-q", "--bare", work, filepath.Join(root, "team", "skills.git"))
	base := gittest.Serve(t, root)

	d := newTestDaemon(t)
	addUsers(t, d, "alice")
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "root", Role: skills.RoleSuperadmin}, true); err != nil {
		t.Fatal(err)
	}
	id := boundSession(t, d, "alice", nil)
	withCreds := strings.Replace(base, "http://", "http://agent:s3cret@", 1) + "team/skills.git"
	// The test's server is on a loopback port, over http: read only once
	// the operator lists it.
	if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Source: withCreds, Ref: "main"}, nil); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("install from a loopback http host not allowed: %v, want ErrPermission", err)
	}
	hosts, err := git.ParseHosts(strings.TrimSuffix(base, "/"))
	if err != nil {
		t.Fatal(err)
	}
	d.opts.InstallGitHosts = hosts
	out, err := d.InstallForSession(ctx, id, api.InstallRequest{Source: withCreds, Ref: "main", Now: true}, nil)
	if err != nil || out.Slug != "gitted" || !out.Joined {
		t.Fatalf("install from git = %+v, %v", out, err)
	}
	recs, err := d.db.Installs(ctx, id)
	if err != nil || len(recs) != 2 || recs[1].Kind != skills.InstallGit || recs[1].Outcome != skills.InstallOK ||
		strings.Contains(recs[0].Source+recs[1].Source, "s3cret") || !strings.Contains(recs[1].Source, "team/skills.git") {
		t.Fatalf("records = %+v, %v: want the source without its credentials", recs, err)
	}
	admin := boundSession(t, d, "root", nil)
	before := stateOf(t, d)
	for _, src := range []string{work, "file://" + work} {
		if _, err := d.InstallForSession(ctx, admin, api.InstallRequest{Source: src}, nil); !errors.Is(err, skills.ErrPermission) {
			t.Fatalf("install from %s on this machine: %v, want ErrPermission", src, err)
		}
	}
	sameState(t, "installs from this machine", before, stateOf(t, d))
}

// TestInstallFromGitHosts: with no hosts allowed, a session's install
// reads only https hosts whose addresses are public: loopback, private,
// link-local and the like, by address or by a name resolving to one, are
// refused before git runs (nothing reaches the host), as is every other
// transport; with hosts allowed, only those. A session is told no more of a
// failure than its kind (not found, not reached, refused): none of git's
// words, which the operator still gets, and the log.
func TestInstallFromGitHosts(t *testing.T) {
	gittest.Require(t)
	ctx := context.Background()
	root := t.TempDir()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no repository here", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	base := gittest.Serve(t, root)

	d := newTestDaemon(t)
	addUsers(t, d, "alice")
	id := boundSession(t, d, "alice", nil)
	asSession := server.WithPrincipal(ctx, server.Principal{Role: server.RoleSession, Session: id, Via: "sandbox-socket"})
	before := stateOf(t, d)
	for _, src := range []string{
		srv.URL + "/x.git",                          // http, and loopback
		"https://127.0.0.1:" + port + "/x.git",      // loopback
		"https://localhost:" + port + "/x.git",      // a name of a loopback address
		"https://[::1]:" + port + "/x.git",          // loopback
		"https://[::ffff:127.0.0.1]:" + port + "/x", // loopback, mapped
		"https://10.0.0.1/x.git",                    // private
		"https://192.168.1.1/x.git",                 // private
		"https://169.254.169.254/latest/meta-data",  // link-local: a cloud's metadata
		"https://[fd00::1]/x.git",                   // unique local
		"https://0.0.0.0:" + port + "/x.git",        // unspecified
		"https://100.64.0.1/x.git",                  // shared (carrier-grade NAT)
		"https://[64:ff9b::a00:1]/x.git",            // NAT64 of 10.0.0.1
		"https://nosuchhost.invalid/x.git",          // no address at all
		"ssh://git@127.0.0.1:" + port + "/x.git",    // not https
		"git://127.0.0.1:" + port + "/x.git",        // not https
		"127.0.0.1:x.git",                           // scp-like: ssh
	} {
		_, err := d.InstallForSession(asSession, id, api.InstallRequest{Source: src}, nil)
		if !errors.Is(err, skills.ErrPermission) || strings.Contains(err.Error(), "(git:") {
			t.Errorf("install from %s: %v, want ErrPermission without git's words", src, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback host was reached %d times", n)
	}
	sameState(t, "installs from hosts refused", before, stateOf(t, d))

	// Allowed: the two loopback hosts, over http; any other host refused.
	hosts, err := git.ParseHosts(strings.TrimSuffix(base, "/") + ", http://127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	d.opts.InstallGitHosts = hosts
	if _, err := d.InstallForSession(asSession, id, api.InstallRequest{Source: "https://github.com/owner/repo.git"}, nil); !errors.Is(err, skills.ErrPermission) ||
		!strings.Contains(err.Error(), "not among the hosts allowed") {
		t.Fatalf("install from a host not listed: %v", err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/x.git"
	closed.Close()
	d.opts.InstallGitHosts = append(d.opts.InstallGitHosts, git.Host{Name: "127.0.0.1", Port: closed.Addr().(*net.TCPAddr).Port, HTTP: true})
	for _, tc := range []struct{ src, says string }{
		{srv.URL + "/x.git", "repository not found"},
		{base + "team/none.git", "repository not found"},
		{closedURL, "could not be reached"},
	} {
		_, err := d.InstallForSession(asSession, id, api.InstallRequest{Source: tc.src}, nil)
		if !errors.Is(err, skills.ErrNotFound) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "(git:") {
			t.Errorf("a session's install from %s: %v, want not found saying %q and none of git's words", tc.src, err, tc.says)
		}
		_, err = d.InstallForSession(ctx, id, api.InstallRequest{Source: tc.src}, nil)
		if !errors.Is(err, skills.ErrNotFound) || !strings.Contains(err.Error(), "(git:") {
			t.Errorf("the operator's install from %s: %v, want git's words", tc.src, err)
		}
	}
	if hits.Load() == 0 {
		t.Fatal("the allowed host was never asked")
	}
	sameState(t, "installs from git that failed", before, stateOf(t, d))
}

// TestInstallRefusedLeavesStoreUnchanged: every refused install — what the
// sandbox cannot read or see, a special file, a file past the limits, a
// session bound into no sandbox, a request naming two sources, a skill
// others read — changes nothing in the catalog and is recorded with its
// outcome.
func TestInstallRefusedLeavesStoreUnchanged(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	addUsers(t, d, "alice")
	ws := filepath.Join(t.TempDir(), "ws")
	host := filepath.Join(filepath.Dir(ws), "host-only")
	skilltest.WriteDir(t, host, skilltest.Skill("name: host\ndescription: host's", "body\n", nil))
	demoSkill(t, ws, "rootonly", "body\n")
	demoSkill(t, ws, "fifo", "body\n")
	demoSkill(t, ws, "sparse", "body\n")
	demoSkill(t, ws, "shared", "body\n")
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo", "pipe"), 0o666); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(ws, "sparse", "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(2 << 30)
	big.Close()
	os.Symlink("/etc/shadow", filepath.Join(ws, "SKILL.md"))
	b := box(t, ws) // the sandbox's uid owns the workspace, but:
	if err := os.WriteFile(filepath.Join(ws, "rootonly", "secret"), []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := boundSession(t, d, "alice", b)
	unbound := boundSession(t, d, "alice", nil)
	// Bound in the daemon's own namespace only: no sandbox, and nothing is
	// read as the daemon.
	own := boundSession(t, d, "alice", nil)
	target := filepath.Join(t.TempDir(), "own")
	if _, err := d.Bind(ctx, own, skills.Bind{Target: target}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Unbind(ctx, own, target, 0) })

	// An admin shares a skill alice installed from her session with everyone:
	// her session's installs may no longer change it.
	if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/shared"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cat.Share(ctx, "", "shared", skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "shared", "ref", "notes.md"), []byte("changed"), 0o644)

	for _, tc := range []struct {
		session string
		req     api.InstallRequest
		want    error
		says    string
	}{
		{id, api.InstallRequest{Path: "/workspace/rootonly"}, skills.ErrPermission, "/workspace/rootonly/secret"},
		{id, api.InstallRequest{Path: host}, skills.ErrNotFound, "does not exist in the sandbox"},
		{id, api.InstallRequest{Path: "/workspace/../../../.." + host}, skills.ErrNotFound, "does not exist"},
		{id, api.InstallRequest{Path: "/proc/self/root" + host}, skills.ErrNotFound, ""},
		{id, api.InstallRequest{Path: "/proc/1/root/workspace/rootonly"}, skills.ErrUnsafePath, ""},
		{id, api.InstallRequest{Path: "/workspace/SKILL.md"}, skills.ErrNotFound, "does not exist"},
		{id, api.InstallRequest{Path: "/etc/shadow"}, skills.ErrNotFound, "does not exist"},
		{id, api.InstallRequest{Path: "/workspace/fifo"}, skills.ErrSpecialFile, "fifo"},
		{id, api.InstallRequest{Path: "/workspace/sparse"}, skills.ErrLimit, "file-bytes"},
		{id, api.InstallRequest{Path: "workspace/demo"}, skills.ErrInvalid, "absolute"},
		{id, api.InstallRequest{Path: "/workspace/shared"}, skills.ErrPermission, "read by others"},
		{id, api.InstallRequest{Path: "/workspace/fifo", Source: "https://example.com/x.git"}, skills.ErrInvalid, "one of"},
		{id, api.InstallRequest{}, skills.ErrInvalid, "one of"},
		{unbound, api.InstallRequest{Path: "/workspace/rootonly"}, skills.ErrInvalid, "bound into no sandbox"},
		{own, api.InstallRequest{Path: host}, skills.ErrInvalid, "bound into no sandbox"},
		{"0123456789abcdef0123456789abcdef", api.InstallRequest{Path: "/workspace/rootonly"}, skills.ErrNotFound, ""},
	} {
		t.Run(tc.req.Path+tc.req.Source, func(t *testing.T) {
			before := stateOf(t, d)
			recs, _ := d.db.Installs(ctx, tc.session)
			_, err := d.InstallForSession(ctx, tc.session, tc.req, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("install %+v = %v; want %v saying %q", tc.req, err, tc.want, tc.says)
			}
			sameState(t, "a refused install", before, stateOf(t, d))
			after, _ := d.db.Installs(ctx, tc.session)
			if tc.want == skills.ErrInvalid && strings.Contains(tc.says, "one of") || tc.session != id {
				return // refused before anything was tried
			}
			if len(after) != len(recs)+1 || after[len(after)-1].Outcome == skills.InstallOK || after[len(after)-1].Error == "" {
				t.Fatalf("records after a refusal = %+v", after)
			}
		})
	}
}

// TestInstallQuotas: a user's installs stop at their quota of skills, of
// bytes and of installs per hour, with an error naming it, and the store
// unchanged.
func TestInstallQuotas(t *testing.T) {
	ctx := context.Background()
	d, ws, _, id := aliceBoxed(t, "one", "two", "three", "big")
	os.WriteFile(filepath.Join(ws, "big", "blob"), bytes.Repeat([]byte("x"), 4096), 0o644)

	d.opts.Quotas = Quotas{Skills: 2, Bytes: 4000, InstallsHour: 5}
	for _, n := range []string{"one", "two"} {
		if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/" + n}, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(path, quota string) {
		t.Helper()
		before := stateOf(t, d)
		_, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: path}, nil)
		var qe *QuotaError
		if !errors.As(err, &qe) || qe.Quota != quota || !errors.Is(err, skills.ErrLimit) || !strings.Contains(err.Error(), `"alice"`) {
			t.Fatalf("install of %s past the %s quota: %v", path, quota, err)
		}
		sameState(t, "an install past a quota", before, stateOf(t, d))
	}
	check("/workspace/three", "skills")
	// A new version of one of hers is no new skill, but its bytes count.
	d.opts.Quotas.Skills = 10
	check("/workspace/big", "bytes")
	// Installs that were tried count, those refused for a quota do not:
	// two and the five-th is the limit.
	for _, n := range []string{"three"} {
		if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/" + n}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/nothing"}, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/one"}, nil); err != nil {
		t.Fatal(err) // unchanged: counted all the same
	}
	before := stateOf(t, d)
	_, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/three"}, nil)
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "installs per hour" || qe.Retry.IsZero() || !strings.Contains(err.Error(), "next install is possible at") {
		t.Fatalf("the install past the hourly rate: %v", err)
	}
	sameState(t, "an install past the rate", before, stateOf(t, d))
	recs, _ := d.db.Installs(ctx, id)
	var quota int
	for _, r := range recs {
		if r.Outcome == outcomeQuota {
			quota++
		}
	}
	if len(recs) != 8 || quota != 3 {
		t.Fatalf("records = %d, %d for quotas; want 8 and 3: %+v", len(recs), quota, recs)
	}
	wantSeries(t, series(t, d.metrics), map[string]float64{
		"skillfs_session_installs_total{kind=path,outcome=ok}":        4,
		"skillfs_session_installs_total{kind=path,outcome=quota}":     3,
		"skillfs_session_installs_total{kind=path,outcome=not_found}": 1,
	})
}

// TestInstallConcurrent: 50 sessions, each bound into a sandbox of its
// own, install at once; each reads its own skill after a refresh, and
// nothing is left in the temporary area.
func TestInstallConcurrent(t *testing.T) {
	const n = 50
	ctx := context.Background()
	d := newTestDaemon(t)
	ids := make([]string, n)
	boxes := make([]*sandboxtest.Box, n)
	for i := range n {
		uid := fmt.Sprintf("u%02d", i)
		addUsers(t, d, uid)
		ws := filepath.Join(t.TempDir(), "ws")
		demoSkill(t, ws, fmt.Sprintf("s%02d", i), fmt.Sprintf("body of %d\n", i))
		boxes[i] = box(t, ws)
		ids[i] = boundSession(t, d, uid, boxes[i])
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = d.InstallForSession(ctx, ids[i], api.InstallRequest{Path: fmt.Sprintf("/workspace/s%02d", i), Now: true}, nil)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("session %d: %v", i, errs[i])
			continue
		}
		got, err := readInBox(boxes[i], fmt.Sprintf("s%02d/SKILL.md", i))
		if err != nil || !strings.Contains(string(got), fmt.Sprintf("body of %d\n", i)) {
			t.Errorf("session %d reads %q, %v", i, got, err)
		}
		info, err := d.SessionInfo(ctx, ids[i])
		if err != nil || len(info.Readable) != 1 {
			t.Errorf("session %d reads %v, %v: want its own skill alone", i, info.Readable, err)
		}
	}
	if tmp, _ := os.ReadDir(filepath.Join(d.cat.Home(), "tmp")); len(tmp) != 0 {
		t.Errorf("left in the temporary area: %v", tmp)
	}
}

// aliceBoxed is a daemon with the user alice and her session, bound into a
// sandbox whose workspace holds the demo skills named.
func aliceBoxed(t *testing.T, names ...string) (*Daemon, string, *sandboxtest.Box, string) {
	t.Helper()
	d := newTestDaemon(t)
	addUsers(t, d, "alice")
	ws := filepath.Join(t.TempDir(), "ws")
	for _, n := range names {
		demoSkill(t, ws, n, "body\n")
	}
	b := box(t, ws)
	return d, ws, b, boundSession(t, d, "alice", b)
}

// TestInstallThroughTheAPI: POST /v1/sessions/{id}/skills installs from a
// path in the sandbox (JSON) and from the skill's bytes (a SKILL.md with
// ?now=true), answering as the document says; a refusal answers in the
// error shape with its code.
func TestInstallThroughTheAPI(t *testing.T) {
	d, _, b, id := aliceBoxed(t, "viaapi")
	client := apitest.NewChecked(t, d.http.Handler(""))
	route := "/v1/sessions/" + id + "/skills"

	code, _, body := client.Send("POST", route, apitest.JSONHeader(), []byte(`{"path":"/workspace/viaapi"}`))
	var out api.SessionInstall
	if code != http.StatusOK || json.Unmarshal(body, &out) != nil || out.Slug != "viaapi" || out.Joined {
		t.Fatalf("install from a path: %d %s", code, body)
	}
	manifest := skilltest.Manifest("name: posted\ndescription: sent as bytes", "body\n")
	code, _, body = client.Send("POST", route+"?name=SKILL.md&now=true", apitest.Header("Content-Type", "text/markdown"), []byte(manifest))
	if code != http.StatusOK || json.Unmarshal(body, &out) != nil || out.Slug != "posted" || !out.Joined {
		t.Fatalf("install of bytes: %d %s", code, body)
	}
	if got, err := readInBox(b, "posted/SKILL.md"); err != nil || string(got) == "" {
		t.Fatalf("read the posted skill in the sandbox: %q, %v", got, err)
	}
	for _, tc := range []struct {
		body string
		code int
		kind string
	}{
		{`{"path":"/etc/shadow"}`, http.StatusNotFound, "not_found"},
		{`{"path":"/workspace/viaapi","source":"owner/repo"}`, http.StatusBadRequest, "invalid"},
		{`{"path":"/workspace/viaapi","extra":1}`, http.StatusBadRequest, "invalid"},
	} {
		code, _, body := client.Send("POST", route, apitest.JSONHeader(), []byte(tc.body))
		if code != tc.code || apitest.ErrorCode(body) != tc.kind {
			t.Errorf("%s: %d %s; want %d %s", tc.body, code, body, tc.code, tc.kind)
		}
	}
}

// TestInstallSandboxGone: once the process a session is bound into is
// gone, no path is read for it (its pid may be another process's by then).
func TestInstallSandboxGone(t *testing.T) {
	d, _, b, id := aliceBoxed(t, "gone")
	b.Stop()
	before := stateOf(t, d)
	if _, err := d.InstallForSession(context.Background(), id, api.InstallRequest{Path: "/workspace/gone"}, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("install in a sandbox gone: %v, want ErrNotFound", err)
	}
	sameState(t, "an install in a sandbox gone", before, stateOf(t, d))
}

// TestInstallOnHungFilesystem: a path on a filesystem of the sandbox that
// never answers costs the install an error within SandboxReadTimeout, the
// catalog unchanged and nothing left in its temporary area, and the user's
// next install goes through.
func TestInstallOnHungFilesystem(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	addUsers(t, d, "alice")
	prev := SandboxReadTimeout
	SandboxReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { SandboxReadTimeout = prev })
	h := mountHungFor(t, true)
	ws := filepath.Join(t.TempDir(), "ws")
	demoSkill(t, ws, "fine", "body\n")
	os.Chmod(filepath.Dir(ws), 0o755)
	chownTree(t, ws)
	b, err := sandboxtest.Sandboxed(ws, boxUID, boxUID, "--dir", "/skills", "--bind", h.mnt, "/hung")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	id := boundSession(t, d, "alice", b)
	before := stateOf(t, d)
	res := make(chan error, 1)
	go func() {
		_, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/hung/hang"}, nil)
		res <- err
	}()
	h.waitEntered(t)
	select {
	case err := <-res:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "/hung/hang") {
			t.Fatalf("install on a hung filesystem: %v, want a timeout naming the path", err)
		}
	case <-time.After(hang):
		h.release()
		t.Fatal("the install still waits for the hung filesystem")
	}
	sameState(t, "an install on a hung filesystem", before, stateOf(t, d))
	// The stuck read holds its place after the install gave up: the
	// user's next path install is refused busy while it hangs (the
	// skill's bytes still install), another user's goes through.
	if all, mine := d.reads.outstanding("alice"); all != 1 || mine != 1 {
		t.Fatalf("outstanding reads after the timeout: %d, alice's %d; want the stuck one", all, mine)
	}
	_, err = d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/fine"}, nil)
	var busy *server.BusyError
	if !errors.As(err, &busy) || !errors.Is(err, skills.ErrBusy) || busy.RetryAfter <= 0 || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("alice's next path install while her read hangs: %v, want busy naming her", err)
	}
	sameState(t, "an install refused busy", before, stateOf(t, d))
	up := &catalog.Upload{Kind: catalog.UploadManifest, Name: "SKILL.md",
		Body: strings.NewReader(skilltest.Manifest("name: sent\ndescription: sent as bytes", "body\n"))}
	if _, err := d.InstallForSession(ctx, id, api.InstallRequest{}, up); err != nil {
		t.Fatalf("alice's upload while her read hangs: %v", err)
	}
	addUsers(t, d, "bob")
	bws := filepath.Join(t.TempDir(), "ws")
	demoSkill(t, bws, "bobs", "body\n")
	bobs := boundSession(t, d, "bob", box(t, bws))
	if _, err := d.InstallForSession(ctx, bobs, api.InstallRequest{Path: "/workspace/bobs"}, nil); err != nil {
		t.Fatalf("bob's install while alice's read hangs: %v", err)
	}
	// Released, the read ends and gives its place back.
	h.release()
	for deadline := time.Now().Add(hang); ; time.Sleep(10 * time.Millisecond) {
		if all, _ := d.reads.outstanding("alice"); all == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read released still holds its place")
		}
	}
	if _, err := d.InstallForSession(ctx, id, api.InstallRequest{Path: "/workspace/fine"}, nil); err != nil {
		t.Fatalf("the next install of the user: %v", err)
	}
	if tmp, _ := os.ReadDir(filepath.Join(d.cat.Home(), "tmp")); len(tmp) != 0 {
		t.Errorf("left in the temporary area: %v", tmp)
	}
}

// TestSandboxReadGate: past the host's count of outstanding reads, or a
// user's, a read is refused busy; a place given back (once, however often
// its release is called) lets the next in.
func TestSandboxReadGate(t *testing.T) {
	refused := 0
	g := newReadGate(2, 1, func() { refused++ })
	g.wait = 0 // no place frees meanwhile: answered at once
	ctx := context.Background()
	a, err := g.enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.enter(ctx, "a"); !errors.Is(err, skills.ErrBusy) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("a's second read: %v", err)
	}
	b, err := g.enter(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.enter(ctx, "c"); !errors.Is(err, skills.ErrBusy) || !strings.Contains(err.Error(), "(2)") {
		t.Fatalf("a read past the host's count: %v", err)
	}
	a()
	a()
	if all, mine := g.outstanding("a"); all != 1 || mine != 0 {
		t.Fatalf("after a's release: %d, %d", all, mine)
	}
	c, err := g.enter(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.enter(ctx, "a"); !errors.Is(err, skills.ErrBusy) {
		t.Fatalf("a read past the host's count, released twice: %v", err)
	}
	b()
	c()
	if all, _ := g.outstanding("a"); all != 0 || refused != 3 {
		t.Fatalf("at the end: %d outstanding, %d refused", all, refused)
	}
}
