package store

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"skillfs/skills"
)

// Store keeps immutable published versions of skills on disk, at
// <Root>/skills/<slug>/<hash>/, and stages new ones under <Root>/.staging/ on
// the same filesystem so that publishing is one atomic rename. Each version
// carries its own metadata (skills.MetaFileName) so that a lost index can be
// rebuilt from the store. Nothing published is ever deleted by the store on
// its own: a version the index cannot explain is moved to
// <Root>/quarantine/<slug>/<hash>/, from where it can be restored.
type Store struct {
	Root string
}

const (
	storeSkillsDir     = "skills"
	storeStagingDir    = ".staging"
	storeQuarantineDir = "quarantine"
	storeIDFile        = ".skillfs-id"
)

// IDFile is where, below the store's root, its identity is kept.
const IDFile = storeIDFile

// VersionMeta is what a published version records about itself, enough to
// rebuild its catalog rows when the index is lost: the version's provenance
// and the skill as it stood when the version was published (later changes
// of share, enabled flag or dependencies are the index's alone).
type VersionMeta struct {
	Format  int            `json:"format"` // metaFormat
	Skill   skills.Skill   `json:"skill"`
	Version skills.Version `json:"version"`
	// CurrentSince is when this version last became its skill's current
	// one: a rebuild makes current the version that became so last (a
	// reinstall of older content makes that older version current again).
	CurrentSince time.Time `json:"current_since,omitzero"`
}

// Since is when the version became current: CurrentSince, or its install
// time for metadata written before CurrentSince existed.
func (m *VersionMeta) Since() time.Time {
	if !m.CurrentSince.IsZero() {
		return m.CurrentSince
	}
	return m.Version.InstalledAt
}

// metaFormat versions the VersionMeta encoding.
const metaFormat = 1

// maxMetaBytes bounds a metadata file read back from the store.
const maxMetaBytes = 1 << 20

// Open creates the store layout under root if needed and sweeps staging
// directories left behind by a crash. Call it only when no import is in
// flight (the catalog holds its import lock exclusively); it never touches
// published versions.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", root, err)
	}
	s := &Store{Root: abs}
	for _, d := range []string{s.skillsDir(), s.stagingDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("open store %q: %w", root, err)
		}
	}
	if err := s.Sweep(); err != nil {
		return nil, fmt.Errorf("open store %q: %w", root, err)
	}
	return s, nil
}

func (s *Store) skillsDir() string     { return filepath.Join(s.Root, storeSkillsDir) }
func (s *Store) stagingDir() string    { return filepath.Join(s.Root, storeStagingDir) }
func (s *Store) quarantineDir() string { return filepath.Join(s.Root, storeQuarantineDir) }

// NewStaging creates a fresh empty directory under the store's staging area.
// The caller stages into it (or below it) and removes it when done; a crash
// leaves it for the next Open or Sweep.
func (s *Store) NewStaging() (string, error) {
	if err := os.MkdirAll(s.stagingDir(), 0o755); err != nil {
		return "", fmt.Errorf("create staging in %q: %w", s.Root, err)
	}
	d, err := os.MkdirTemp(s.stagingDir(), "stage-")
	if err != nil {
		return "", fmt.Errorf("create staging in %q: %w", s.Root, err)
	}
	return d, nil
}

// checkStoreName refuses a slug or hash that could leave its directory or
// name a hidden one. Callers validate slugs properly; this is defence in
// depth for the filesystem layout.
func checkStoreName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("empty %s: %w", kind, skills.ErrUnsafePath)
	}
	// One pass over the bytes: this runs for every skill of a session.
	unsafe := name[0] == '.'
	for i := 0; i < len(name) && !unsafe; i++ {
		switch name[i] {
		case '/', '\\', 0:
			unsafe = true
		case '.':
			unsafe = i+1 < len(name) && name[i+1] == '.'
		}
	}
	if unsafe {
		return fmt.Errorf("%s %q: %w", kind, name, skills.ErrUnsafePath)
	}
	return nil
}

// VersionPath returns the directory of a published version, whether or not it
// exists, or "" when slug or hash is unsafe (see Publish).
func (s *Store) VersionPath(slug, hash string) string {
	if checkStoreName("slug", slug) != nil || checkStoreName("hash", hash) != nil {
		return ""
	}
	// Both names are single clean path elements and Root is clean
	// (Open): no Join and Clean needed, which counts for a session of
	// 10,000 skills.
	const sep = string(filepath.Separator)
	return s.Root + sep + storeSkillsDir + sep + slug + sep + hash
}

// prepare checks a staged tree for publishing as version hash of slug and
// makes it ready for the rename that publishes it: hashed, its metadata
// written, read-only, durable. It returns the staged tree's absolute path
// and the version's directory; abs is "" when the version exists already
// (nothing to do) unless replace is set. The staged tree is removed on
// error, or when the version exists and is not to be replaced.
func (s *Store) prepare(staged, slug, hash string, meta *VersionMeta, replace bool) (abs, dir string, err error) {
	if err := checkStoreName("slug", slug); err != nil {
		return "", "", fmt.Errorf("publish %q: %w", staged, err)
	}
	if err := checkStoreName("hash", hash); err != nil {
		return "", "", fmt.Errorf("publish %q: %w", staged, err)
	}
	tree, err := filepath.Abs(staged)
	if err != nil {
		return "", "", fmt.Errorf("publish %q: %w", staged, err)
	}
	if rel, err := filepath.Rel(s.stagingDir(), tree); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", "", fmt.Errorf("publish %q: not inside the staging area of %q: %w", staged, s.Root, skills.ErrInvalid)
	}
	ready := false
	defer func() {
		if !ready {
			if rerr := skills.RemoveTree(tree); rerr != nil && err == nil {
				err = fmt.Errorf("publish %q: remove staged copy: %w", staged, rerr)
			}
		}
	}()
	// The version name is the content identity: never file a tree under a
	// hash it does not have, or "already exists" would hide a difference.
	got, _, _, err := TreeHash(tree)
	if err != nil {
		return "", "", fmt.Errorf("publish %q: %w", staged, err)
	}
	if got != hash {
		return "", "", fmt.Errorf("publish %q as %s/%s: tree hash is %s: %w", staged, slug, hash, got, skills.ErrInvalid)
	}
	dir = filepath.Join(s.skillsDir(), slug, hash)
	if _, err := os.Lstat(dir); err == nil && !replace {
		return "", dir, nil
	}
	if meta != nil {
		if err := writeMetaFile(tree, slug, hash, meta); err != nil {
			return "", "", fmt.Errorf("publish %s/%s: %w", slug, hash, err)
		}
	}
	if err := freezeTree(tree); err != nil {
		return "", "", fmt.Errorf("publish %q: %w", staged, err)
	}
	// Renaming a directory to a new parent rewrites its "..", which needs
	// write permission on it; the root goes read-only after the move.
	if err := os.Chmod(tree, 0o755); err != nil {
		return "", "", fmt.Errorf("publish %q: %w", staged, err)
	}
	// One sync of the store's filesystem makes the whole staged tree, its
	// metadata file and its modes durable before the rename publishes it:
	// a crash before the rename leaves it in the staging area (swept at the
	// next start), and a rename that survived a crash names a complete tree.
	if err := syncFS(tree); err != nil {
		return "", "", fmt.Errorf("publish %q: sync: %w", staged, err)
	}
	if publishHook != nil {
		if err := publishHook(); err != nil {
			return "", "", fmt.Errorf("publish %q: %w", staged, err)
		}
	}
	ready = true
	return tree, dir, nil
}

// Publish moves the staged tree, which must lie inside the store's staging
// area and hash to hash, into place as version hash of slug, read-only (files
// 0444 or 0555 by their execute bit, directories 0555), in one atomic rename,
// with meta (when not nil) written into it as skills.MetaFileName first, so the
// version and its metadata appear together. If that version already exists,
// created is false and the existing one is left as it is. A slug or hash that is
// empty, holds '/' or '..' is ErrUnsafePath. Once staged is known to be in the
// staging area, Publish consumes it: it is moved into place or removed, even
// on error, since it may have been made read-only.
func (s *Store) Publish(staged, slug, hash string, meta *VersionMeta) (dir string, created bool, err error) {
	abs, dir, err := s.prepare(staged, slug, hash, meta, false)
	if err != nil || abs == "" {
		return dir, false, err
	}
	moved := false
	defer func() {
		if !moved {
			if rerr := skills.RemoveTree(abs); rerr != nil && err == nil {
				err = fmt.Errorf("publish %q: remove staged copy: %w", staged, rerr)
			}
		}
	}()
	for attempt := 0; ; attempt++ {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", false, fmt.Errorf("publish %q: %w", staged, err)
		}
		err = renameNoReplace(abs, dir)
		if errors.Is(err, iofs.ErrNotExist) && attempt == 0 {
			continue // the slug directory was removed by RemoveVersion meanwhile
		}
		break
	}
	if errors.Is(err, iofs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
		return dir, false, nil // lost a race with an identical publish
	}
	if err != nil {
		return "", false, fmt.Errorf("publish %q as %s/%s: %w", staged, slug, hash, err)
	}
	moved = true
	if err := os.Chmod(dir, 0o555); err != nil {
		return "", false, fmt.Errorf("publish %s/%s: %w", slug, hash, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return "", false, fmt.Errorf("publish %s/%s: %w", slug, hash, err)
	}
	return dir, true, nil
}

// Replace puts a staged tree in place of this store's copy of version hash
// of slug in one atomic exchange, so a reader never finds the version
// missing, and moves the copy it replaced to the quarantine with reason
// (never deleted). It is for a copy found damaged; with no copy in place it
// publishes as Publish does. It returns the version's directory and where
// the old copy went ("" when there was none).
func (s *Store) Replace(staged, slug, hash string, meta *VersionMeta, reason string) (dir, quarantined string, err error) {
	abs, dir, err := s.prepare(staged, slug, hash, meta, true)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Lstat(dir); errors.Is(err, iofs.ErrNotExist) {
		// Publish prepares again (the hash once more): rare, and simple.
		dir, _, err := s.Publish(abs, slug, hash, nil)
		return dir, "", err
	}
	// Exchanging rewrites both roots' "..": the old one needs write
	// permission too.
	if err := os.Chmod(dir, 0o755); err != nil {
		skills.RemoveTree(abs)
		return "", "", fmt.Errorf("replace %s/%s: %w", slug, hash, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, abs, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err != nil {
		_ = os.Chmod(dir, 0o555)
		skills.RemoveTree(abs)
		return "", "", fmt.Errorf("replace %s/%s: %w", slug, hash, err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		return "", "", fmt.Errorf("replace %s/%s: %w", slug, hash, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return "", "", fmt.Errorf("replace %s/%s: %w", slug, hash, err)
	}
	// The old copy now sits where the staged tree was.
	q, err := s.quarantineFrom(abs, slug, hash, reason)
	if err != nil {
		return dir, "", err
	}
	return dir, q, nil
}

// freezeTree makes every file and directory below root read-only, so a
// published version is immutable in place; Publish then flushes the tree to
// disk with one sync of the filesystem. root itself is left to the caller.
func freezeTree(root string) error {
	ents, err := walkTree(root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		mode := iofs.FileMode(0o444)
		if e.dir || e.exec {
			mode = 0o555
		}
		// Directories are listed before what they hold, and a read-only
		// directory still lets its entries' modes change.
		if err := os.Chmod(filepath.Join(root, filepath.FromSlash(e.rel)), mode); err != nil {
			return fmt.Errorf("%q: %w", e.rel, err)
		}
	}
	return nil
}

// publishHook, when set (by tests), runs after a publish synced its tree
// and before the rename that publishes it; an error stops the publish there.
var publishHook func() error

// syncFS flushes the filesystem holding p to disk (syncfs(2)): every file,
// directory and mode change written there so far, in one call instead of
// one fsync per entry. syncfsHook, when set (by tests), sees each call.
func syncFS(p string) error {
	if syncfsHook != nil {
		syncfsHook(p)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Syncfs(int(fd))
			if !errors.Is(serr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

var syncfsHook func(p string)

func syncPath(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(p string) error { return syncPath(p) }

// renameNoReplace renames old to new unless new exists, atomically where the
// filesystem supports it.
func renameNoReplace(oldPath, newPath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldPath, unix.AT_FDCWD, newPath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		// No RENAME_NOREPLACE here: a plain rename still refuses to
		// replace a non-empty directory, and a version is never empty.
		if _, serr := os.Lstat(newPath); serr == nil {
			return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: unix.EEXIST}
		}
		return os.Rename(oldPath, newPath)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: err}
	}
	return nil
}

// RemoveVersion deletes a published version. It is first renamed into the
// staging area, so a crash never leaves half a version looking whole. A
// missing version is ErrNotFound.
func (s *Store) RemoveVersion(slug, hash string) error {
	dir := s.VersionPath(slug, hash)
	if dir == "" {
		if err := checkStoreName("slug", slug); err != nil {
			return fmt.Errorf("remove version: %w", err)
		}
		return fmt.Errorf("remove version: %w", checkStoreName("hash", hash))
	}
	if _, err := os.Lstat(dir); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, skills.ErrNotFound)
	}
	trash, err := s.NewStaging()
	if err != nil {
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, err)
	}
	// Moving a directory to a new parent needs write permission on it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, err)
	}
	if err := os.Rename(dir, filepath.Join(trash, "version")); err != nil {
		_ = os.Chmod(dir, 0o555)
		_ = os.Remove(trash)
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, err)
	}
	if err := skills.RemoveTree(trash); err != nil {
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, err)
	}
	// Drop the slug directory once its last version is gone; failing
	// because another version is there is fine.
	_ = os.Remove(filepath.Dir(dir))
	return nil
}

// Versions lists what the store holds: slug to the sorted names of the
// directories below it (hashes, unless something else was put there). It is
// meant for comparing the store with the index.
func (s *Store) Versions() (map[string][]string, error) {
	out := map[string][]string{}
	slugs, err := os.ReadDir(s.skillsDir())
	if err != nil {
		return nil, fmt.Errorf("list versions in %q: %w", s.Root, err)
	}
	for _, sd := range slugs {
		if !sd.IsDir() {
			continue
		}
		hashes, err := os.ReadDir(filepath.Join(s.skillsDir(), sd.Name()))
		if errors.Is(err, iofs.ErrNotExist) {
			continue // its last version was removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("list versions in %q: %w", s.Root, err)
		}
		var hs []string
		for _, h := range hashes {
			if h.IsDir() {
				hs = append(hs, h.Name())
			}
		}
		if len(hs) > 0 {
			sort.Strings(hs)
			out[sd.Name()] = hs
		}
	}
	return out, nil
}

// Sweep removes everything in the staging area. Call it only when no import
// is in flight (Open does, at start).
func (s *Store) Sweep() error {
	ents, err := os.ReadDir(s.stagingDir())
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep staging in %q: %w", s.Root, err)
	}
	for _, e := range ents {
		if err := skills.RemoveTree(filepath.Join(s.stagingDir(), e.Name())); err != nil {
			return fmt.Errorf("sweep staging in %q: %w", s.Root, err)
		}
	}
	return nil
}

// encodeMeta checks meta against the version it describes and encodes it.
func encodeMeta(slug, hash string, meta *VersionMeta) ([]byte, error) {
	m := *meta
	m.Format = metaFormat
	m.Skill.Slug, m.Skill.Version = slug, hash
	m.Version.Slug, m.Version.Hash = slug, hash
	m.Version.Path = VersionRelPath(slug, hash)
	b, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode version metadata: %w", err)
	}
	return append(b, '\n'), nil
}

// writeMetaFile writes the metadata of a version about to be published into
// its staged root.
func writeMetaFile(root, slug, hash string, meta *VersionMeta) error {
	b, err := encodeMeta(slug, hash, meta)
	if err != nil {
		return err
	}
	p := filepath.Join(root, skills.MetaFileName)
	_ = os.Remove(p) // never trust one that came with the content
	if err := os.WriteFile(p, b, 0o444); err != nil {
		return fmt.Errorf("write version metadata: %w", err)
	}
	return nil
}

// VersionRelPath is where a version lives relative to the data directory;
// the index records this, never an absolute path, so a data directory can
// be moved, copied or reached through a symlink.
func VersionRelPath(slug, hash string) string {
	return path.Join("store", storeSkillsDir, slug, hash)
}

// ReadMeta reads the metadata a published version carries. A version
// without one (published before versions carried metadata) is ErrNotFound;
// one that does not describe this very slug and hash is ErrInvalid.
func (s *Store) ReadMeta(slug, hash string) (*VersionMeta, error) {
	data, err := s.RawMeta(slug, hash)
	if err != nil {
		return nil, err
	}
	m, err := decodeMeta(data, slug, hash)
	if err != nil {
		return nil, fmt.Errorf("read metadata of %s/%s: %w", slug, hash, err)
	}
	return m, nil
}

// decodeMeta parses a metadata file and checks that it describes the
// version slug/hash; anything else is ErrInvalid.
func decodeMeta(data []byte, slug, hash string) (*VersionMeta, error) {
	var m VersionMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%v: %w", err, skills.ErrInvalid)
	}
	if m.Format != metaFormat || m.Version.Slug != slug || m.Version.Hash != hash || m.Skill.Slug != slug {
		return nil, fmt.Errorf("it describes %q/%q (format %d): %w", m.Version.Slug, m.Version.Hash, m.Format, skills.ErrInvalid)
	}
	return &m, nil
}

// WriteMeta gives a published version the metadata it lacks (versions
// published before versions carried metadata); the content and its hash do
// not change. An existing metadata file is replaced atomically.
func (s *Store) WriteMeta(slug, hash string, meta *VersionMeta) (err error) {
	dir := s.VersionPath(slug, hash)
	if dir == "" {
		return fmt.Errorf("write metadata of %s/%s: %w", slug, hash, skills.ErrUnsafePath)
	}
	b, err := encodeMeta(slug, hash, meta)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(dir); err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", slug, hash, skills.ErrNotFound)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", slug, hash, err)
	}
	defer func() {
		if cerr := os.Chmod(dir, 0o555); err == nil && cerr != nil {
			err = fmt.Errorf("write metadata of %s/%s: %w", slug, hash, cerr)
		}
	}()
	// Written in the staging area and renamed into place: a crash leaves
	// nothing in the version (where a stray file would change its hash)
	// and the staging area is swept.
	stage, err := s.NewStaging()
	if err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", slug, hash, err)
	}
	defer skills.RemoveTree(stage)
	tmp := filepath.Join(stage, skills.MetaFileName)
	if err := writeSynced(tmp, b, 0o444); err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", slug, hash, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, skills.MetaFileName)); err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", slug, hash, err)
	}
	return syncDir(dir)
}

// writeSynced writes a new file and flushes it to disk.
func writeSynced(p string, b []byte, mode iofs.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkEntryName refuses a name that is not one plain path component.
func checkEntryName(kind, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q: %w", kind, name, skills.ErrUnsafePath)
	}
	return nil
}

// Quarantined is a version moved out of the store because the index could
// not explain it.
type Quarantined struct {
	Slug   string `json:"slug"`
	Hash   string `json:"hash"`
	Path   string `json:"path"`   // relative to the data directory
	Reason string `json:"reason"` // as recorded when it was moved
}

// Quarantine moves the directory store/skills/<slug>/<name> — a version the
// index cannot explain, or anything else found there — to
// quarantine/<slug>/<name> (adding ".2", ".3", … if that is taken), with the
// reason written beside it. Nothing is deleted; Restore brings it back. It
// returns the new location relative to the data directory.
func (s *Store) Quarantine(slug, name, reason string) (string, error) {
	if err := checkEntryName("slug", slug); err != nil {
		return "", fmt.Errorf("quarantine: %w", err)
	}
	if err := checkEntryName("version", name); err != nil {
		return "", fmt.Errorf("quarantine: %w", err)
	}
	return s.quarantineFrom(filepath.Join(s.skillsDir(), slug, name), slug, name, reason)
}

// quarantineFrom is Quarantine of what is at src, filed as version name of
// slug.
func (s *Store) quarantineFrom(src, slug, name, reason string) (string, error) {
	if _, err := os.Lstat(src); err != nil {
		return "", fmt.Errorf("quarantine %s/%s: %w", slug, name, skills.ErrNotFound)
	}
	parent := filepath.Join(s.quarantineDir(), slug)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("quarantine %s/%s: %w", slug, name, err)
	}
	// A read-only directory needs write permission to change its parent.
	fi, _ := os.Lstat(src)
	if fi != nil && fi.IsDir() {
		if err := os.Chmod(src, 0o755); err != nil {
			return "", fmt.Errorf("quarantine %s/%s: %w", slug, name, err)
		}
	}
	for n := 1; n < 1000; n++ {
		dst := name
		if n > 1 {
			dst = fmt.Sprintf("%s.%d", name, n)
		}
		target := filepath.Join(parent, dst)
		if _, err := os.Lstat(target + ".reason"); err == nil {
			continue
		}
		err := renameNoReplace(src, target)
		if errors.Is(err, iofs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
			continue
		}
		if err != nil {
			if fi != nil && fi.IsDir() {
				_ = os.Chmod(src, 0o555)
			}
			return "", fmt.Errorf("quarantine %s/%s: %w", slug, name, err)
		}
		if fi != nil && fi.IsDir() {
			_ = os.Chmod(target, 0o555)
		}
		// The reason is a note for the operator: the move is what matters,
		// and it is done, so a full disk here fails nothing.
		note := fmt.Sprintf("%s\nmoved here from %s at %s\n", reason, VersionRelPath(slug, name), time.Now().UTC().Format(time.RFC3339))
		_ = writeSynced(target+".reason", []byte(note), 0o600)
		_ = syncDir(parent)
		_ = os.Remove(filepath.Join(s.skillsDir(), slug)) // fails while other versions remain
		return path.Join("store", storeQuarantineDir, slug, dst), nil
	}
	return "", fmt.Errorf("quarantine %s/%s: too many copies there already: %w", slug, name, skills.ErrExists)
}

// Quarantined lists what the quarantine holds, sorted by slug and name.
func (s *Store) Quarantined() ([]Quarantined, error) {
	var out []Quarantined
	slugs, err := os.ReadDir(s.quarantineDir())
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list quarantine: %w", err)
	}
	for _, sd := range slugs {
		if !sd.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(s.quarantineDir(), sd.Name()))
		if err != nil {
			return nil, fmt.Errorf("list quarantine: %w", err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".reason") {
				continue
			}
			q := Quarantined{Slug: sd.Name(), Hash: e.Name(), Path: path.Join("store", storeQuarantineDir, sd.Name(), e.Name())}
			if b, err := skills.ReadRegular(filepath.Join(s.quarantineDir(), sd.Name(), e.Name()+".reason"), q.Path+".reason", 64<<10, false); err == nil {
				q.Reason, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
			}
			if base, _, ok := strings.Cut(e.Name(), "."); ok {
				q.Hash = base
			}
			out = append(out, q)
		}
	}
	return out, nil
}

// Restore moves a quarantined version back into the store, after checking
// that its content still hashes to its name. A version already in the store
// is ErrExists; none in quarantine is ErrNotFound.
func (s *Store) Restore(q Quarantined) error {
	if err := checkStoreName("slug", q.Slug); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := checkStoreName("hash", q.Hash); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	rel, ok := strings.CutPrefix(q.Path, path.Join("store", storeQuarantineDir)+"/")
	if !ok || skills.CheckRelPath(rel) != nil {
		return fmt.Errorf("restore %s: not in the quarantine: %w", q.Path, skills.ErrInvalid)
	}
	src := filepath.Join(s.quarantineDir(), filepath.FromSlash(rel))
	if _, err := os.Lstat(src); err != nil {
		return fmt.Errorf("restore %s: %w", q.Path, skills.ErrNotFound)
	}
	got, _, _, err := TreeHash(src)
	if err != nil {
		return fmt.Errorf("restore %s: %w", q.Path, err)
	}
	if got != q.Hash {
		return fmt.Errorf("restore %s: its content hashes to %s: %w", q.Path, got, skills.ErrInvalid)
	}
	dst := filepath.Join(s.skillsDir(), q.Slug, q.Hash)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("restore %s: %w", q.Path, err)
	}
	if err := os.Chmod(src, 0o755); err != nil {
		return fmt.Errorf("restore %s: %w", q.Path, err)
	}
	if err := renameNoReplace(src, dst); err != nil {
		_ = os.Chmod(src, 0o555)
		if errors.Is(err, iofs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
			return fmt.Errorf("restore %s: %s/%s is in the store already: %w", q.Path, q.Slug, q.Hash, skills.ErrExists)
		}
		return fmt.Errorf("restore %s: %w", q.Path, err)
	}
	_ = os.Chmod(dst, 0o555)
	_ = os.Remove(src + ".reason")
	_ = os.Remove(filepath.Dir(src))
	return syncDir(filepath.Dir(dst))
}

// ID returns the identity of the store's data directory, "" if it has none
// yet. An index records the same identity, so an index from another data
// directory is recognised whatever the paths.
func (s *Store) ID() (string, error) {
	b, err := skills.ReadRegular(filepath.Join(s.Root, storeIDFile), "store/"+storeIDFile, 4096, false)
	if errors.Is(err, iofs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read data directory identity: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// EnsureID records id as the identity of the store's data directory unless
// it has one already, and returns the identity in force: when two processes
// race to give a new data directory its identity, both end up with the
// winner's.
func (s *Store) EnsureID(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "\n\x00/") {
		return "", fmt.Errorf("record data directory identity %q: %w", id, skills.ErrInvalid)
	}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return "", fmt.Errorf("record data directory identity: %w", err)
	}
	if cur, err := s.ID(); err != nil || cur != "" {
		return cur, err
	}
	tmp, err := os.CreateTemp(s.Root, storeIDFile+".tmp-")
	if err != nil {
		return "", fmt.Errorf("record data directory identity: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(id + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err != nil {
		return "", fmt.Errorf("record data directory identity: %w", err)
	}
	err = renameNoReplace(tmp.Name(), filepath.Join(s.Root, storeIDFile))
	if errors.Is(err, iofs.ErrExist) {
		return s.ID() // another process was first: its identity holds
	}
	if err != nil {
		return "", fmt.Errorf("record data directory identity: %w", err)
	}
	if err := syncDir(s.Root); err != nil {
		return "", fmt.Errorf("record data directory identity: %w", err)
	}
	return id, nil
}
