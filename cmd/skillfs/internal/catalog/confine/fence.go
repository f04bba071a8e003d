package confine

import (
	"fmt"
	"os"
	"path/filepath"

	"skillfs/skills"
)

// No source reaches the data directory or the index.
//
// A process that reads a file of its SQLite index other than through the
// driver loses writes (see package index: closing any descriptor of the
// file drops the process's POSIX locks on it, and the next client to close
// the index deletes its write-ahead log under the process), and the data
// directory's store, drafts and temporary files are skillfs's own. So a
// local source is checked before anything of it is opened: its path is
// resolved (symlinks followed) and compared by device and inode, as bind
// targets are, with the data directory and with the files of the index —
// the data directory's own index.db, or a shared SQLite index wherever it
// lies, and the files SQLite keeps beside either. A source that is one of
// those files, or is or lies inside the data directory, is refused; so is a
// folder whose tree would be read that holds the data directory or the
// index (such as / or the parent of the data directory): it is refused
// rather than walked around them, so that no spelling, link or depth limit
// decides whether the index's bytes are read. Every refusal wraps
// skills.ErrInvalid: the source is bad input for every user, whatever their
// role (exit 5, HTTP 400, like a bind target in the data directory).
//
// Symlinks inside a folder source never lead out of it (see
// skillsource.StageDirOpts and Discover), so a folder that holds neither cannot
// reach them by a link. A hard link to the index or a bind mount of the
// data directory placed inside a source folder is not looked for: making
// either takes root.

// SourceFence is what a source must not be, lie in or hold, identified now.
type SourceFence struct {
	home    string            // the data directory's real path ("" when there is none yet)
	homeID  fileID            // and its identity
	files   map[fileID]string // the index's files that exist, by identity: their paths
	holders map[fileID]string // the folders holding the data directory or the index: what they hold
}

// NewSourceFence identifies the data directory home and the index files
// (see index.SQLiteFiles) as they are now, by stat alone: a -wal made
// since the index was opened is the one that counts.
func NewSourceFence(home string, indexFiles []string) *SourceFence {
	f := &SourceFence{files: map[fileID]string{}, holders: map[fileID]string{}}
	if real, err := filepath.EvalSymlinks(home); err == nil {
		if fi, err := os.Stat(real); err == nil {
			if id, ok := infoID(fi); ok {
				f.home, f.homeID = real, id
			}
			f.holds(filepath.Dir(real), "the data directory "+real)
		}
	}
	for _, p := range indexFiles {
		if fi, err := os.Stat(p); err == nil {
			if id, ok := infoID(fi); ok {
				f.files[id] = p
			}
		}
	}
	if len(indexFiles) > 0 {
		if dir, err := filepath.EvalSymlinks(filepath.Dir(indexFiles[0])); err == nil {
			f.holds(dir, "the index "+indexFiles[0])
		}
	}
	return f
}

// holds records dir and every folder above it as holding what.
func (f *SourceFence) holds(dir, what string) {
	for {
		if fi, err := os.Stat(dir); err == nil {
			if id, ok := infoID(fi); ok {
				if _, known := f.holders[id]; !known {
					f.holders[id] = what
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
	}
}

// Check refuses the source at path p, named given in the message: a file
// of the index, the data directory or anything inside it, and, when walked
// (a folder whose tree is read rather than only its named subfolders), a
// folder holding either. A path that does not exist is judged by the
// nearest folder above it that does, so the answer never tells whether a
// file of the data directory exists. Nothing is opened.
func (f *SourceFence) Check(given, p string, walked bool) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil // the caller's own reading fails on it, saying why
	}
	real, fi, whole := resolveExisting(abs)
	if fi == nil {
		return nil
	}
	id, ok := infoID(fi)
	if !ok {
		return nil
	}
	if whole {
		if file, ok := f.files[id]; ok {
			return fmt.Errorf("source %q is %s, a file of the index: skillfs reads its index only through the database, never as a source: %w",
				given, file, skills.ErrInvalid)
		}
	}
	if f.home != "" {
		dir := real
		if !fi.IsDir() {
			dir = filepath.Dir(real)
		}
		if f.inHome(dir) {
			what := "lies inside the data directory"
			if whole && id == f.homeID {
				what = "is the data directory"
			}
			return fmt.Errorf("source %q %s %s: its index, store, drafts and temporary files are skillfs's own, never a source: %w",
				given, what, f.home, skills.ErrInvalid)
		}
	}
	if whole && walked && fi.IsDir() {
		if what, ok := f.holders[id]; ok {
			return fmt.Errorf("source %q holds %s, which is never read as a source: import from a folder that does not (the one holding the skills): %w",
				given, what, skills.ErrInvalid)
		}
	}
	return nil
}

// inHome reports whether the real directory dir is the data directory or
// lies below it, by the identity of dir and of each folder above it.
func (f *SourceFence) inHome(dir string) bool {
	for {
		if fi, err := os.Stat(dir); err == nil {
			if id, ok := infoID(fi); ok && id == f.homeID {
				return true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// resolveExisting resolves the absolute path abs as the kernel would: its
// real path, its stat, and whole, true when abs itself exists. A path
// that does not exist is resolved to the nearest folder above it that
// does, and a symlink that dangles to where it leads, so that neither a
// missing file nor a link to one escapes the checks.
func resolveExisting(abs string) (real string, fi os.FileInfo, whole bool) {
	q, whole := abs, true
	for range 255 {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			if fi, err := os.Stat(r); err == nil {
				return r, fi, whole
			}
		}
		if target, err := os.Readlink(q); err == nil {
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(q), target)
			}
			q = target
			continue
		}
		parent := filepath.Dir(q)
		if parent == q {
			break
		}
		q, whole = parent, false
	}
	return "", nil, false
}
