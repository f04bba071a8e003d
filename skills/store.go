package skills

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Store keeps immutable published versions of skills on disk, at
// <Root>/skills/<slug>/<hash>/, and stages new ones under <Root>/.staging/ on
// the same filesystem so that publishing is one atomic rename.
type Store struct {
	Root string
}

const (
	storeSkillsDir  = "skills"
	storeStagingDir = ".staging"
)

// OpenStore creates the store layout under root if needed and sweeps staging
// directories left behind by a crash. Only one process may use a store.
func OpenStore(root string) (*Store, error) {
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

func (s *Store) skillsDir() string  { return filepath.Join(s.Root, storeSkillsDir) }
func (s *Store) stagingDir() string { return filepath.Join(s.Root, storeStagingDir) }

// NewStaging creates a fresh empty directory under the store's staging area.
// The caller stages into it (or below it) and removes it when done; a crash
// leaves it for the next OpenStore or Sweep.
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
	switch {
	case name == "":
		return fmt.Errorf("empty %s: %w", kind, ErrUnsafePath)
	case strings.ContainsAny(name, "/\\\x00"), strings.Contains(name, ".."), name[0] == '.':
		return fmt.Errorf("%s %q: %w", kind, name, ErrUnsafePath)
	}
	return nil
}

// VersionPath returns the directory of a published version, whether or not it
// exists, or "" when slug or hash is unsafe (see Publish).
func (s *Store) VersionPath(slug, hash string) string {
	if checkStoreName("slug", slug) != nil || checkStoreName("hash", hash) != nil {
		return ""
	}
	return filepath.Join(s.skillsDir(), slug, hash)
}

// Publish moves the staged tree, which must lie inside the store's staging
// area and hash to hash, into place as version hash of slug, read-only (files
// 0444 or 0555 by their execute bit, directories 0555), in one atomic rename.
// If that version already exists, created is false. A slug or hash that is
// empty, holds '/' or '..' is ErrUnsafePath. Once staged is known to be in the
// staging area, Publish consumes it: it is moved into place or removed, even
// on error, since it may have been made read-only.
func (s *Store) Publish(staged, slug, hash string) (dir string, created bool, err error) {
	if err := checkStoreName("slug", slug); err != nil {
		return "", false, fmt.Errorf("publish %q: %w", staged, err)
	}
	if err := checkStoreName("hash", hash); err != nil {
		return "", false, fmt.Errorf("publish %q: %w", staged, err)
	}
	abs, err := filepath.Abs(staged)
	if err != nil {
		return "", false, fmt.Errorf("publish %q: %w", staged, err)
	}
	if rel, err := filepath.Rel(s.stagingDir(), abs); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false, fmt.Errorf("publish %q: not inside the staging area of %q: %w", staged, s.Root, ErrInvalid)
	}
	moved := false
	defer func() {
		if !moved {
			if rerr := removeTree(abs); rerr != nil && err == nil {
				err = fmt.Errorf("publish %q: remove staged copy: %w", staged, rerr)
			}
		}
	}()
	// The version name is the content identity: never file a tree under a
	// hash it does not have, or "already exists" would hide a difference.
	got, _, _, err := TreeHash(abs)
	if err != nil {
		return "", false, fmt.Errorf("publish %q: %w", staged, err)
	}
	if got != hash {
		return "", false, fmt.Errorf("publish %q as %s/%s: tree hash is %s: %w", staged, slug, hash, got, ErrInvalid)
	}
	dir = filepath.Join(s.skillsDir(), slug, hash)
	if _, err := os.Lstat(dir); err == nil {
		return dir, false, nil
	}
	if err := freezeTree(abs); err != nil {
		return "", false, fmt.Errorf("publish %q: %w", staged, err)
	}
	// Renaming a directory to a new parent rewrites its "..", which needs
	// write permission on it; the root goes read-only after the move.
	if err := os.Chmod(abs, 0o755); err != nil {
		return "", false, fmt.Errorf("publish %q: %w", staged, err)
	}
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

// freezeTree flushes every file and directory below root to disk and makes
// them read-only, so a published version is complete after a crash and
// immutable in place. root itself is left to the caller.
func freezeTree(root string) error {
	ents, err := walkTree(root)
	if err != nil {
		return err
	}
	// Deepest first, so a directory is synced after its entries.
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		p := filepath.Join(root, filepath.FromSlash(e.rel))
		mode := iofs.FileMode(0o444)
		if e.dir || e.exec {
			mode = 0o555
		}
		if err := syncPath(p); err != nil {
			return fmt.Errorf("sync %q: %w", e.rel, err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("%q: %w", e.rel, err)
		}
	}
	return syncPath(root)
}

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
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, ErrNotFound)
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
	if err := removeTree(trash); err != nil {
		return fmt.Errorf("remove version %s/%s: %w", slug, hash, err)
	}
	// Drop the slug directory once its last version is gone; failing
	// because another version is there is fine.
	_ = os.Remove(filepath.Dir(dir))
	return nil
}

// Versions lists the versions present on disk: slug to sorted hashes. It is
// meant for comparing the store with the index, e.g. to sweep orphans.
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
// is in flight (OpenStore does, at start).
func (s *Store) Sweep() error {
	ents, err := os.ReadDir(s.stagingDir())
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep staging in %q: %w", s.Root, err)
	}
	for _, e := range ents {
		if err := removeTree(filepath.Join(s.stagingDir(), e.Name())); err != nil {
			return fmt.Errorf("sweep staging in %q: %w", s.Root, err)
		}
	}
	return nil
}
