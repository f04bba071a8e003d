package integration

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPythonOpenIoctlCounted: Python's open() asks isatty() of the file,
// an ioctl(TCGETS) the kernel sends to the daemon on every open. The
// daemon counts each (skillfs_fuse_requests_total{op="IOCTL"}) and answers
// ENOTTY, and Python reads the file.
func TestPythonOpenIoctlCounted(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	e := newEnv(t)
	e.serve()
	src := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, src, "name: notes\ndescription: notes", map[string]string{"notes.md": "some notes\n"})
	e.ok("skill", "import", src, "--share", "global")
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "notes")
	p := filepath.Join(s.Path, "notes", "notes.md")
	c := newAPIClient(e.home)
	const opens = 200
	const ioctl, enotty = `skillfs_fuse_requests_total{op="IOCTL"}`, `skillfs_fuse_request_errors_total{errno="ENOTTY",op="IOCTL"}`
	before := c.scrape(t)
	script := `import sys
for _ in range(int(sys.argv[2])):
    with open(sys.argv[1]) as f:
        assert f.read() == "some notes\n"
`
	if out, err := exec.Command(py, "-c", script, p, strconv.Itoa(opens)).CombinedOutput(); err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	after := c.scrape(t)
	sent, refused := after[ioctl]-before[ioctl], after[enotty]-before[enotty]
	t.Logf("%d Python open()+read(): %v IOCTL requests counted, %v answered ENOTTY", opens, sent, refused)
	if sent != opens || refused != opens {
		t.Errorf("%d opens: %v IOCTLs counted, %v answered ENOTTY; want %d of each", opens, sent, refused, opens)
	}
}
