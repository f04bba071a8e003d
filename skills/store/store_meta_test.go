package store

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/source"
)

func testMeta(slug string) *VersionMeta {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &VersionMeta{
		Skill: skills.Skill{Slug: slug, Name: "Demo", Description: "d", SourceType: skills.SourceUpload, Source: "local:/src",
			Enabled: true, Share: skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}, Creator: "alice", CreatedAt: at, UpdatedAt: at},
		Version: skills.Version{SourceType: skills.SourceUpload, Source: "local:/src", Installer: "alice", InstalledAt: at, Files: 2, Bytes: 20},
	}
}

// The metadata a version is published with comes back from the store, is
// not part of the content's hash, and is not exported.
func TestPublishWritesMetadata(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	dir, _, err := s.Publish(staged, "demo", h, testMeta("demo"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.ReadMeta("demo", h)
	if err != nil {
		t.Fatal(err)
	}
	if m.Skill.Creator != "alice" || m.Version.Hash != h || m.Version.Slug != "demo" || m.Skill.Version != h ||
		m.Version.Path != "store/skills/demo/"+h || m.Version.Source != "local:/src" {
		t.Errorf("metadata read back: %+v", m)
	}
	if fi, err := os.Stat(filepath.Join(dir, skills.MetaFileName)); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("metadata file: %v %v", fi, err)
	}
	if got, _, _, err := TreeHash(dir); err != nil || got != h {
		t.Errorf("tree hash with metadata = %s, %v; want %s", got, err, h)
	}
	var zipped strings.Builder
	if err := WriteZip(&zipped, dir, "demo/"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(zipped.String(), skills.MetaFileName) {
		t.Error("export holds the store's metadata file")
	}
}

// Versions published before metadata existed get it without a new hash.
func TestWriteMetaBackfills(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	if _, _, err := s.Publish(staged, "demo", h, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadMeta("demo", h); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("ReadMeta without metadata = %v, want ErrNotFound", err)
	}
	if err := s.WriteMeta("demo", h, testMeta("demo")); err != nil {
		t.Fatal(err)
	}
	if m, err := s.ReadMeta("demo", h); err != nil || m.Skill.Creator != "alice" {
		t.Fatalf("ReadMeta after WriteMeta = %+v, %v", m, err)
	}
	if fi, err := os.Stat(s.VersionPath("demo", h)); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("version directory after backfill: %v %v", fi.Mode(), err)
	}
	if got, _, _, err := TreeHash(s.VersionPath("demo", h)); err != nil || got != h {
		t.Errorf("hash after backfill %s %v", got, err)
	}
}

// Metadata that names another version is not believed.
func TestReadMetaRefusesAForeignRecord(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	if _, _, err := s.Publish(staged, "demo", h, testMeta("other")); err != nil {
		t.Fatal(err)
	}
	// Publish binds the record to its version; tamper with it afterwards.
	dir := s.VersionPath("demo", h)
	chmod(t, dir, 0o755)
	p := filepath.Join(dir, skills.MetaFileName)
	chmod(t, p, 0o644)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), `"slug": "demo"`, `"slug": "else"`)), 0o444); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o555)
	if _, err := s.ReadMeta("demo", h); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("ReadMeta of a record for another slug = %v, want ErrInvalid", err)
	}
}

// Quarantine moves, never deletes; Restore brings a version back only if its
// content still matches its name.
func TestQuarantineAndRestore(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	if _, _, err := s.Publish(staged, "demo", h, testMeta("demo")); err != nil {
		t.Fatal(err)
	}
	rel, err := s.Quarantine("demo", h, "not in the index")
	if err != nil {
		t.Fatal(err)
	}
	if rel != "store/quarantine/demo/"+h {
		t.Errorf("quarantined at %q", rel)
	}
	skilltest.AssertAbsent(t, s.VersionPath("demo", h))
	q, err := s.Quarantined()
	if err != nil || len(q) != 1 || q[0].Slug != "demo" || q[0].Hash != h || q[0].Reason != "not in the index" {
		t.Fatalf("Quarantined = %+v, %v", q, err)
	}
	if got, _, _, err := TreeHash(filepath.Join(s.Root, "quarantine", "demo", h)); err != nil || got != h {
		t.Fatalf("quarantined content hashes to %s, %v", got, err)
	}
	if err := s.Restore(q[0]); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err := TreeHash(s.VersionPath("demo", h)); err != nil || got != h {
		t.Fatalf("restored content hashes to %s, %v", got, err)
	}
	if q, _ := s.Quarantined(); len(q) != 0 {
		t.Errorf("quarantine after restore: %+v", q)
	}

	// Twice the same version: the second copy gets a suffix.
	if _, err := s.Quarantine("demo", h, "first"); err != nil {
		t.Fatal(err)
	}
	staged, _ = stageInto(t, s, demoTree)
	if _, _, err := s.Publish(staged, "demo", h, nil); err != nil {
		t.Fatal(err)
	}
	rel, err = s.Quarantine("demo", h, "second")
	if err != nil || rel != "store/quarantine/demo/"+h+".2" {
		t.Fatalf("second quarantine = %q, %v", rel, err)
	}
	q, _ = s.Quarantined()
	if len(q) != 2 || q[1].Hash != h || q[1].Reason != "second" {
		t.Fatalf("Quarantined = %+v", q)
	}
	// A copy whose content was changed is not restored.
	victim := filepath.Join(s.Root, "quarantine", "demo", h+".2", "SKILL.md")
	chmod(t, filepath.Dir(victim), 0o755)
	chmod(t, victim, 0o644)
	if err := os.WriteFile(victim, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(q[1]); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("Restore of tampered content = %v, want ErrInvalid", err)
	}
	t.Cleanup(func() { skills.RemoveTree(filepath.Join(s.Root, "quarantine")) })
}

func TestStoreID(t *testing.T) {
	s := openTestStore(t)
	if id, err := s.ID(); err != nil || id != "" {
		t.Fatalf("ID of a new store = %q, %v", id, err)
	}
	if id, err := s.EnsureID("abc123"); err != nil || id != "abc123" {
		t.Fatalf("EnsureID = %q, %v", id, err)
	}
	// The first identity holds.
	if id, err := s.EnsureID("other"); err != nil || id != "abc123" {
		t.Fatalf("EnsureID over an existing identity = %q, %v", id, err)
	}
	if id, err := s.ID(); err != nil || id != "abc123" {
		t.Fatalf("ID = %q, %v", id, err)
	}
}

// Processes racing to give a new store its identity all end up with the
// same one.
func TestEnsureIDRace(t *testing.T) {
	for round := range 20 {
		s := &Store{Root: filepath.Join(t.TempDir(), "store")}
		got := make([]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := s.EnsureID(fmt.Sprintf("id-%d", i))
				if err != nil {
					t.Error(err)
				}
				got[i] = id
			}()
		}
		wg.Wait()
		for _, id := range got {
			if id != got[0] {
				t.Fatalf("round %d: identities %q", round, got)
			}
		}
		if ents, _ := os.ReadDir(s.Root); len(ents) != 1 {
			t.Fatalf("round %d: the store holds %d entries, want only the identity file", round, len(ents))
		}
	}
}

// Nothing is read from a FIFO or a device, and nothing blocks on one.
func TestOpenRegularRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// open(2) fails on a unix socket (ENXIO): still a special file, not
	// an I/O error.
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct{ path, kind string }{{fifo, "fifo"}, {"/dev/zero", "character device"}, {"/dev/urandom", "character device"}, {sock, "socket"}} {
		done := make(chan error, 1)
		go func() { _, err := skills.ReadRegular(tc.path, "src/x", 1<<20, true); done <- err }()
		select {
		case err := <-done:
			var se *skills.SpecialFileError
			if !errors.As(err, &se) || se.Kind != tc.kind || se.Path != "src/x" {
				t.Errorf("ReadRegular(%s) = %v, want a %s named src/x", tc.path, err, tc.kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadRegular(%s) blocked", tc.path)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", link); err != nil {
		t.Fatal(err)
	}
	if _, err := skills.ReadRegular(link, "link", 10, false); !errors.Is(err, skills.ErrSpecialFile) {
		t.Errorf("ReadRegular(symlink, no follow) = %v", err)
	}
	if b, err := skills.ReadRegular(link, "link", 10, true); err != nil || string(b) != "x" {
		t.Errorf("ReadRegular(symlink, follow) = %q, %v", b, err)
	}
	if _, err := skills.ReadRegular(dir, "dir", 10, true); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("ReadRegular(dir) = %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 11), 0o644); err != nil {
		t.Fatal(err)
	}
	var le *skills.LimitError
	if _, err := skills.ReadRegular(big, "big", 10, false); !errors.As(err, &le) || le.Path != "big" {
		t.Errorf("ReadRegular over the limit = %v", err)
	}
}

func TestStageDirReservedNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   fstest.MapFS
		wantErr error
		warn    string
	}{
		{"reserved file", fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), "docs/.skillfs-x": skilltest.File("x")}, skills.ErrUnsafePath, ""},
		{"reserved dir", fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), ".skillfs": skilltest.Dir()}, skills.ErrUnsafePath, ""},
		{"store metadata skipped", fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), skills.MetaFileName: skilltest.File("{}")}, nil, "skillfs metadata"},
		{"directory named SKILL.md", fstest.MapFS{"SKILL.md": skilltest.Dir()}, skills.ErrNoManifest, ""},
		{"SKILL.md over the manifest limit", fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest + strings.Repeat("x", 4<<20))}, skills.ErrLimit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			skilltest.WriteDir(t, src, tc.files)
			dst := filepath.Join(t.TempDir(), "out")
			res, err := source.StageDir(src, dst, skills.DefaultLimits())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("StageDir = %v, want %v", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), src) {
					t.Errorf("error names the source root %q: %v", src, err)
				}
				skilltest.AssertAbsent(t, dst)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], tc.warn) {
				t.Errorf("warnings %q, want one with %q", res.Warnings, tc.warn)
			}
			skilltest.AssertAbsent(t, filepath.Join(dst, skills.MetaFileName))
		})
	}
}

// A name no Linux filesystem can hold is refused before anything is
// written (a ZIP may carry one).
func TestCleanRelPathNameLength(t *testing.T) {
	ok := strings.Repeat("a", skills.MaxNameBytes)
	if _, err := skills.CleanRelPath("dir/" + ok); err != nil {
		t.Errorf("255-byte name refused: %v", err)
	}
	if _, err := skills.CleanRelPath("dir/" + ok + "b/x"); !errors.Is(err, skills.ErrUnsafePath) {
		t.Errorf("256-byte name = %v, want ErrUnsafePath", err)
	}
}

// FuzzDecodeMeta: any bytes are refused or describe exactly the version
// asked about, and what is accepted survives encoding again.
func FuzzDecodeMeta(f *testing.F) {
	good, _ := encodeMeta("demo", "abc", testMeta("demo"))
	f.Add(good, "demo", "abc")
	f.Add([]byte(`{"format":1,"skill":{"slug":"x"},"version":{"slug":"x","hash":"h"}}`), "x", "h")
	f.Add([]byte(`{"format":2}`), "x", "h")
	f.Add([]byte(`[]`), "", "")
	f.Fuzz(func(t *testing.T, data []byte, slug, hash string) {
		m, err := decodeMeta(data, slug, hash)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if m.Version.Slug != slug || m.Version.Hash != hash || m.Skill.Slug != slug {
			t.Fatalf("accepted metadata of %s/%s for %s/%s", m.Version.Slug, m.Version.Hash, slug, hash)
		}
		again, err := encodeMeta(slug, hash, m)
		if err != nil {
			return // e.g. a time JSON cannot encode
		}
		if _, err := decodeMeta(again, slug, hash); err != nil {
			t.Fatalf("re-encoded metadata refused: %v", err)
		}
	})
}
