package integration

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
)

// TestFileHandlesOfOtherSessions: from a bind of one session's view, as a
// sandbox gets it, a process holding CAP_DAC_READ_SEARCH (the test, as
// root) cannot open another user's private SKILL.md by guessing file
// handles for open_by_handle_at: not with {node id n, generation 0} for
// every small n (what opened it before), not with every owner and entry
// under its own generation, not with the other session's node ids under
// mutated generations. The kernel holds the other session's nodes
// meanwhile (its agent read them), which is when a guessed handle could
// decode.
func TestFileHandlesOfOtherSessions(t *testing.T) {
	e := newEnv(t)
	e.serve()
	src := t.TempDir()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	writeSkill(t, filepath.Join(src, "alice-notes"), "name: alice-notes\ndescription: alice's notes", map[string]string{"notes.md": "alice\n"})
	writeSkill(t, filepath.Join(src, "bob-secret"), "name: bob-secret\ndescription: bob's private skill", map[string]string{"secret.md": "bob's secret\n"})
	e.ok("skill", "import", filepath.Join(src, "alice-notes"), "--as", "alice")
	e.ok("skill", "import", filepath.Join(src, "bob-secret"), "--as", "bob")
	alice := e.newSession("alice", "--skills", "alice-notes")
	bob := e.newSession("bob", "--skills", "bob-secret")

	secret := map[uint64]string{}
	for _, rel := range []string{"bob-secret/SKILL.md", "bob-secret/secret.md", "bob-secret"} {
		p := filepath.Join(bob.Path, rel)
		if rel != "bob-secret" {
			if _, err := os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		secret[st.Ino] = rel
	}
	bobID, bobGen, _ := fusetest.HandleOf(t, filepath.Join(bob.Path, "bob-secret", "SKILL.md"))

	target := filepath.Join(t.TempDir(), "skills")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	e.ok("session", "mount", alice.ID, target)
	t.Cleanup(func() { e.run("session", "unmount", alice.ID, target) })
	own := filepath.Join(target, "alice-notes", "SKILL.md")
	if _, err := os.ReadFile(own); err != nil {
		t.Fatal(err)
	}
	ownID, ownGen, decodable := fusetest.HandleOf(t, own)
	mnt, err := unix.Open(target, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mnt)

	var handles []unix.FileHandle
	for n := uint64(1); n <= 4096; n++ {
		handles = append(handles, fusetest.Handle(n, 0))
	}
	const shift = 24 // a node id: its owner (a session or a grant) above, the entry below
	for o := uint64(1); o <= max(ownID, bobID)>>shift+2; o++ {
		for entry := uint64(0); entry <= 8; entry++ {
			for _, gen := range []uint32{0, 1, ownGen} {
				handles = append(handles, fusetest.Handle(o<<shift|entry, gen))
			}
		}
	}
	for id := range secret {
		for _, gen := range []uint32{0, ownGen, bobGen + 1, bobGen - 1, bobGen ^ 1, bobGen ^ 1<<31} {
			handles = append(handles, fusetest.Handle(id, gen))
		}
	}
	opened := 0
	for _, h := range handles {
		fd, err := unix.OpenByHandleAt(mnt, h, unix.O_RDONLY)
		if err != nil {
			continue
		}
		opened++
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Error(err)
		} else if rel, ok := secret[st.Ino]; ok {
			t.Errorf("a guessed handle (%x) opened bob's %s from alice's view", h.Bytes(), rel)
		}
		unix.Close(fd)
	}
	t.Logf("handles of the mount decodable: %v; %d guessed handles tried from alice's view, %d opened a file",
		decodable, len(handles), opened)
}
