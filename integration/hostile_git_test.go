package integration

import (
	"bytes"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gitInput runs git in the repository with stdin and returns its trimmed
// output, with the same scrubbed environment as gitRepo.git.
func (g *gitRepo) gitInput(in io.Reader, args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = g.dir
	cmd.Stdin = in
	env := []string{"HOME=" + g.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Skill Author", "GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_COMMITTER_NAME=Skill Author", "GIT_COMMITTER_EMAIL=author@example.org"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("git %v: %v\n%s", args, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// blob stores the bytes of r and returns their hash.
func (g *gitRepo) blob(r io.Reader) string {
	g.t.Helper()
	return g.gitInput(r, "hash-object", "-w", "--stdin")
}

// treeEntryOf is one entry of a crafted tree: mode 100644, 100755, 120000
// (blob) or 040000 (tree), its object and its name byte for byte.
type treeEntryOf struct{ mode, hash, name string }

// tree stores a tree of entries as given, names unchecked.
func (g *gitRepo) tree(entries ...treeEntryOf) string {
	g.t.Helper()
	var in bytes.Buffer
	for _, e := range entries {
		typ := "blob"
		if e.mode == "040000" {
			typ = "tree"
		}
		in.WriteString(e.mode + " " + typ + " " + e.hash + "\t" + e.name + "\x00")
	}
	return g.gitInput(&in, "mktree", "-z")
}

// branch commits tree on a new branch.
func (g *gitRepo) branch(name, tree string) {
	g.t.Helper()
	c := g.git("commit-tree", "-m", name, tree)
	g.git("update-ref", "refs/heads/"+name, c)
}

// dirBytes sums the sizes of the regular files below dir, ignoring what
// vanishes while it walks.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestHostileGitRepos imports crafted repositories through the real binary:
// a file far larger than its repository, a tree bomb of 100,000 paths, a
// .GIT directory, a depth bomb, one blob named many times and a ref that is
// an option. Each is refused quickly with exit 5 naming the limit or rule
// and the path in the repository, while the data directory's temporary area
// stays small, and nothing is left behind. (A symlink out of the repository
// is not refused but left out: TestImportSymlinksFromGitRepository.)
func TestHostileGitRepos(t *testing.T) {
	e := newCatalogEnv(t)
	e.ok("skill", "list")
	g := newGitRepo(t, filepath.Join(t.TempDir(), "hostile-repo"))
	manifest := g.blob(bytes.NewReader(goodManifest("crafted")))
	x := g.blob(strings.NewReader("x\n"))
	file := func(hash, name string) treeEntryOf { return treeEntryOf{"100644", hash, name} }
	dir := func(hash, name string) treeEntryOf { return treeEntryOf{"040000", hash, name} }

	// 100 MiB of zeros: a pack of about 100 KB.
	zeros := g.blob(&zeroStream{n: 100 << 20})
	g.branch("huge-blob", g.tree(file(manifest, "SKILL.md"), dir(g.tree(file(zeros, "zeros.bin")), "assets")))
	// Five levels of ten: 100,000 files from a few KB of trees.
	h, mode := g.blob(strings.NewReader("bomb\n")), "100644"
	for level := 0; level < 4; level++ {
		var es []treeEntryOf
		for i := 0; i < 10; i++ {
			es = append(es, treeEntryOf{mode, h, "n" + strconv.Itoa(i)})
		}
		h, mode = g.tree(es...), "040000"
	}
	var top []treeEntryOf
	for i := 0; i < 10; i++ {
		top = append(top, dir(h, "n"+strconv.Itoa(i)))
	}
	g.branch("tree-bomb", g.tree(append(top, file(manifest, "SKILL.md"))...))
	g.branch("upper-git", g.tree(file(manifest, "SKILL.md"), dir(g.tree(file(x, "config")), ".GIT")))
	g.branch("parent", g.tree(file(manifest, "SKILL.md"), dir(g.tree(file(x, "evil.txt")), "..")))
	deep := g.tree(file(x, "deep.txt"))
	for i := 0; i < 40; i++ {
		deep = g.tree(dir(deep, "d"))
	}
	g.branch("depth-bomb", g.tree(file(manifest, "SKILL.md"), dir(deep, "d")))
	// One MiB of zeros named 200 times: 200 MiB, within the size limits,
	// from a pack of a few KB.
	mib := g.blob(&zeroStream{n: 1 << 20})
	var copies []treeEntryOf
	for i := 0; i < 200; i++ {
		copies = append(copies, file(mib, "copy"+strconv.Itoa(1000+i)+".bin"))
	}
	g.branch("ratio", g.tree(file(manifest, "SKILL.md"), dir(g.tree(copies...), "assets")))
	g.git("symbolic-ref", "HEAD", "refs/heads/huge-blob")

	cases := []struct {
		name string
		ref  string
		want []string
	}{
		{"a 100 MiB file of zeros", "huge-blob", []string{"file-bytes limit", "assets/zeros.bin", "104857600 > 67108864"}},
		{"a tree bomb of 100,000 paths", "tree-bomb", []string{"files limit", "n1/n9/n9/n9/n9", "20001 > 20000"}},
		{"a .GIT directory", "upper-git", []string{`".GIT"`, "reserved for git"}},
		{"a .. directory", "parent", []string{`".."`, "parent directory"}},
		{"a depth bomb", "depth-bomb", []string{"depth limit", "33 > 32"}},
		{"one blob named 200 times", "ratio", []string{"compression-ratio limit"}},
		{"a ref that is an option", "--upload-pack=touch${IFS}pwned", []string{"invalid ref"}},
	}
	tmp := filepath.Join(e.home, "tmp")
	refused := 0
	var slowest time.Duration
	var most int64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := hostileState(t, e)
			var peak atomic.Int64
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					if n := dirBytes(tmp); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			src := g.dir + "#" + tc.ref
			r, took := e.runBounded(hostileTimeout, nil, "skill", "import", src, "--all")
			close(stop)
			<-done
			slowest, most = max(slowest, took), max(most, peak.Load())
			msg := r.stdout + r.stderr
			t.Logf("exit %d after %v, tmp peaked at %d KiB: %s", r.code, took.Round(time.Millisecond), peak.Load()>>10, strings.TrimSpace(msg))
			if r.code != 5 {
				t.Errorf("exit %d, want 5:\n%s", r.code, msg)
			}
			for _, w := range append([]string{g.dir}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not name %q:\n%s", w, msg)
				}
			}
			if took > 10*time.Second {
				t.Errorf("refusal took %v", took)
			}
			if peak.Load() > 4<<20 {
				t.Errorf("the data directory's tmp grew to %d KiB", peak.Load()>>10)
			}
			checkNamesNoTemp(t, e, msg)
			checkUnchanged(t, e, before)
			if _, err := os.Stat(filepath.Join(g.dir, "pwned")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a ref ran a command: %v", err)
			}
			if !t.Failed() {
				refused++
			}
		})
	}
	t.Logf("hostile git repositories: %d tried, %d refused with exit 5 naming the rule and the path; slowest %v, tmp peak %d KiB; store unchanged",
		len(cases), refused, slowest.Round(time.Millisecond), most>>10)
}
