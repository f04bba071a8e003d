package index

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A SQLite index is more than its file. Beside the database SQLite keeps
// its write-ahead log (-wal) and the shared-memory index of that log
// (-shm), in rollback mode a -journal, and this package a lock file
// (.catalog-lock). The processes using one index coordinate through POSIX
// locks on the database and on -shm, and on Linux closing any descriptor of
// a file drops every POSIX lock the process holds on it. So a process using
// the index must never open these files other than through the driver
// (SQLite defers its own closes for this reason; nothing else does): the
// next client to close the file would believe itself alone, checkpoint, and
// delete -wal and -shm under the process, which then writes into a log no
// other process reads. Files names them, for callers that must keep away
// from them; CheckFiles notices when that happened anyway.

// sqliteSuffixes are the names of a SQLite index's files, after its path.
var sqliteSuffixes = []string{"", "-wal", "-shm", "-journal", ".catalog-lock"}

// SQLiteFiles are the absolute paths of the files a SQLite index at target
// consists of or keeps beside it, the database first, whether or not they
// exist; nil for a PostgreSQL URL, which has no files here. Symlinks in
// target are not resolved.
func SQLiteFiles(target string) []string {
	if strings.TrimSpace(target) == "" || isPostgresURL(target) {
		return nil
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil
	}
	out := make([]string, len(sqliteSuffixes))
	for i, s := range sqliteSuffixes {
		out[i] = abs + s
	}
	return out
}

// Files is SQLiteFiles of the open index, by the real path its file had
// when it was opened; nil on PostgreSQL.
func (db *DB) Files() []string {
	if db.d != sqliteDialect {
		return nil
	}
	return SQLiteFiles(db.file)
}

// ReplacedError says that files of a SQLite index this process has open
// are no longer the files at their paths: removed, or replaced by others.
type ReplacedError struct {
	Removed  []string // nothing is at these paths any more
	Replaced []string // another file is at these paths
}

func (e *ReplacedError) Error() string {
	var parts []string
	if len(e.Removed) > 0 {
		parts = append(parts, strings.Join(e.Removed, " and ")+" removed")
	}
	if len(e.Replaced) > 0 {
		parts = append(parts, strings.Join(e.Replaced, " and ")+" replaced by another file")
	}
	return "index files changed under this process, which has them open: " + strings.Join(parts, "; ")
}

// procFDs is where the kernel lists this process's descriptors.
const procFDs = "/proc/self/fd"

// CheckFiles compares the files of a SQLite index that this process has
// open — the database, its -wal and its -shm, found among the process's
// descriptors in /proc/self/fd — with the files now at their paths, by
// device and inode. One that was removed or replaced is a *ReplacedError:
// SQLite goes on using the file it opened, so this process's writes then
// reach no other process and theirs do not reach it. Nothing is opened: the
// descriptors are looked at through /proc, the paths with lstat. A file
// the process has not open is not looked at; on PostgreSQL, or without
// /proc, there is nothing to compare and CheckFiles returns nil.
func (db *DB) CheckFiles() error {
	if db.d != sqliteDialect {
		return nil
	}
	watched := map[string]bool{db.file: true, db.file + "-wal": true, db.file + "-shm": true}
	ents, err := os.ReadDir(procFDs)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	e := &ReplacedError{}
	for _, ent := range ents {
		fd := procFDs + "/" + ent.Name()
		target, err := os.Readlink(fd)
		if err != nil {
			continue // closed meanwhile
		}
		name, _ := strings.CutSuffix(target, " (deleted)")
		if !watched[name] || seen[name] {
			continue
		}
		open, err := os.Stat(fd) // the open file itself, removed or not
		if err != nil {
			continue
		}
		disk, err := os.Lstat(name)
		switch {
		case errors.Is(err, iofs.ErrNotExist):
			e.Removed = append(e.Removed, name)
		case err != nil:
			return fmt.Errorf("check index file %s: %w", name, err)
		case !os.SameFile(open, disk):
			e.Replaced = append(e.Replaced, name)
		default:
			continue // this one is the file on disk; another descriptor of the name may not be
		}
		seen[name] = true
	}
	if len(e.Removed) == 0 && len(e.Replaced) == 0 {
		return nil
	}
	slices.Sort(e.Removed)
	slices.Sort(e.Replaced)
	return e
}
