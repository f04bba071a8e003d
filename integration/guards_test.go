package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOneDaemonPerDataDirectory: a second serve on the same data directory
// is refused before it touches the socket or the binds.
func TestOneDaemonPerDataDirectory(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	r := e.run("serve", "--mount-root", filepath.Join(t.TempDir(), "other"))
	if r.code != 6 || !strings.Contains(r.stderr, "another skillfs serve is running") {
		t.Fatalf("second serve: exit %d, stderr %q; want 6 and a clear message", r.code, r.stderr)
	}
	e.ok("session", "list") // the first daemon still answers on its socket
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestBindTargetsAreNotShared: binding a second session over the first's
// target is refused, so unmounting one can never expose the other.
func TestBindTargetsAreNotShared(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	var a, b sessionJSON
	e.okJSON(&a, "session", "create", "--user", "alice", "--skills", "commit-messages")
	e.okJSON(&b, "session", "create", "--user", "bob", "--skills", "skill-authoring")
	target := filepath.Join(t.TempDir(), "skills")
	e.ok("session", "mount", a.ID, target)
	t.Cleanup(func() { e.run("session", "unmount", a.ID, target) })
	if r := e.run("session", "mount", b.ID, target); r.code != 6 {
		t.Fatalf("second bind at the same target: exit %d, want 6\n%s", r.code, r.stderr)
	}
	if r := e.run("session", "mount", b.ID, filepath.Join(e.home, "x")); r.code != 5 {
		t.Fatalf("bind inside the data directory: exit %d, want 5", r.code)
	}
	names, err := os.ReadDir(target)
	if err != nil || len(names) != 1 || names[0].Name() != "commit-messages" {
		t.Fatalf("target shows %v, %v; want alice's skill", names, err)
	}
}

// TestUserAdministration: admins manage ordinary users; only a superadmin
// touches admins and superadmins, and the last superadmin stays.
func TestUserAdministration(t *testing.T) {
	e := newEnv(t)
	e.ok("user", "add", "adm", "--role", "admin")
	e.ok("user", "add", "u1", "--as", "adm")
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"admin demotes the superadmin", []string{"user", "set", "operator", "--role", "user", "--as", "adm"}, 4},
		{"admin creates an admin", []string{"user", "add", "adm2", "--role", "admin", "--as", "adm"}, 4},
		{"admin deletes an admin", []string{"user", "delete", "adm", "--as", "adm"}, 4},
		{"user adds a user", []string{"user", "add", "u2", "--as", "u1"}, 4},
		{"add overwrites", []string{"user", "add", "u1"}, 6},
		{"set of an unknown user", []string{"user", "set", "nobody", "--role", "user"}, 3},
		{"last superadmin steps down", []string{"user", "set", "operator", "--role", "admin"}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.run(tc.args...); r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
		})
	}
	e.ok("user", "set", "u1", "--department", "eng", "--as", "adm")
	var users []struct {
		UID        string `json:"uid"`
		Role       string `json:"role"`
		Department string `json:"department"`
	}
	e.okJSON(&users, "user", "list")
	got := map[string]string{}
	for _, u := range users {
		got[u.UID] = u.Role + "/" + u.Department
	}
	if got["operator"] != "superadmin/" || got["adm"] != "admin/" || got["u1"] != "user/eng" || len(got) != 3 {
		t.Fatalf("users after the refused changes: %v", got)
	}
}

// TestShareCannotOutgrowDependencies: a skill cannot be shared wider than
// the skills it depends on.
func TestShareCannotOutgrowDependencies(t *testing.T) {
	e := newEnv(t)
	e.ok("user", "add", "alice")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "base"), "name: base\ndescription: b", nil)
	writeSkill(t, filepath.Join(src, "top"), "name: top\ndescription: t\nskill_dependencies: [base]", nil)
	e.ok("skill", "import", filepath.Join(src, "base"), "--as", "alice")
	e.ok("skill", "import", filepath.Join(src, "top"), "--as", "alice")
	r := e.run("skill", "share", "top", "--read", "global")
	if r.code != 5 || !strings.Contains(r.stderr, "base") {
		t.Fatalf("share wider than a dependency: exit %d, stderr %q", r.code, r.stderr)
	}
	e.ok("skill", "share", "base", "--read", "global")
	e.ok("skill", "share", "top", "--read", "global")
}

// TestDeletedUserReadsNothing: a user with an open session is deleted only
// with --force, which closes the session: nothing of it is served any more,
// nor comes back with a refresh.
func TestDeletedUserReadsNothing(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "mine"), "name: mine\ndescription: m", nil)
	e.ok("skill", "import", filepath.Join(src, "mine"), "--as", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--all")
	if len(s.Readable) != 4 { // her skill and the three bundled builtins
		t.Fatalf("readable %v", s.Readable)
	}
	if r := e.run("user", "delete", "alice"); r.code != 6 {
		t.Fatalf("delete a user with an open session: exit %d, want 6\n%s", r.code, r.stderr)
	}
	e.ok("user", "delete", "alice", "--force")
	if r := e.run("session", "refresh", s.ID); r.code != 3 {
		t.Fatalf("refresh of a deleted user's session: exit %d, want 3 (closed)\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(s.Path); !os.IsNotExist(err) {
		t.Fatalf("the mount still shows the session: %v", err)
	}
}

// TestValidateChecksThePackage: validate applies the import rules to the
// whole folder, and every failure exits 1.
func TestValidateChecksThePackage(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(t.TempDir(), "piped")
	writeSkill(t, dir, "name: piped\ndescription: has a fifo", nil)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"fifo inside":     dir,
		"missing path":    filepath.Join(t.TempDir(), "nope"),
		"empty directory": t.TempDir(),
	} {
		r := e.run("skill", "validate", path)
		if r.code != 1 || !strings.Contains(r.stdout, "error:") {
			t.Errorf("%s: exit %d, stdout %q; want exit 1 with the error", name, r.code, r.stdout)
		}
	}
}

// TestOwnerOption: the operator picks the owner files show in the mount.
func TestOwnerOption(t *testing.T) {
	e := newEnv(t)
	e.serve("--owner", "1000:1001")
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "commit-messages")
	fi, err := os.Stat(filepath.Join(s.Path, "commit-messages", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1000 || st.Gid != 1001 || fi.Mode().Perm() != 0o444 {
		t.Fatalf("owner %d:%d mode %v, want 1000:1001 0444", st.Uid, st.Gid, fi.Mode().Perm())
	}
	if r := e.run("serve", "--owner", "nobody"); r.code != 2 {
		t.Fatalf("bad --owner: exit %d, want 2", r.code)
	}
}
