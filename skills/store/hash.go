package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"skillfs/skills"
)

// treeHashHeader versions the TreeHash encoding; changing the encoding means
// changing this, never silently reusing it.
const treeHashHeader = "skillfs-tree-v1\x00"

// treeEntry is one directory or regular file below a tree root.
type treeEntry struct {
	rel   string // clean slash path below the root
	dir   bool
	exec  bool // owner execute bit, files only
	size  int64
	mtime time.Time
	info  iofs.FileInfo
}

// walkTree lists every entry below root (not root itself) with Lstat,
// sorted by slash path bytewise. Anything but a directory or a regular file
// is an error wrapping ErrSpecialFile.
func walkTree(root string) ([]treeEntry, error) {
	var out []treeEntry
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			crel := path.Join(rel, e.Name())
			p := filepath.Join(dir, e.Name())
			info, err := os.Lstat(p)
			if err != nil {
				return err
			}
			switch {
			case info.IsDir():
				out = append(out, treeEntry{rel: crel, dir: true, mtime: info.ModTime(), info: info})
				if err := walk(p, crel); err != nil {
					return err
				}
			case info.Mode().IsRegular():
				out = append(out, treeEntry{rel: crel, exec: info.Mode()&0o100 != 0, size: info.Size(), mtime: info.ModTime(), info: info})
			default:
				return &skills.SpecialFileError{Path: crel, Kind: skills.FileKind(info.Mode())}
			}
		}
		return nil
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("not a directory: %w", skills.ErrInvalid)
	}
	if err := walk(root, ""); err != nil {
		return nil, err
	}
	// ReadDir order is per directory ("a" and its children before "a-b");
	// the hash wants one global order that does not depend on the walk.
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

// contentOnly drops the store's metadata file from a root listing.
func contentOnly(ents []treeEntry) []treeEntry {
	out := ents[:0:0]
	for _, e := range ents {
		if e.rel != skills.MetaFileName {
			out = append(out, e)
		}
	}
	return out
}

// TreeHash is the content identity of a staged or stored skill: SHA-256 over
// its entries in bytewise order of their slash paths. The encoding is the
// header "skillfs-tree-v1\x00", then per entry:
//
//	directory: 'd' '-' len(path) path
//	file:      'f' ('x' if the owner execute bit is set, else '-') len(path) path size sha256(content)
//
// with lengths and sizes as 8-byte big-endian integers, so no two trees share
// an encoding. Modification times and other mode bits are not part of it.
// files and bytes count the regular files and their total size. The result is
// 64 lower-case hex digits. A skills.MetaFileName at the root is the store's
// bookkeeping, not content, and is left out.
func TreeHash(dir string) (hash string, files int, bytes int64, err error) {
	ents, err := walkTree(dir)
	if err != nil {
		return "", 0, 0, fmt.Errorf("hash tree %q: %w", dir, err)
	}
	ents = contentOnly(ents)
	h := NewTreeHasher()
	for _, e := range ents {
		if e.dir {
			h.Dir(e.rel)
			continue
		}
		sum, n, err := hashFile(filepath.Join(dir, filepath.FromSlash(e.rel)), e.info)
		if err != nil {
			return "", 0, 0, fmt.Errorf("hash tree %q: %q: %w", dir, e.rel, err)
		}
		h.File(e.rel, e.exec, n, sum)
		files++
		bytes += n
	}
	return h.Sum(), files, bytes, nil
}

// TreeHasher computes TreeHash from a tree's entries given one at a time,
// in bytewise order of their slash paths (the caller's to keep: see
// ContentChecker), so a tree that is not on disk (a version's content as
// the shared index lists it, or bytes as they are uploaded) has the same
// identity as the tree written out.
type TreeHasher struct {
	h   hash.Hash
	num [8]byte
}

// NewTreeHasher starts the hash of a tree.
func NewTreeHasher() *TreeHasher {
	t := &TreeHasher{h: sha256.New()}
	io.WriteString(t.h, treeHashHeader)
	return t
}

func (t *TreeHasher) writeNum(n uint64) {
	binary.BigEndian.PutUint64(t.num[:], n)
	t.h.Write(t.num[:])
}

// Dir adds the directory rel.
func (t *TreeHasher) Dir(rel string) {
	t.h.Write([]byte{'d', '-'})
	t.writeNum(uint64(len(rel)))
	io.WriteString(t.h, rel)
}

// File adds the regular file rel, executable by its owner when exec, of
// size bytes whose SHA-256 is sum.
func (t *TreeHasher) File(rel string, exec bool, size int64, sum []byte) {
	kind := []byte{'f', '-'}
	if exec {
		kind[1] = 'x'
	}
	t.h.Write(kind)
	t.writeNum(uint64(len(rel)))
	io.WriteString(t.h, rel)
	t.writeNum(uint64(size))
	t.h.Write(sum)
}

// Sum is the tree hash of the entries added so far: 64 lower-case hex
// digits.
func (t *TreeHasher) Sum() string { return hex.EncodeToString(t.h.Sum(nil)) }

// hashFile returns the SHA-256 and length of a regular file's content,
// refusing one that was replaced since it was listed.
func hashFile(p string, info iofs.FileInfo) ([]byte, int64, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() || (info != nil && !os.SameFile(fi, info)) {
		return nil, 0, errors.New("changed while being read")
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, 0, err
	}
	return h.Sum(nil), n, nil
}

// ShortHash is a version's tree hash (or a commit) as people read it: its
// first 12 characters.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
