package integration

import (
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// nodeBoundPerNode is what TestSessionsWalkALargeSkill lets the daemon's
// heap grow by per node the kernel holds: an order of magnitude under the
// 430-460 bytes a node cost when the daemon kept a node tree.
const nodeBoundPerNode = 50

// TestSessionsWalkALargeSkill: sessions each walking an 18,000-file skill
// (every entry stat'ed, so the kernel holds a node of each) grow the
// daemon's heap by next to nothing while they stay open, and closing them
// gives back what little they took. SKILLFS_NODE_SESSIONS sets how many
// (default 20), besides a first one whose walk makes what every session of
// the version shares (its tree, the FUSE server's buffers). The daemon runs with GOGC=10, so that its heap follows
// what is live within a few percent.
func TestSessionsWalkALargeSkill(t *testing.T) {
	sessions := 20
	if v := os.Getenv("SKILLFS_NODE_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SKILLFS_NODE_SESSIONS=%q: want a positive count", v)
		}
		sessions = n
	}
	t.Setenv("GOGC", "10")
	e := newEnv(t)
	e.serve()
	src := filepath.Join(t.TempDir(), "large")
	files := map[string]string{}
	for i := range 17999 {
		files[fmt.Sprintf("references/d%03d/f%05d.md", i/150, i)] = "reference text\n"
	}
	writeSkill(t, src, "name: large\ndescription: a skill of 18,000 files", files)
	e.ok("skill", "import", src, "--share", "global")
	e.ok("user", "add", "alice")
	c := newAPIClient(e.home)
	heap := func() float64 { return c.scrape(t)["go_memstats_heap_alloc_bytes"] }

	walk := func(dir string) (nodes int) {
		err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
			if err == nil && p != dir {
				nodes++
				_, err = d.Info()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	// A first session makes what every session of the version shares:
	// its tree, and the FUSE server's request buffers.
	walk(e.newSession("alice", "--skills", "large").Path)
	var open []sessionInfo
	for range sessions {
		open = append(open, e.newSession("alice", "--skills", "large"))
	}
	base := heap()
	forgets := c.scrape(t)[`skillfs_fuse_requests_total{op="FORGET"}`]
	nodes := 0
	for _, s := range open {
		nodes += walk(s.Path)
	}
	held := heap()
	for _, s := range open {
		e.ok("session", "close", s.ID)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c.scrape(t)[`skillfs_fuse_requests_total{op="FORGET"}`]-forgets >= float64(nodes) {
			break
		}
	}
	closed := heap()
	perNode := (held - base) / float64(nodes)
	t.Logf("%d sessions walked %d nodes: the daemon's heap %.1f MB before the walks, %.1f MB with the sessions open (%.2f bytes per node), %.1f MB once closed",
		sessions, nodes, base/1e6, held/1e6, perNode, closed/1e6)
	if perNode > nodeBoundPerNode {
		t.Errorf("the heap grew by %.0f bytes per node the kernel holds, want at most %d", perNode, nodeBoundPerNode)
	}
}
