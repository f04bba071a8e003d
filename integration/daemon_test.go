package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/api/apitest"
)

// sessionInfo is the JSON of `session create|show|refresh --json`.
type sessionInfo struct {
	ID       string   `json:"id"`
	User     string   `json:"user"`
	Readable []string `json:"readable"`
	Preload  []string `json:"preload"`
	Path     string   `json:"path"`
	Binds    []struct {
		Target string `json:"target"`
		PID    int    `json:"pid"`
	} `json:"binds"`
}

// targets lists the bind targets of a session.
func (s sessionInfo) targets() []string {
	out := []string{}
	for _, b := range s.Binds {
		out = append(out, b.Target)
	}
	return out
}

// activationRow is one element of the "activated" list.
type activationRow struct {
	Slug    string    `json:"slug"`
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
	Opens   int       `json:"opens"`
}

// activationsInfo is the JSON of `session activations --json`.
type activationsInfo struct {
	Activated []activationRow `json:"activated"`
	Preloaded []string        `json:"preloaded"`
	Tools     []string        `json:"tools"`
	MCPs      []string        `json:"mcps"`
}

// opens returns how often slug was opened, or -1 when it is not activated.
func (a activationsInfo) opens(slug string) int {
	for _, r := range a.Activated {
		if r.Slug == slug {
			return r.Opens
		}
	}
	return -1
}

func (a activationsInfo) slugs() []string {
	out := []string{}
	for _, r := range a.Activated {
		out = append(out, r.Slug)
	}
	return out
}

// newSession creates a session through the CLI.
func (e *env) newSession(user string, flags ...string) sessionInfo {
	e.t.Helper()
	var s sessionInfo
	e.okJSON(&s, append([]string{"session", "create", "--user", user}, flags...)...)
	if s.ID == "" || s.Path == "" {
		e.t.Fatalf("session create gave no id or path: %+v", s)
	}
	return s
}

// activationsOf asks the CLI for a session's activations.
func (e *env) activationsOf(id string) activationsInfo {
	e.t.Helper()
	var a activationsInfo
	e.okJSON(&a, "session", "activations", id)
	return a
}

// apiClient talks HTTP to the daemon over its Unix socket, reusing one
// connection, for measurements where spawning the CLI would dominate.
// Every request and answer is checked against the OpenAPI document: each
// method fails its test for what does not conform (see conform).
type apiClient struct {
	hc    *http.Client
	check *apitest.Transport
}

func newAPIClient(home string) *apiClient {
	sock := filepath.Join(home, "skillfs.sock")
	check := &apitest.Transport{Contract: contract, Base: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	return &apiClient{hc: &http.Client{Transport: check}, check: check}
}

// newTimingClient is an apiClient that checks nothing against the OpenAPI
// document, for measurements: checking an answer of 10,000 skills costs
// the test more than the daemon takes to give it. What it sends is what
// other tests send through checking clients.
func newTimingClient(home string) *apiClient {
	c := newAPIClient(home)
	c.hc.Transport, c.check = c.check.Base, nil
	return c
}

// conform fails t for every request or answer since the last call that
// does not conform to the OpenAPI document.
func (c *apiClient) conform(t testing.TB) {
	t.Helper()
	if c.check == nil {
		return
	}
	for _, v := range c.check.Take() {
		t.Errorf("OpenAPI contract: %s", v)
	}
}

func (c *apiClient) get(t testing.TB, path string, v any) {
	t.Helper()
	c.getHeader(t, path, v)
}

// getHeader is get that returns the answer's header.
func (c *apiClient) getHeader(t testing.TB, path string, v any) http.Header {
	t.Helper()
	resp, err := c.hc.Get("http://skillfs" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	c.conform(t)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decode %q: %v", path, body, err)
	}
	return resp.Header
}

// errnoOf extracts the errno of a failed system call, or 0.
func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return 0
}

// fixture is a skill written into a source directory for import.
type fixture struct {
	slug, description string
	files             map[string]string // relative path → content; ".sh" files are executable
}

// fixtureSkills are test skills with nested files, a script and a nested
// SKILL.md that is not the skill's own.
var fixtureSkills = []fixture{
	{slug: "alpha", description: "Alpha does things. Use it for tests.", files: map[string]string{
		"scripts/run.sh":              "#!/bin/sh\necho alpha-ok\n",
		"references/guide.md":         "# Guide\n\nRead me.\n",
		"references/deep/note.txt":    "a deep note\n",
		"sub/SKILL.md":                "---\nname: not-a-skill\ndescription: a nested manifest\n---\n\nNot the skill's own.\n",
		"references/deep/deeper/x.md": "x\n",
	}},
	{slug: "beta", description: "Beta helps with other tests.", files: map[string]string{
		"assets/data.bin":   "\x00\x01\x02binary\xff",
		"scripts/beta.sh":   "#!/bin/sh\necho beta-ok\n",
		"references/api.md": "beta api\n",
	}},
	{slug: "gamma", description: "Gamma is never requested.", files: map[string]string{
		"references/g.md": "gamma\n",
	}},
}

// writeFixtures writes skills under root/skills/<slug>/ and returns root.
func writeFixtures(t testing.TB, root string, list []fixture) string {
	t.Helper()
	for _, f := range list {
		writeSkill(t, filepath.Join(root, "skills", f.slug),
			fmt.Sprintf("name: %s\ndescription: %q", f.slug, f.description), f.files)
	}
	return root
}

// importFixtures imports every skill of list, readable by everyone.
func (e *env) importFixtures(list []fixture) string {
	e.t.Helper()
	src := writeFixtures(e.t, filepath.Join(filepath.Dir(e.home), "src"), list)
	var res struct {
		Installed []struct {
			Slug string `json:"slug"`
		} `json:"installed"`
	}
	e.okJSON(&res, "skill", "import", src, "--all", "--share", "global")
	if len(res.Installed) != len(list) {
		e.t.Fatalf("imported %d skills, want %d: %+v", len(res.Installed), len(list), res)
	}
	return src
}

// TestSessionViewConformance runs fstest.TestFS over a live session mount
// and checks what it must not show: skills outside the set, the other
// sessions, hidden bookkeeping names.
func TestSessionViewConformance(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	src := e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	other := e.newSession("alice", "--skills", "gamma")
	s := e.newSession("alice", "--skills", "alpha,beta")
	if want := []string{"alpha", "beta"}; !slices.Equal(s.Readable, want) {
		t.Fatalf("readable = %v, want %v", s.Readable, want)
	}

	var expected []string
	for _, f := range fixtureSkills[:2] {
		expected = append(expected, f.slug+"/SKILL.md")
		for name := range f.files {
			if !strings.Contains(name, ".skillfs") {
				expected = append(expected, f.slug+"/"+name)
			}
		}
	}
	sort.Strings(expected)
	fsys := os.DirFS(s.Path)
	if err := fstest.TestFS(fsys, expected...); err != nil {
		t.Fatalf("fstest.TestFS over the session mount: %v", err)
	}

	// Every file the view shows is one we wrote, byte for byte, with the
	// source's execute bit; nothing else is shown.
	var seen []string
	err := iofs.WalkDir(fsys, ".", func(p string, de iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(de.Name(), ".skillfs") {
			t.Errorf("hidden name %q is listed", p)
		}
		if de.IsDir() {
			return nil
		}
		seen = append(seen, p)
		got, err := iofs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(src, "skills", filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("%s is served but is not in the source: %v", p, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: served %q, source holds %q", p, got, want)
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		wantMode := iofs.FileMode(0o444)
		if strings.HasSuffix(p, ".sh") {
			wantMode = 0o555
		}
		if info.Mode() != wantMode {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), wantMode)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the session mount: %v", err)
	}
	sort.Strings(seen)
	if !slices.Equal(seen, expected) {
		t.Errorf("files served:\n%v\nwant:\n%v", seen, expected)
	}

	absent := []struct{ name, path string }{
		{"skill outside the set", "gamma"},
		{"file of a skill outside the set", "gamma/SKILL.md"},
		{"builtin not requested", "commit-messages"},
		{"the store's metadata of the version", "alpha/.skillfs-version.json"},
		{"another session's id inside this one", other.ID},
	}
	for _, c := range absent {
		t.Run("absent/"+c.name, func(t *testing.T) {
			_, err := os.Stat(filepath.Join(s.Path, c.path))
			if errnoOf(err) != syscall.ENOENT {
				t.Fatalf("stat %s: %v, want ENOENT", c.path, err)
			}
		})
	}

	t.Run("mount root reveals no session", func(t *testing.T) {
		names, err := os.ReadDir(d.mount)
		if err == nil && len(names) > 0 {
			t.Fatalf("listing the mount root gave %d entries (%v); it must fail or be empty", len(names), names)
		}
		t.Logf("listing the mount root: %v (%d entries)", err, len(names))
		// Knowing an id is the capability: the other session is still there.
		if _, err := os.Stat(filepath.Join(d.mount, other.ID, "gamma", "SKILL.md")); err != nil {
			t.Fatalf("stat a known session by id: %v", err)
		}
		if _, err := os.Stat(filepath.Join(d.mount, strings.Repeat("0", 32))); errnoOf(err) != syscall.ENOENT {
			t.Fatalf("stat an unknown session id: %v, want ENOENT", err)
		}
	})
}

// TestMountRefusesWrites: every mutating system call through the real mount
// fails with EROFS and changes nothing.
func TestMountRefusesWrites(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	skill := filepath.Join(s.Path, "commit-messages")
	file := filepath.Join(skill, "SKILL.md")
	script := filepath.Join(skill, "scripts", "check-commit-msg.sh")
	dir := filepath.Join(skill, "scripts")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	openFlags := func(p string, flags int) func() error {
		return func() error {
			fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
	}
	epoch := []unix.Timespec{unix.NsecToTimespec(0), unix.NsecToTimespec(0)}
	cases := []struct {
		name string
		op   func() error
	}{
		{"write", func() error { return os.WriteFile(file, []byte("changed"), 0o644) }},
		{"create", func() error {
			fd, err := unix.Creat(filepath.Join(skill, "new.txt"), 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"create in session dir", openFlags(filepath.Join(s.Path, "new.txt"), unix.O_WRONLY|unix.O_CREAT)},
		{"mkdir", func() error { return unix.Mkdir(filepath.Join(skill, "newdir"), 0o755) }},
		{"mkdir in session dir", func() error { return unix.Mkdir(filepath.Join(s.Path, "newskill"), 0o755) }},
		{"mkdir in mount root", func() error { return unix.Mkdir(filepath.Join(d.mount, "newsession"), 0o755) }},
		{"unlink", func() error { return unix.Unlink(file) }},
		{"rmdir", func() error { return unix.Rmdir(dir) }},
		{"rmdir skill", func() error { return unix.Rmdir(skill) }},
		{"rename file", func() error { return unix.Rename(file, filepath.Join(skill, "RENAMED.md")) }},
		{"rename dir", func() error { return unix.Rename(dir, filepath.Join(skill, "bin")) }},
		{"link", func() error { return unix.Link(file, filepath.Join(skill, "hard.md")) }},
		{"symlink", func() error { return unix.Symlink("SKILL.md", filepath.Join(skill, "sym.md")) }},
		{"chmod", func() error { return unix.Chmod(file, 0o777) }},
		{"chmod dir", func() error { return unix.Chmod(dir, 0o777) }},
		{"chown", func() error { return unix.Chown(file, 1000, 1000) }},
		{"truncate", func() error { return unix.Truncate(file, 0) }},
		{"utimes", func() error { return unix.UtimesNano(file, epoch) }},
		{"setxattr", func() error { return unix.Setxattr(file, "user.skillfs-test", []byte("x"), 0) }},
		{"removexattr", func() error { return unix.Removexattr(file, "user.skillfs-test") }},
		{"mknod fifo", func() error { return unix.Mknod(filepath.Join(skill, "fifo"), unix.S_IFIFO|0o644, 0) }},
		{"open O_WRONLY", openFlags(file, unix.O_WRONLY)},
		{"open O_RDWR", openFlags(file, unix.O_RDWR)},
		{"open O_WRONLY|O_APPEND", openFlags(script, unix.O_WRONLY|unix.O_APPEND)},
		{"open O_TRUNC", openFlags(file, unix.O_RDONLY|unix.O_TRUNC)},
		{"open O_CREAT new name", openFlags(filepath.Join(skill, "created.md"), unix.O_RDONLY|unix.O_CREAT)},
		{"open O_CREAT|O_EXCL", openFlags(filepath.Join(dir, "excl.sh"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.op(); errnoOf(err) != syscall.EROFS {
				t.Fatalf("%s: %v, want EROFS", c.name, err)
			}
		})
	}
	after, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("SKILL.md changed or unreadable after the write attempts: %v", err)
	}
	names, err := os.ReadDir(skill)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	if want := []string{"SKILL.md", "scripts"}; !slices.Equal(got, want) {
		t.Fatalf("skill directory after the write attempts holds %v, want %v", got, want)
	}
	// The failed opens of SKILL.md are no activations: only the first read
	// counts (the second came from the kernel's cache).
	if a := e.activationsOf(s.ID); len(a.Activated) != 1 || a.opens("commit-messages") != 1 {
		t.Fatalf("activations = %+v, want commit-messages read once (the first read above)", a.Activated)
	}
}

// TestActivation: only a successful read-only open of a skill's own
// SKILL.md activates it, visibly as soon as the open returns, and the tools
// and MCP servers to load are those the activated skills themselves need.
func TestActivation(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	for _, tool := range []string{"shell", "browser", "grep"} {
		e.ok("tool", "add", tool)
	}
	e.ok("mcp", "add", "github")
	e.ok("mcp", "add", "jira")
	// alpha needs beta as a skill; beta's own tools load only when beta is
	// itself activated.
	e.ok("skill", "deps", "alpha", "--skill", "beta", "--tool", "shell", "--tool", "grep", "--mcp", "github")
	e.ok("skill", "deps", "beta", "--tool", "browser", "--mcp", "jira")

	s := e.newSession("alice", "--skills", "alpha")
	if want := []string{"alpha", "beta"}; !slices.Equal(s.Readable, want) {
		t.Fatalf("readable = %v, want %v", s.Readable, want)
	}
	alpha := filepath.Join(s.Path, "alpha")

	noActivation := []struct {
		name string
		op   func() error
	}{
		{"stat SKILL.md", func() error { _, err := os.Stat(filepath.Join(alpha, "SKILL.md")); return err }},
		{"lstat SKILL.md", func() error { _, err := os.Lstat(filepath.Join(alpha, "SKILL.md")); return err }},
		{"readdir skill", func() error { _, err := os.ReadDir(alpha); return err }},
		{"readdir session", func() error { _, err := os.ReadDir(s.Path); return err }},
		{"open nested SKILL.md", func() error { _, err := os.ReadFile(filepath.Join(alpha, "sub", "SKILL.md")); return err }},
		{"open other file", func() error { _, err := os.ReadFile(filepath.Join(alpha, "references", "guide.md")); return err }},
		{"open script", func() error { _, err := os.ReadFile(filepath.Join(alpha, "scripts", "run.sh")); return err }},
		{"open skill directory", func() error {
			f, err := os.Open(alpha)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"failed open O_WRONLY of SKILL.md", func() error {
			fd, err := unix.Open(filepath.Join(alpha, "SKILL.md"), unix.O_WRONLY, 0)
			if err == nil {
				unix.Close(fd)
				return errors.New("O_WRONLY open succeeded")
			}
			return nil
		}},
		{"failed open O_RDWR of SKILL.md", func() error {
			fd, err := unix.Open(filepath.Join(alpha, "SKILL.md"), unix.O_RDWR, 0)
			if err == nil {
				unix.Close(fd)
				return errors.New("O_RDWR open succeeded")
			}
			return nil
		}},
	}
	for _, c := range noActivation {
		if err := c.op(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if a := e.activationsOf(s.ID); len(a.Activated) != 0 || len(a.Tools) != 0 || len(a.MCPs) != 0 {
			t.Fatalf("after %s: activations = %+v, want none", c.name, a)
		}
	}

	// The first read is durable before it returns: no waiting here.
	data, err := os.ReadFile(filepath.Join(alpha, "SKILL.md"))
	if err != nil || len(data) == 0 {
		t.Fatalf("read alpha/SKILL.md: %v", err)
	}
	a := e.activationsOf(s.ID)
	if !slices.Equal(a.slugs(), []string{"alpha"}) || a.opens("alpha") != 1 {
		t.Fatalf("after opening alpha/SKILL.md: activated = %+v, want alpha once", a.Activated)
	}
	if want := []string{"grep", "shell"}; !sameSet(a.Tools, want) {
		t.Errorf("tools = %v, want %v (alpha's own, not beta's)", a.Tools, want)
	}
	if want := []string{"github"}; !sameSet(a.MCPs, want) {
		t.Errorf("mcps = %v, want %v", a.MCPs, want)
	}

	// A second read that reaches skillfs counts; then beta's own
	// activation brings its tools.
	if _, err := fetch(filepath.Join(alpha, "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(s.Path, "beta", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	a = e.activationsOf(s.ID)
	if !slices.Equal(a.slugs(), []string{"alpha", "beta"}) || a.opens("alpha") != 2 || a.opens("beta") != 1 {
		t.Fatalf("activated = %+v, want alpha twice then beta once", a.Activated)
	}
	if want := []string{"browser", "grep", "shell"}; !sameSet(a.Tools, want) {
		t.Errorf("tools = %v, want %v", a.Tools, want)
	}
	if want := []string{"github", "jira"}; !sameSet(a.MCPs, want) {
		t.Errorf("mcps = %v, want %v", a.MCPs, want)
	}
}

// TestActivationLatency measures how long the first read of a SKILL.md
// takes (it writes the activation durably) against later reads and the
// first read of another file, and how soon the activation is visible
// through the API.
func TestActivationLatency(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	api := newAPIClient(e.home)
	const rounds = 20
	var firstOpen, visible, againOpen, otherOpen []time.Duration
	for range rounds {
		s := e.newSession("alice", "--skills", "alpha")
		manifest := filepath.Join(s.Path, "alpha", "SKILL.md")
		other := filepath.Join(s.Path, "alpha", "references", "guide.md")
		// Resolve the names first, so only the opens are timed.
		for _, p := range []string{manifest, other} {
			if _, err := os.Stat(p); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		_, err := os.ReadFile(manifest)
		opened := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		var a activationsInfo
		api.get(t, "/v1/sessions/"+s.ID+"/activations", &a)
		seen := time.Now()
		if a.opens("alpha") != 1 {
			t.Fatalf("activation not visible right after the read returned: %+v", a.Activated)
		}
		firstOpen = append(firstOpen, opened.Sub(start))
		visible = append(visible, seen.Sub(start))

		start = time.Now()
		_, err = os.ReadFile(manifest)
		againOpen = append(againOpen, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		_, err = os.ReadFile(other)
		otherOpen = append(otherOpen, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("first read of SKILL.md (durable activation):     %s", summarize(firstOpen))
	t.Logf("read start to activation visible via API:        %s", summarize(visible))
	t.Logf("later read of SKILL.md (from the kernel's cache): %s", summarize(againOpen))
	t.Logf("first read of another file (no activation):      %s", summarize(otherOpen))
}

// summarize gives the median and maximum of a sample.
func summarize(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %v, max %v (n=%d)", s[len(s)/2].Round(time.Microsecond), s[len(s)-1].Round(time.Microsecond), len(s))
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestConcurrentActivationsSurviveRestart: 8 goroutines open SKILL.md files
// 1,000 times each across 20 sessions; after a clean restart every
// (session, skill) count is exact.
func TestConcurrentActivationsSurviveRestart(t *testing.T) {
	const (
		nSessions = 20
		workers   = 8
		perWorker = 1000
	)
	e := newEnv(t)
	// Every open counted: each reaches the daemon (--count-opens).
	d := e.serve("--count-opens")
	var list []fixture
	for i := range nSessions {
		list = append(list, fixture{slug: fmt.Sprintf("k%02d", i), description: fmt.Sprintf("Skill number %d.", i)})
	}
	e.importFixtures(list)
	e.ok("user", "add", "alice")
	type target struct{ session, slug, path string }
	var sessions []sessionInfo
	var targets [][2]target // per session: its two skills
	for i := range nSessions {
		a, b := list[i].slug, list[(i+1)%nSessions].slug
		s := e.newSession("alice", "--skills", a+","+b)
		sessions = append(sessions, s)
		targets = append(targets, [2]target{
			{s.ID, a, filepath.Join(s.Path, a, "SKILL.md")},
			{s.ID, b, filepath.Join(s.Path, b, "SKILL.md")},
		})
	}
	counts := make([]map[[2]string]int, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		counts[w] = map[[2]string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for j := range perWorker {
				n := w*perWorker + j
				tg := targets[n%nSessions][(n/nSessions+w)%2]
				f, err := os.Open(tg.path)
				if err != nil {
					errs <- err
					return
				}
				_, err = f.Read(buf)
				f.Close()
				if err != nil {
					errs <- err
					return
				}
				counts[w][[2]string{tg.session, tg.slug}]++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent open: %v", err)
	}
	want := map[[2]string]int{}
	total := 0
	for _, c := range counts {
		for k, n := range c {
			want[k] += n
			total += n
		}
	}
	if total != workers*perWorker {
		t.Fatalf("made %d opens, want %d", total, workers*perWorker)
	}
	check := func(when string) {
		t.Helper()
		for i, s := range sessions {
			a := e.activationsOf(s.ID)
			for _, tg := range targets[i] {
				if got, w := a.opens(tg.slug), want[[2]string{s.ID, tg.slug}]; got != w {
					t.Errorf("%s: session %d skill %s: %d opens, want %d", when, i, tg.slug, got, w)
				}
			}
			if len(a.Activated) != 2 {
				t.Errorf("%s: session %d activated %v, want its two skills", when, i, a.slugs())
			}
		}
	}
	check("before restart")
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, d.logs())
	}
	e.serve("--count-opens")
	check("after restart")
}

// TestOpensDuringShutdownAreCounted: every open that succeeded is counted,
// also those made while the daemon shuts down (and at most the few answered
// as it exits are counted without reaching their reader). The window is short, so this
// hammers opens from several goroutines across the SIGTERM.
func TestOpensDuringShutdownAreCounted(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--count-opens")
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	p := filepath.Join(s.Path, "commit-messages", "SKILL.md")
	var mu sync.Mutex
	opened := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			defer func() { mu.Lock(); opened += n; mu.Unlock() }()
			for {
				f, err := os.Open(p)
				if err != nil {
					return // the mount is gone
				}
				f.Close()
				n++
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d\n%s", code, d.logs())
	}
	wg.Wait()
	e.serve()
	// No open that succeeded goes uncounted. An open the daemon answered in
	// the instant it exits may be counted although its answer never reached
	// the reader (the process is gone before the reply is written): at most
	// one per reader.
	if got := e.activationsOf(s.ID).opens("commit-messages"); got < opened || got > opened+4 {
		t.Errorf("%d opens succeeded, %d were recorded", opened, got)
	}
}

// TestSessionsSharingVersionAreDistinct: two sessions pin the same version
// of a skill, yet opens are attributed to the session that made them and
// the files have different inode numbers in each.
func TestSessionsSharingVersionAreDistinct(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	a := e.newSession("alice", "--skills", "commit-messages")
	b := e.newSession("bob", "--skills", "commit-messages")
	for range 3 {
		if _, err := fetch(filepath.Join(a.Path, "commit-messages", "SKILL.md")); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if _, err := fetch(filepath.Join(b.Path, "commit-messages", "SKILL.md")); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.activationsOf(a.ID).opens("commit-messages"); got != 3 {
		t.Errorf("session a: %d opens, want 3", got)
	}
	if got := e.activationsOf(b.ID).opens("commit-messages"); got != 5 {
		t.Errorf("session b: %d opens, want 5", got)
	}
	for _, rel := range []string{"commit-messages", "commit-messages/SKILL.md", "commit-messages/scripts/check-commit-msg.sh"} {
		var sa, sb unix.Stat_t
		if err := unix.Stat(filepath.Join(a.Path, rel), &sa); err != nil {
			t.Fatal(err)
		}
		if err := unix.Stat(filepath.Join(b.Path, rel), &sb); err != nil {
			t.Fatal(err)
		}
		if sa.Ino == sb.Ino {
			t.Errorf("%s has inode %d in both sessions", rel, sa.Ino)
		}
	}
}

// TestSnapshotUntilRefresh: a new version of a skill does not change a
// running session's files until the session is refreshed.
func TestSnapshotUntilRefresh(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	src := filepath.Join(t.TempDir(), "delta")
	write := func(desc, a, b string) {
		writeSkill(t, src, "name: delta\ndescription: "+desc, map[string]string{
			"references/a.txt": a,
			"references/b.txt": b,
		})
	}
	write("Delta version one.", "one\n", "bee one\n")
	e.ok("skill", "import", src, "--share", "global")
	s := e.newSession("alice", "--skills", "delta")
	read := func(rel string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(s.Path, "delta", filepath.FromSlash(rel)))
		if err != nil {
			t.Fatalf("read %s: %v", rel, err)
		}
		return string(data)
	}
	oldManifest := read("SKILL.md")
	if got := read("references/a.txt"); got != "one\n" {
		t.Fatalf("a.txt = %q", got)
	}
	held, err := os.Open(filepath.Join(s.Path, "delta", "references", "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	write("Delta version two.", "two\n", "bee two\n")
	var res struct {
		Installed []struct {
			Slug, Version string
		} `json:"installed"`
	}
	e.okJSON(&res, "skill", "import", src)
	if len(res.Installed) != 1 || res.Installed[0].Slug != "delta" {
		t.Fatalf("re-import installed %+v, want a new version of delta", res.Installed)
	}

	// Pinned: nothing changes, also for a file never read before.
	if got := read("SKILL.md"); got != oldManifest {
		t.Errorf("SKILL.md changed before refresh: %q", got)
	}
	if got := read("references/a.txt"); got != "one\n" {
		t.Errorf("a.txt before refresh = %q, want the pinned %q", got, "one\n")
	}
	if got := read("references/b.txt"); got != "bee one\n" {
		t.Errorf("b.txt (first read after the re-import) = %q, want the pinned %q", got, "bee one\n")
	}

	var r sessionInfo
	e.okJSON(&r, "session", "refresh", s.ID)
	if !strings.Contains(read("SKILL.md"), "Delta version two.") {
		t.Errorf("SKILL.md after refresh is still the old version: %q", read("SKILL.md"))
	}
	if got := read("references/a.txt"); got != "two\n" {
		t.Errorf("a.txt after refresh = %q, want %q", got, "two\n")
	}
	if got := read("references/b.txt"); got != "bee two\n" {
		t.Errorf("b.txt after refresh = %q, want %q", got, "bee two\n")
	}
	// A handle opened on the old version keeps reading it.
	buf := make([]byte, 16)
	n, err := held.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		t.Errorf("read a handle opened before the refresh: %v", err)
	} else if string(buf[:n]) != "one\n" {
		t.Errorf("handle opened before the refresh reads %q, want %q", buf[:n], "one\n")
	}
}

// TestDisableRevokesAtOnce: `skill disable` takes the skill out of every
// session before the command returns, and open handles stop reading.
func TestDisableRevokesAtOnce(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "alpha,beta")
	if _, err := os.ReadFile(filepath.Join(s.Path, "alpha", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(s.Path, "alpha", "references", "deep", "note.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatalf("read before disable: %v", err)
	}

	e.ok("skill", "disable", "alpha")

	if got := listNames(t, s.Path); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("session lists %v right after disable, want [beta]", got)
	}
	for _, rel := range []string{"alpha", "alpha/SKILL.md", "alpha/references/deep/note.txt"} {
		if _, err := os.Stat(filepath.Join(s.Path, rel)); errnoOf(err) != syscall.ENOENT {
			t.Errorf("stat %s after disable: %v, want ENOENT", rel, err)
		}
	}
	n, err := f.ReadAt(buf, 0)
	if err == nil {
		t.Errorf("read of a handle opened before disable succeeded (%q); want it to fail", buf[:n])
	} else {
		t.Logf("read of a handle opened before disable: %v", err)
	}
	if a := e.activationsOf(s.ID); a.opens("alpha") != -1 {
		t.Errorf("a disabled skill still counts as activated: %+v", a.Activated)
	}

	// Grants wait for the next refresh.
	e.ok("skill", "enable", "alpha")
	if got := listNames(t, s.Path); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("session lists %v after enable, before refresh; want [beta]", got)
	}
	e.ok("session", "refresh", s.ID)
	if got := listNames(t, s.Path); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("session lists %v after refresh, want [alpha beta]", got)
	}
}

func listNames(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	out := []string{}
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// TestShareNarrowingRevokes: a user's skill shared globally and then back
// to its owner leaves another user's session at once.
func TestShareNarrowingRevokes(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	src := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, src, "name: alice-notes\ndescription: Alice's private notes.", map[string]string{"references/n.md": "n\n"})
	e.ok("--as", "alice", "skill", "import", src)
	if s := e.newSession("bob", "--all"); slices.Contains(s.Readable, "alice-notes") {
		t.Fatalf("bob reads alice's private skill before it is shared: %v", s.Readable)
	}
	e.ok("skill", "share", "alice-notes", "--read", "global")
	bob := e.newSession("bob", "--all")
	alice := e.newSession("alice", "--skills", "alice-notes")
	if !slices.Contains(bob.Readable, "alice-notes") {
		t.Fatalf("bob's readable set %v lacks the globally shared skill", bob.Readable)
	}
	if _, err := os.ReadFile(filepath.Join(bob.Path, "alice-notes", "SKILL.md")); err != nil {
		t.Fatalf("bob reads the shared skill: %v", err)
	}

	e.ok("skill", "share", "alice-notes", "--read", "user:alice")

	if got := listNames(t, bob.Path); slices.Contains(got, "alice-notes") {
		t.Errorf("bob's session still lists alice-notes right after the share was narrowed: %v", got)
	}
	if _, err := os.Stat(filepath.Join(bob.Path, "alice-notes", "SKILL.md")); errnoOf(err) != syscall.ENOENT {
		t.Errorf("stat in bob's session after narrowing: %v, want ENOENT", err)
	}
	if _, err := os.ReadFile(filepath.Join(alice.Path, "alice-notes", "references", "n.md")); err != nil {
		t.Errorf("alice lost her own skill: %v", err)
	}
}

// TestCrashRestart: after kill -9 the next start clears the dead mounts and
// brings every session back with its pinned versions, binds and recorded
// first activations.
func TestCrashRestart(t *testing.T) {
	e := newEnv(t)
	detachMountsAtCleanup(t, filepath.Dir(e.home))
	d := e.serve()
	src := e.importFixtures(fixtureSkills[:2])
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "alpha,beta")
	bindDir := t.TempDir()
	detachMountsAtCleanup(t, bindDir)
	bindAt := filepath.Join(bindDir, "sandbox", "skills")
	e.ok("session", "mount", s.ID, bindAt)
	oldManifest, err := os.ReadFile(filepath.Join(s.Path, "alpha", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(bindAt, "beta", "SKILL.md")); err != nil {
		t.Fatalf("read through the bind: %v", err)
	}
	before := e.activationsOf(s.ID)
	if !slices.Equal(before.slugs(), []string{"alpha", "beta"}) {
		t.Fatalf("activated before the crash = %v", before.slugs())
	}

	d.kill()
	if len(mountedUnder(t, d.mount)) == 0 {
		t.Fatalf("no dead mount left at %s by the crash; the test cannot check it is cleared", d.mount)
	}
	// The kernel still answers stat of the mount's root from its attribute
	// cache; anything that reaches the dead daemon fails.
	var st unix.Statfs_t
	if err := unix.Statfs(d.mount, &st); errnoOf(err) != syscall.ENOTCONN {
		t.Errorf("statfs of the dead mount: %v, want ENOTCONN", err)
	}
	if _, err := os.ReadDir(s.Path); errnoOf(err) != syscall.ENOTCONN {
		t.Errorf("list a session in the dead mount: %v, want ENOTCONN", err)
	}
	r := e.run("session", "list")
	if r.code != 7 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("session list with a crashed daemon: exit %d, stderr %q; want 7 and a clear message", r.code, r.stderr)
	}

	// A new version while the daemon is down must not reach the session.
	if err := os.WriteFile(filepath.Join(src, "skills", "alpha", "SKILL.md"),
		[]byte("---\nname: alpha\ndescription: Alpha, second version.\n---\n\nNew.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok("skill", "import", src, "--skill", "alpha")

	d2 := e.serve()
	if m := mountedUnder(t, d2.mount); len(m) != 1 {
		t.Errorf("mounts at %s after restart: %v, want exactly the live one", d2.mount, m)
	}
	if m := mountedUnder(t, bindAt); len(m) != 1 {
		t.Errorf("mounts at the bind target after restart: %v, want exactly one", m)
	}
	var shown sessionInfo
	e.okJSON(&shown, "session", "show", s.ID)
	if !slices.Equal(shown.Readable, s.Readable) || shown.Path != s.Path || !slices.Equal(shown.targets(), []string{bindAt}) {
		t.Errorf("session after restart = %+v, want readable %v at %s bound at %s", shown, s.Readable, s.Path, bindAt)
	}
	for _, root := range []string{s.Path, bindAt} {
		got, err := os.ReadFile(filepath.Join(root, "alpha", "SKILL.md"))
		if err != nil {
			t.Errorf("read alpha/SKILL.md under %s after restart: %v", root, err)
		} else if !bytes.Equal(got, oldManifest) {
			t.Errorf("alpha/SKILL.md under %s after restart is %q, want the pinned version", root, got)
		}
	}
	after := e.activationsOf(s.ID)
	for _, b := range before.Activated {
		found := false
		for _, a := range after.Activated {
			if a.Slug == b.Slug {
				found = true
				if !a.FirstAt.Equal(b.FirstAt) {
					t.Errorf("%s first activated at %v before the crash, %v after", b.Slug, b.FirstAt, a.FirstAt)
				}
			}
		}
		if !found {
			t.Errorf("activation of %s lost in the crash: %+v", b.Slug, after.Activated)
		}
	}
	if code := d2.stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d\n%s", code, d2.logs())
	}
	if m := mountedUnder(t, e.home); len(m) != 0 {
		t.Errorf("mounts left under the home: %v", m)
	}
	if m := mountedUnder(t, bindAt); len(m) != 0 {
		t.Errorf("bind left after SIGTERM: %v", m)
	}
}

// detachMountsAtCleanup lazily detaches whatever is still mounted below dir
// when the test ends, before its temporary directories are removed: a failed
// crash test must not leave dead FUSE mounts on the machine. Register it
// right after creating dir.
func detachMountsAtCleanup(t testing.TB, dir string) {
	t.Helper()
	t.Cleanup(func() {
		m := mountedUnder(t, dir)
		slices.Reverse(m) // innermost first
		for _, p := range m {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Errorf("detach %s: %v", p, err)
			}
		}
		if len(m) > 0 {
			t.Logf("detached mounts left at the end of the test: %v", m)
		}
	})
}

// TestSessionBind: `session mount` binds a session read-only at a target;
// unmount, shutdown and restart do what they say.
func TestSessionBind(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "release-notes")
	target := filepath.Join(t.TempDir(), "box", "skills")
	e.ok("session", "mount", s.ID, target)

	want, err := os.ReadFile(filepath.Join(s.Path, "release-notes", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	checkBound := func(when string) {
		t.Helper()
		if m := mountedUnder(t, target); !slices.Equal(m, []string{target}) {
			t.Fatalf("%s: mounts at the target = %v, want [%s]", when, m, target)
		}
		if got := listNames(t, target); !slices.Equal(got, []string{"commit-messages", "release-notes"}) {
			t.Errorf("%s: target lists %v", when, got)
		}
		got, err := fetch(filepath.Join(target, "release-notes", "SKILL.md"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read through the bind: %v, %d bytes, want %d", when, err, len(got), len(want))
		}
		if err := os.WriteFile(filepath.Join(target, "release-notes", "x"), []byte("x"), 0o644); errnoOf(err) != syscall.EROFS {
			t.Errorf("%s: write through the bind: %v, want EROFS", when, err)
		}
		if err := unix.Mkdir(filepath.Join(target, "new"), 0o755); errnoOf(err) != syscall.EROFS {
			t.Errorf("%s: mkdir through the bind: %v, want EROFS", when, err)
		}
	}
	checkBound("after mount")
	var shown sessionInfo
	e.okJSON(&shown, "session", "show", s.ID)
	if !slices.Equal(shown.targets(), []string{target}) {
		t.Errorf("session show binds = %v, want [%s]", shown.targets(), target)
	}
	// One read through the session path above, one through the bind.
	if a := e.activationsOf(s.ID); a.opens("release-notes") != 2 {
		t.Errorf("activations = %+v, want release-notes read twice (once through the bind)", a.Activated)
	}

	e.ok("session", "unmount", s.ID, target)
	if m := mountedUnder(t, target); len(m) != 0 {
		t.Fatalf("still mounted after unmount: %v", m)
	}
	if _, err := os.Stat(filepath.Join(target, "release-notes")); errnoOf(err) != syscall.ENOENT {
		t.Errorf("stat under the target after unmount: %v, want ENOENT", err)
	}
	if r := e.run("session", "unmount", s.ID, target); r.code != 3 {
		t.Errorf("unmount of a target not bound: exit %d, want 3", r.code)
	}

	e.ok("session", "mount", s.ID, target)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d\n%s", code, d.logs())
	}
	if m := mountedUnder(t, target); len(m) != 0 {
		t.Errorf("bind left after SIGTERM: %v", m)
	}
	if m := mountedUnder(t, e.home); len(m) != 0 {
		t.Errorf("mount left under the home after SIGTERM: %v", m)
	}

	e.serve()
	checkBound("after restart")
}

// promptXML is the shape of `session prompt --format xml`.
type promptXML struct {
	XMLName xml.Name `xml:"available_skills"`
	Skills  []struct {
		Name        string `xml:"name"`
		Description string `xml:"description"`
		Location    string `xml:"location"`
		Content     string `xml:"content"`
	} `xml:"skill"`
}

// TestSessionPrompt: the prompt block names every readable skill with its
// description and location, escaped; preloaded skills are inlined.
func TestSessionPrompt(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	const desc = `Handles <tags> & "quotes" > all. Use for escaping tests.`
	const body = "# Angle\n\nUse <b>bold</b> & friends.\n"
	src := filepath.Join(t.TempDir(), "angle")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "---\nname: Angle brackets\nslug: angle\ndescription: '" + desc + "'\n---\n\n" + body
	if err := os.WriteFile(filepath.Join(src, "SKILL.md"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok("skill", "import", src, "--share", "global")

	s := e.newSession("alice", "--skills", "angle,release-notes")
	wantSkills := map[string]string{ // name → description
		"Angle brackets": desc,
	}
	var list []struct {
		Slug, Name, Description string
	}
	e.okJSON(&list, "skill", "list")
	for _, sk := range list {
		if sk.Slug == "release-notes" || sk.Slug == "commit-messages" {
			wantSkills[sk.Name] = sk.Description
		}
	}
	locations := map[string]string{
		"Angle brackets": "/home/gem/skills/angle/SKILL.md",
	}

	t.Run("xml", func(t *testing.T) {
		out := e.ok("session", "prompt", s.ID, "--format", "xml")
		if strings.Contains(out, "<tags>") || strings.Contains(out, "& ") {
			t.Errorf("description is not escaped:\n%s", out)
		}
		var p promptXML
		if err := xml.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("prompt is not well-formed XML: %v\n%s", err, out)
		}
		if len(p.Skills) != len(s.Readable) {
			t.Errorf("prompt has %d skills, session reads %v", len(p.Skills), s.Readable)
		}
		for _, sk := range p.Skills {
			if d, ok := wantSkills[sk.Name]; !ok || d != sk.Description {
				t.Errorf("skill %q: description %q, want %q", sk.Name, sk.Description, d)
			}
			if l, ok := locations[sk.Name]; ok && l != sk.Location {
				t.Errorf("skill %q: location %q, want %q", sk.Name, sk.Location, l)
			}
			if !strings.HasPrefix(sk.Location, "/home/gem/skills/") || !strings.HasSuffix(sk.Location, "/SKILL.md") {
				t.Errorf("skill %q: location %q", sk.Name, sk.Location)
			}
			if sk.Content != "" {
				t.Errorf("skill %q is inlined without preload", sk.Name)
			}
		}
	})
	t.Run("markdown", func(t *testing.T) {
		out := e.ok("session", "prompt", s.ID, "--format", "markdown")
		if strings.Contains(out, "<tags>") {
			t.Errorf("description is not escaped:\n%s", out)
		}
		for _, want := range []string{"Angle brackets", "/home/gem/skills/angle/SKILL.md", "&lt;tags&gt;",
			"/home/gem/skills/release-notes/SKILL.md", "/home/gem/skills/commit-messages/SKILL.md"} {
			if !strings.Contains(out, want) {
				t.Errorf("markdown prompt lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("no skills", func(t *testing.T) {
		empty := e.newSession("alice")
		if len(empty.Readable) != 0 {
			t.Fatalf("a session with no skills reads %v", empty.Readable)
		}
		for _, format := range []string{"xml", "markdown"} {
			if out := e.ok("session", "prompt", empty.ID, "--format", format); out != "" {
				t.Errorf("%s prompt of an empty session = %q, want empty", format, out)
			}
		}
	})
	t.Run("preload", func(t *testing.T) {
		p := e.newSession("alice", "--skills", "angle,commit-messages", "--preload", "angle")
		out := e.ok("session", "prompt", p.ID, "--format", "xml")
		var px promptXML
		if err := xml.Unmarshal([]byte(out), &px); err != nil {
			t.Fatalf("prompt is not well-formed XML: %v\n%s", err, out)
		}
		for _, sk := range px.Skills {
			switch sk.Name {
			case "Angle brackets":
				if strings.TrimSpace(sk.Content) != strings.TrimSpace(manifest) {
					t.Errorf("preloaded content = %q, want the SKILL.md %q", sk.Content, manifest)
				}
			default:
				if sk.Content != "" {
					t.Errorf("%s is inlined but not preloaded", sk.Name)
				}
			}
		}
		md := e.ok("session", "prompt", p.ID, "--format", "markdown")
		if !strings.Contains(md, strings.TrimSpace(body)) {
			t.Errorf("markdown prompt does not inline the preloaded SKILL.md:\n%s", md)
		}
		a := e.activationsOf(p.ID)
		if !slices.Equal(a.Preloaded, []string{"angle"}) || len(a.Activated) != 0 {
			t.Errorf("activations of a preloading session = %+v, want angle preloaded and nothing activated", a)
		}
	})
}

// TestSessionCommandsWithoutDaemon: every session command says the daemon is
// not running and exits 7.
func TestSessionCommandsWithoutDaemon(t *testing.T) {
	e := newEnv(t)
	e.ok("user", "add", "alice") // the data directory exists, the daemon does not run
	cases := []struct {
		name string
		args []string
	}{
		{"create", []string{"session", "create", "--user", "alice", "--skills", "commit-messages"}},
		{"list", []string{"session", "list"}},
		{"show", []string{"session", "show", "0123456789abcdef0123456789abcdef"}},
		{"activations", []string{"session", "activations", "0123456789abcdef0123456789abcdef"}},
		{"prompt", []string{"session", "prompt", "0123456789abcdef0123456789abcdef"}},
		{"mount", []string{"session", "mount", "0123456789abcdef0123456789abcdef", filepath.Join(t.TempDir(), "x")}},
		{"list json", []string{"session", "list", "--json"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(c.args...)
			if r.code != 7 {
				t.Fatalf("exit %d, want 7\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "daemon is not running") || !strings.Contains(r.stderr, "skillfs serve") {
				t.Errorf("stderr %q does not say the daemon is not running and how to start it", r.stderr)
			}
		})
	}
}
