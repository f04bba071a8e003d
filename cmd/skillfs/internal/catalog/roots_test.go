package catalog

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/cmd/skillfs/internal/catalog/confine"
	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// rootsOf opens dirs as the import roots.
func rootsOf(t testing.TB, dirs ...string) *confine.ImportRoots {
	t.Helper()
	r, err := confine.OpenImportRoots(dirs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAPISourcesOnlyInsideImportRoots: through the API, an admin's and a
// superadmin's draft of a local path is refused outside the import roots,
// with one answer for existing and missing paths that holds no byte of
// them; inside a root it works; a link in a root leading out is refused;
// an ordinary user may read no local path at all. The command line reads
// any path.
func TestAPISourcesOnlyInsideImportRoots(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "out")
	skillDir(t, filepath.Join(root, "pdf"), "name: pdf\ndescription: inside the root")
	skillDir(t, out, "name: secret\ndescription: OUTSIDE-SECRET")
	skilltest.WriteDir(t, root, fstest.MapFS{"link-out": skilltest.Symlink(out)})
	t.Setenv("SKILLFS_TEST_ENV_MARKER", "ENVIRON-SECRET")
	c := openWith(t, Options{ImportRoots: rootsOf(t, root)})
	putUsers(t, c, "alice")
	if err := c.PutUser(ctx, "", skills.User{UID: "carol", Role: skills.RoleAdmin}, true); err != nil {
		t.Fatal(err)
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	prepare := func(as, src string) error {
		t.Helper()
		d, err := c.Prepare(ctx, ImportRequest{Source: src, As: as, API: true})
		if err == nil {
			return nil
		}
		if d != nil {
			t.Errorf("%q prepares %s: a draft with the error %v", as, src, err)
		}
		msg := err.Error()
		for _, leak := range []string{"OUTSIDE-SECRET", "ENVIRON-SECRET", "root:"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%q prepares %s: the refusal holds %q: %s", as, src, leak, msg)
			}
		}
		if len(shadow) > 0 && strings.Contains(msg, strings.SplitN(string(shadow), "\n", 2)[0]) {
			t.Errorf("%q prepares %s: the refusal holds a line of /etc/shadow", as, src)
		}
		return err
	}
	refused := []string{"/etc/shadow", "/etc/no-such-file", "/proc/self/environ", "/proc/no-such", "/dev/zero", out,
		filepath.Join(root, "link-out"), filepath.Join(root, "link-out", "SKILL.md"), filepath.Join(root, "link-out", "missing"),
		"file:///etc/shadow", "file:///etc/no-such-file#main", "/etc/shadow#main", base}
	for _, as := range []string{"", "carol"} { // the operator is a superadmin
		var first string
		for _, src := range refused {
			err := prepare(as, src)
			if !errors.Is(err, skills.ErrPermission) {
				t.Errorf("%q prepares %s: %v, want ErrPermission", as, src, err)
				continue
			}
			// One answer for every path outside, existing or not.
			msg := strings.Replace(err.Error(), src, "SOURCE", 1)
			if first == "" {
				first = msg
			} else if msg != first {
				t.Errorf("%q prepares %s: %q, unlike the others' %q", as, src, msg, first)
			}
		}
		if err := prepare(as, filepath.Join(root, "pdf")); err != nil {
			t.Errorf("%q prepares a folder in the root: %v", as, err)
		}
		if err := prepare(as, filepath.Join(root, "no-such")); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("%q prepares a missing path in the root: %v, want ErrNotFound", as, err)
		}
		if err := prepare(as, root+"/pdf/../../out"); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%q prepares a path with '..': %v, want ErrInvalid", as, err)
		}
	}
	for _, src := range append(refused, filepath.Join(root, "pdf")) {
		if err := prepare("alice", src); !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "admins only") {
			t.Errorf("alice prepares %s: %v, want admins only", src, err)
		}
	}
	// The command line, an operator at a shell, reads any path.
	if _, err := c.Prepare(ctx, ImportRequest{Source: out}); err != nil {
		t.Errorf("the command line prepares %s: %v", out, err)
	}
	// No roots: no local path through the API, whoever asks.
	none := open(t)
	if _, err := none.Prepare(ctx, ImportRequest{Source: filepath.Join(root, "pdf"), API: true}); !errors.Is(err, skills.ErrPermission) ||
		!strings.Contains(err.Error(), "--import-root") {
		t.Errorf("with no roots: %v", err)
	}
	// A curated source added through the API is read only inside a root.
	if _, err := c.AddCurated(ctx, CuratedRequest{Source: out, As: "carol", API: true}); !errors.Is(err, skills.ErrPermission) {
		t.Errorf("carol adds %s as curated through the API: %v", out, err)
	}
	if _, err := c.AddCurated(ctx, CuratedRequest{Source: root, As: "carol", API: true}); err != nil {
		t.Errorf("carol adds the root as curated through the API: %v", err)
	}
}

// TestAPIRewriteOnlyInsideImportRoots: a GitHub URL that git's
// configuration rewrites to a folder of this machine is read only when that
// folder is in an import root; the refusal does not say where it leads.
func TestAPIRewriteOnlyInsideImportRoots(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	mirror := filepath.Join(base, "mirror")
	bareRepo(t, filepath.Join(mirror, "acme", "skills.git"), "name: pub\ndescription: mirrored")
	config := filepath.Join(base, "gitconfig")
	if err := os.WriteFile(config, []byte("[url \"file://"+mirror+"/\"]\n\tinsteadOf = https://github.com/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	elsewhere := openWith(t, Options{ImportRoots: rootsOf(t, t.TempDir())})
	_, err := elsewhere.Prepare(ctx, ImportRequest{Source: "https://github.com/acme/skills.git", API: true})
	if !errors.Is(err, skills.ErrPermission) || strings.Contains(err.Error(), mirror) || !strings.Contains(err.Error(), "rewritten") {
		t.Errorf("a rewrite outside the roots: %v", err)
	}
	inside := openWith(t, Options{ImportRoots: rootsOf(t, mirror)})
	if d, err := inside.Prepare(ctx, ImportRequest{Source: "https://github.com/acme/skills.git", API: true}); err != nil || d.Skills[0].Description != "mirrored" {
		t.Errorf("a rewrite inside a root: %+v, %v", d, err)
	}
	if _, err := inside.Prepare(ctx, ImportRequest{Source: "https://github.com/acme/missing.git", API: true}); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("a missing repository inside a root: %v, want ErrNotFound", err)
	}
}

// bareRepo makes a bare repository at dir whose one commit (on main, and
// tagged v1) is a skill with the frontmatter front.
func bareRepo(t testing.TB, dir, front string) {
	t.Helper()
	work := skillDir(t, filepath.Join(t.TempDir(), "work"), front)
	runGit(t, work, "init", "-q", "-b", "main")
	runGit(t, work, "add", ".")
	runGit(t, work, "commit", "-q", "-m", "skill")
	runGit(t, work, "tag", "v1")
	runGit(t, work, "clone", "-q", "--bare", work, dir)
}

// runGit runs git in dir with a configuration of its own.
func runGit(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=a", "-c", "user.email=a@a"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

// gitBranch adds to the bare repository at bare a branch holding a skill
// with the frontmatter front, made from a clone of its main.
func gitBranch(t testing.TB, bare, branch, front string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	runGit(t, filepath.Dir(work), "clone", "-q", bare, work)
	runGit(t, work, "checkout", "-q", "-b", branch)
	skillDir(t, work, front)
	runGit(t, work, "commit", "-q", "-am", branch)
	runGit(t, work, "push", "-q", "origin", branch)
}

// rewriteTo points git's configuration's rewrite of https://gitlab.com/
// at base, as an operator edits it.
func rewriteTo(t testing.TB, config, base string) {
	t.Helper()
	if err := os.WriteFile(config, []byte("[url \""+base+"\"]\n\tinsteadOf = https://gitlab.com/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUpdateChecksTheSourceOfToday: a skill installed
// through the API from https://gitlab.com/... while a rewrite sent it to a
// remote is not updated from a folder of this machine once the operator
// points the rewrite there: not at the recorded ref, not at a branch the
// user names, not for an admin while the folder is in no import root; the
// refusal is a draft's (ErrPermission, the whole request), the skill is
// unchanged, and where the rewrite leads is not said. The command line
// (an operator at a shell) still updates from it.
func TestUpdateChecksTheSourceOfToday(t *testing.T) {
	ctx := context.Background()
	remote, local := t.TempDir(), t.TempDir()
	bareRepo(t, filepath.Join(remote, "team", "skills.git"), "name: pdf\ndescription: from the remote")
	bareRepo(t, filepath.Join(local, "team", "skills.git"), "name: pdf\ndescription: local main")
	gitBranch(t, filepath.Join(local, "team", "skills.git"), "secretbranch", "name: pdf\ndescription: LOCAL-SECRET")
	config := filepath.Join(t.TempDir(), "gitconfig")
	rewriteTo(t, config, gittest.Serve(t, remote))
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	c := open(t)
	putUsers(t, c, "alice")
	const url = "https://gitlab.com/team/skills.git"
	d, err := c.Prepare(ctx, ImportRequest{Source: url, As: "alice", API: true})
	if err != nil {
		t.Fatalf("alice drafts %s (a remote): %v", url, err)
	}
	if _, err := c.Confirm(ctx, "alice", d.ID, nil); err != nil {
		t.Fatal(err)
	}
	before, err := c.Show(ctx, "alice", "pdf")
	if err != nil || before.Description != "from the remote" {
		t.Fatalf("installed: %+v, %v", before, err)
	}

	rewriteTo(t, config, "file://"+local+"/")
	if _, err := c.Prepare(ctx, ImportRequest{Source: url, As: "alice", API: true}); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("alice drafts %s, now read from a folder here: %v, want ErrPermission", url, err)
	}
	for _, tc := range []struct{ as, ref, want string }{
		{"alice", "secretbranch", "admins only"},
		{"alice", "", "admins only"},
		{"", "secretbranch", "--import-root"}, // the operator, a superadmin: no import root holds the folder
	} {
		for _, dry := range []bool{false, true} {
			res, err := c.Update(ctx, UpdateRequest{As: tc.as, Slugs: []string{"pdf"}, Ref: tc.ref, DryRun: dry, API: true})
			if !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), tc.want) || len(res.Skills) != 0 {
				t.Errorf("%q updates pdf at %q through the API: %+v, %v; want refused (%s)", tc.as, tc.ref, res.Skills, err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), local) || strings.Contains(err.Error(), "LOCAL-SECRET")) {
				t.Errorf("the refusal shows the folder or its content: %v", err)
			}
		}
	}
	// --all: the skill fails on its own with the same refusal.
	res, err := c.Update(ctx, UpdateRequest{As: "alice", All: true, Ref: "secretbranch", API: true})
	if err != nil || len(res.Skills) != 1 || res.Skills[0].Status != UpdateFailed || !strings.Contains(res.Skills[0].Error, "admins only") {
		t.Errorf("alice updates --all: %+v, %v", res, err)
	}
	if after, err := c.Show(ctx, "alice", "pdf"); err != nil || after.Version != before.Version || len(after.Versions) != 1 {
		t.Fatalf("after the refused updates: %+v, %v; want the skill unchanged", after, err)
	}
	// The command line reads the folder, as a new import there would.
	res, err = c.Update(ctx, UpdateRequest{As: "alice", Slugs: []string{"pdf"}, Ref: "secretbranch"})
	if err != nil || res.Skills[0].Status != UpdateUpdated {
		t.Errorf("the command line updates pdf: %+v, %v", res, err)
	}
}

// TestUpdateFollowsTheCuratedRef: a user who installed a
// skill from an admin's local curated source, which she may not read
// herself, updates it at the curated ref only: a ref of an uncurated
// branch is refused as a draft of the source is; without a ref it follows
// the curated ref as it is today. Once the source is no longer curated it
// is not updated at all. An admin who may read the source (it is in an
// import root) updates it at any ref.
func TestUpdateFollowsTheCuratedRef(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := filepath.Join(root, "curated.git")
	bareRepo(t, bare, "name: pdf\ndescription: curated")
	gitBranch(t, bare, "secretbranch", "name: pdf\ndescription: UNCURATED-SECRET")
	c := openWith(t, Options{ImportRoots: rootsOf(t, root)})
	putUsers(t, c, "alice")
	if err := c.PutUser(ctx, "", skills.User{UID: "carol", Role: skills.RoleAdmin}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddCurated(ctx, CuratedRequest{Source: bare, Ref: "main"}); err != nil { // the operator, at a shell
		t.Fatal(err)
	}
	if _, err := c.InstallCurated(ctx, CuratedRequest{Name: "pdf", As: "alice"}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Show(ctx, "alice", "pdf")
	for _, ref := range []string{"secretbranch", "refs/tags/v1", "refs/heads/secretbranch"} {
		res, err := c.Update(ctx, UpdateRequest{As: "alice", Slugs: []string{"pdf"}, Ref: ref, API: true})
		if !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "admins only") || !strings.Contains(err.Error(), `curated source at ref "main"`) {
			t.Errorf("alice updates pdf at %s: %+v, %v; want refused as her draft of the source is", ref, res, err)
		}
	}
	if after, _ := c.Show(ctx, "alice", "pdf"); after.Version != before.Version || after.Description != "curated" {
		t.Fatalf("after the refused updates: %+v", after)
	}
	for _, ref := range []string{"", "main"} {
		res, err := c.Update(ctx, UpdateRequest{As: "alice", Slugs: []string{"pdf"}, Ref: ref, API: true})
		if err != nil || res.Skills[0].Status != UpdateUnchanged || res.Skills[0].Ref != "main" {
			t.Errorf("alice updates pdf at %q: %+v, %v; want the curated ref, unchanged", ref, res, err)
		}
	}
	// The curated ref as it is today.
	if err := c.db.RemoveCuratedSource(ctx, bare); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddCurated(ctx, CuratedRequest{Source: bare, Ref: "secretbranch"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Update(ctx, UpdateRequest{As: "alice", Slugs: []string{"pdf"}, API: true})
	if err != nil || res.Skills[0].Status != UpdateUpdated || res.Skills[0].Ref != "secretbranch" {
		t.Errorf("alice updates pdf once secretbranch is curated: %+v, %v", res, err)
	}
	// No longer curated: her update is refused as her draft would be.
	if err := c.db.RemoveCuratedSource(ctx, bare); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(ctx, UpdateRequest{As: "alice", Slugs: []string{"pdf"}, Ref: "main", API: true}); !errors.Is(err, skills.ErrPermission) {
		t.Errorf("alice updates pdf from a source no longer curated: %v", err)
	}
	// carol, an admin, may draft the source (in an import root): any ref.
	res, err = c.Update(ctx, UpdateRequest{As: "carol", Slugs: []string{"pdf"}, Ref: "refs/tags/v1", Force: true, API: true})
	if err != nil || res.Skills[0].Status != UpdateUpdated {
		t.Errorf("carol updates pdf at main: %+v, %v", res, err)
	}
}

// TestAPIRepositoryObjectsInsideImportRoots: a repository in an import
// root whose objects lie outside it — a .git file naming another
// repository's git directory, alternates borrowing another's objects — is
// not read through the API (ErrPermission, without saying where they lie),
// as a link out of the root is not; the command line reads it.
func TestAPIRepositoryObjectsInsideImportRoots(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "out")
	bareRepo(t, filepath.Join(out, "private.git"), "name: private\ndescription: OUTSIDE-SECRET")
	// A working tree whose .git file names the private repository.
	worktree := filepath.Join(root, "worktree")
	if err := os.MkdirAll(worktree, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(worktree, ".git"), []byte("gitdir: "+filepath.Join(out, "private.git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bare repository whose objects are the private one's, by alternates.
	borrower := filepath.Join(root, "borrower.git")
	runGit(t, base, "clone", "-q", "--bare", "--shared", filepath.Join(out, "private.git"), borrower)
	// And one of its own, inside the root.
	bareRepo(t, filepath.Join(root, "own.git"), "name: own\ndescription: inside")
	c := openWith(t, Options{ImportRoots: rootsOf(t, root)})
	for _, src := range []string{worktree + "#main", "file://" + worktree, borrower, borrower + "#v1"} {
		_, err := c.Prepare(ctx, ImportRequest{Source: src, API: true})
		if !errors.Is(err, skills.ErrPermission) || strings.Contains(err.Error(), out) || strings.Contains(err.Error(), "OUTSIDE-SECRET") {
			t.Errorf("the operator drafts %s through the API: %v; want ErrPermission naming nothing outside", src, err)
		}
		if _, err := c.Prepare(ctx, ImportRequest{Source: src}); err != nil {
			t.Errorf("the command line prepares %s: %v", src, err)
		}
	}
	if d, err := c.Prepare(ctx, ImportRequest{Source: filepath.Join(root, "own.git"), API: true}); err != nil || d.Skills[0].Description != "inside" {
		t.Errorf("a repository of its own in the root: %+v, %v", d, err)
	}
}

// TestExistingPathNamedLikeARef: a local repository whose own path holds a
// "#" is that path, read at its HEAD; the text after "#" is no ref of it
// (a path that exists is always that path), while PATH#ref, where only
// PATH exists, still names the ref.
func TestExistingPathNamedLikeARef(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	repo := filepath.Join(t.TempDir(), "repo#v1")
	bareRepo(t, repo, "name: pdf\ndescription: V1")
	gitBranch(t, repo, "main2", "name: pdf\ndescription: MAIN")
	runGit(t, repo, "symbolic-ref", "HEAD", "refs/heads/main2")
	d, err := c.Prepare(ctx, ImportRequest{Source: repo})
	if err != nil || len(d.Skills) != 1 || d.Skills[0].Description != "MAIN" {
		t.Fatalf("an existing path holding a #: %+v, %v; want its HEAD (MAIN)", d, err)
	}
	d, err = c.Prepare(ctx, ImportRequest{Source: repo + "#v1"})
	if err != nil || len(d.Skills) != 1 || d.Skills[0].Description != "V1" {
		t.Fatalf("PATH#v1: %+v, %v; want the tag (V1)", d, err)
	}
}
