package store

import (
	"archive/zip"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"skillfs/skills"
)

// WriteZip writes the tree at dir (a stored version) to w as a ZIP archive
// whose entries lie under prefix (usually the slug; "" for none). Every
// directory gets its own entry, so empty ones survive; files carry their
// mode as Unix external attributes (0644 or 0755 by the owner execute bit)
// and their modification time. ExtractZip, StageDir and TreeHash bring the
// archive back to the same tree hash. The store's metadata file is not
// exported.
func WriteZip(w io.Writer, dir, prefix string) error {
	if prefix != "" {
		clean, err := skills.CleanRelPath(prefix)
		if err != nil {
			return fmt.Errorf("write zip of %q: prefix: %w", dir, err)
		}
		prefix = clean
	}
	root, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("write zip of %q: %w", dir, err)
	}
	ents, err := walkTree(dir)
	if err != nil {
		return fmt.Errorf("write zip of %q: %w", dir, err)
	}
	ents = contentOnly(ents)
	zw := zip.NewWriter(w)
	if prefix != "" {
		if err := writeZipDir(zw, prefix, root.ModTime()); err != nil {
			return fmt.Errorf("write zip of %q: %w", dir, err)
		}
	}
	for _, e := range ents {
		name := path.Join(prefix, e.rel)
		if e.dir {
			err = writeZipDir(zw, name, e.mtime)
		} else {
			err = writeZipFile(zw, filepath.Join(dir, filepath.FromSlash(e.rel)), name, e)
		}
		if err != nil {
			return fmt.Errorf("write zip of %q: %q: %w", dir, e.rel, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write zip of %q: %w", dir, err)
	}
	return nil
}

func writeZipDir(zw *zip.Writer, name string, mtime time.Time) error {
	h := &zip.FileHeader{Name: name + "/", Method: zip.Store, Modified: mtime}
	h.SetMode(iofs.ModeDir | 0o755)
	_, err := zw.CreateHeader(h)
	return err
}

func writeZipFile(zw *zip.Writer, p, name string, e treeEntry) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, e.info) {
		return fmt.Errorf("changed while being read: %w", skills.ErrSpecialFile)
	}
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: fi.ModTime()}
	h.SetMode(skills.StoredFileMode(fi.Mode()))
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	return err
}
