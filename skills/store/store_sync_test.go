package store

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/source"
)

// A publish syncs the filesystem once, before the rename that makes the
// version visible, and writes no file of the tree with a sync of its own.
func TestPublishSyncsOnceBeforeRename(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	var syncs []string
	syncfsHook = func(p string) { syncs = append(syncs, p) }
	var atRename int
	publishHook = func() error {
		atRename = len(syncs)
		if _, err := os.Lstat(s.VersionPath("demo", h)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the version is visible before the rename: %v", err)
		}
		return nil
	}
	t.Cleanup(func() { syncfsHook, publishHook = nil, nil })
	meta := &VersionMeta{Skill: skills.Skill{Name: "demo"}}
	dir, created, err := s.Publish(staged, "demo", h, meta)
	if err != nil || !created {
		t.Fatalf("Publish = %q, %v, %v", dir, created, err)
	}
	if len(syncs) != 1 || atRename != 1 {
		t.Fatalf("%d syncs of the filesystem, %d of them before the rename; want 1 and 1", len(syncs), atRename)
	}
	if _, err := s.ReadMeta("demo", h); err != nil {
		t.Errorf("metadata of the published version: %v", err)
	}
}

// A publish stopped between its sync and its rename (here by a hook that
// fails it) publishes nothing and leaves nothing behind.
func TestPublishStoppedBeforeRename(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	publishHook = func() error { return errors.New("stopped") }
	t.Cleanup(func() { publishHook = nil })
	if _, _, err := s.Publish(staged, "demo", h, nil); err == nil {
		t.Fatal("Publish succeeded with the rename refused")
	}
	skilltest.AssertAbsent(t, staged)
	skilltest.AssertAbsent(t, s.VersionPath("demo", h))
	if vs, err := s.Versions(); err != nil || len(vs) != 0 {
		t.Fatalf("Versions = %v, %v; want none", vs, err)
	}
}

// A process killed after the sync and before the rename leaves the staged
// tree in the staging area, read-only, and no version; the next Open
// sweeps the staging area, and still no version is seen.
func TestPublishCrashBeforeRename(t *testing.T) {
	if root := os.Getenv("SKILLFS_TEST_PUBLISH_CRASH"); root != "" {
		s, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		// Nothing of the test's own temporary directories: os.Exit skips
		// their cleanup.
		src := filepath.Join(filepath.Dir(root), "src")
		skilltest.WriteDir(t, src, demoTree)
		staged, err := s.NewStaging()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := source.StageDir(src, staged, skills.DefaultLimits()); err != nil {
			t.Fatal(err)
		}
		h, _, _, err := TreeHash(staged)
		if err != nil {
			t.Fatal(err)
		}
		publishHook = func() error { os.Exit(42); return nil }
		s.Publish(staged, "demo", h, &VersionMeta{})
		t.Fatal("Publish returned instead of crashing")
	}
	root := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPublishCrashBeforeRename$")
	cmd.Env = append(os.Environ(), "SKILLFS_TEST_PUBLISH_CRASH="+root)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 42 {
		t.Fatalf("the publishing process did not crash where it should: %v\n%s", err, out)
	}
	left, err := os.ReadDir(filepath.Join(root, storeStagingDir))
	if err != nil || len(left) != 1 {
		t.Fatalf("staging area after the crash: %v, %v; want the staged tree", left, err)
	}
	leftover := filepath.Join(root, storeStagingDir, left[0].Name())
	if _, err := os.Stat(filepath.Join(leftover, skills.MetaFileName)); err != nil {
		t.Fatalf("the crash came before the tree was complete, so this test proves nothing: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(leftover, "SKILL.md")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("the crash came before the tree was frozen, so this test proves nothing: %v, %v", fi, err)
	}
	skilltest.AssertOnly(t, filepath.Join(root, storeSkillsDir))
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	skilltest.AssertOnly(t, filepath.Join(root, storeStagingDir))
	if vs, err := s.Versions(); err != nil || len(vs) != 0 {
		t.Fatalf("Versions after the crash = %v, %v; want none", vs, err)
	}
}
