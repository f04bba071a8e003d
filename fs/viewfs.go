package fs

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// NewViewFS returns an io/fs.FS serving view v in-process, with the rules of
// the mount: the root lists the slugs as directories, hidden bookkeeping
// files do not exist, nothing outside a version directory can be reached and
// modes are 0555 for directories and 0444 or 0555 for files. Entries whose
// slug is not a valid name are left out; of duplicate slugs the first wins.
// Version directories are walked at first use.
func NewViewFS(v View) iofs.FS {
	var trees treeCache
	byslug := make(map[string]*grant, len(v))
	var slugs []string
	vf := &viewFS{grant: func(slug string) *grant { return byslug[slug] }, list: func() []string { return slugs }}
	for _, sk := range v {
		if !validName(sk.Slug) || strings.HasPrefix(sk.Slug, HiddenPrefix) || byslug[sk.Slug] != nil {
			continue
		}
		byslug[sk.Slug] = &grant{skill: sk, ref: trees.acquire(sk.Dir), lease: &lease{}}
		slugs = append(slugs, sk.Slug)
	}
	slices.Sort(slugs)
	return vf
}

// viewFS is the io/fs.FS of a view.
type viewFS struct {
	list  func() []string          // the slugs, sorted
	grant func(slug string) *grant // nil when slug cannot be read
}

var (
	_ iofs.StatFS    = (*viewFS)(nil)
	_ iofs.ReadDirFS = (*viewFS)(nil)
)

// resolve finds a named entry below the root.
func (v *viewFS) resolve(op, name string) (*grant, *tree, int32, error) {
	if !iofs.ValidPath(name) {
		return nil, nil, 0, &iofs.PathError{Op: op, Path: name, Err: iofs.ErrInvalid}
	}
	slug, rest, _ := strings.Cut(name, "/")
	g := v.grant(slug)
	if g == nil || g.revoked() {
		return nil, nil, 0, &iofs.PathError{Op: op, Path: name, Err: iofs.ErrNotExist}
	}
	t, _, err := g.ref.get()
	if err != nil {
		return nil, nil, 0, &iofs.PathError{Op: op, Path: name, Err: err}
	}
	idx, ok := t.walk(rest)
	if !ok {
		return nil, nil, 0, &iofs.PathError{Op: op, Path: name, Err: iofs.ErrNotExist}
	}
	return g, t, idx, nil
}

// Open opens a file or directory of the view.
func (v *viewFS) Open(name string) (iofs.File, error) {
	if name == "." {
		return &dirFile{name: name, info: rootInfo{}, entries: v.rootEntries()}, nil
	}
	g, t, idx, err := v.resolve("open", name)
	if err != nil {
		return nil, err
	}
	info := fileInfo{name: path.Base(name), e: &t.entries[idx]}
	if info.e.dir {
		return &dirFile{name: name, info: info, entries: entries(t, idx)}, nil
	}
	fd, err := t.open(idx)
	if err != nil {
		return nil, &iofs.PathError{Op: "open", Path: name, Err: errors.Unwrap(err)}
	}
	return &viewFile{f: os.NewFile(uintptr(fd), name), name: name, info: info, g: g}, nil
}

// Stat describes a file or directory of the view.
func (v *viewFS) Stat(name string) (iofs.FileInfo, error) {
	if name == "." {
		return rootInfo{}, nil
	}
	_, t, idx, err := v.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), e: &t.entries[idx]}, nil
}

// ReadDir lists a directory of the view, sorted by name.
func (v *viewFS) ReadDir(name string) ([]iofs.DirEntry, error) {
	if name == "." {
		return v.rootEntries(), nil
	}
	_, t, idx, err := v.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	if !t.entries[idx].dir {
		return nil, &iofs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	return entries(t, idx), nil
}

func (v *viewFS) rootEntries() []iofs.DirEntry {
	slugs := v.list()
	list := make([]iofs.DirEntry, 0, len(slugs))
	for _, slug := range slugs {
		if g := v.grant(slug); g != nil && !g.revoked() {
			list = append(list, slugEntry{g: g})
		}
	}
	return list
}

func entries(t *tree, idx int32) []iofs.DirEntry {
	kids := t.entries[idx].children
	list := make([]iofs.DirEntry, len(kids))
	for i, ci := range kids {
		list[i] = fileInfo{name: t.entries[ci].name, e: &t.entries[ci]}
	}
	return list
}

// fileInfo describes an entry of a version tree; it is its own DirEntry.
type fileInfo struct {
	name string
	e    *entry
}

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64  { return fi.e.size }
func (fi fileInfo) Mode() iofs.FileMode {
	switch {
	case fi.e.dir:
		return iofs.ModeDir | 0o555
	case fi.e.exec:
		return 0o555
	}
	return 0o444
}
func (fi fileInfo) ModTime() time.Time           { return fi.e.mtime }
func (fi fileInfo) IsDir() bool                  { return fi.e.dir }
func (fi fileInfo) Sys() any                     { return nil }
func (fi fileInfo) Type() iofs.FileMode          { return fi.Mode().Type() }
func (fi fileInfo) Info() (iofs.FileInfo, error) { return fi, nil }
func (fi fileInfo) String() string               { return iofs.FormatFileInfo(fi) }

// rootInfo describes the view's root.
type rootInfo struct{}

func (rootInfo) Name() string        { return "." }
func (rootInfo) Size() int64         { return 0 }
func (rootInfo) Mode() iofs.FileMode { return iofs.ModeDir | 0o555 }
func (rootInfo) ModTime() time.Time  { return time.Time{} }
func (rootInfo) IsDir() bool         { return true }
func (rootInfo) Sys() any            { return nil }

// slugEntry lists a skill in the root; its attributes are read only when
// asked for, so listing the root walks no version directory.
type slugEntry struct{ g *grant }

func (e slugEntry) Name() string        { return e.g.skill.Slug }
func (e slugEntry) IsDir() bool         { return true }
func (e slugEntry) Type() iofs.FileMode { return iofs.ModeDir }
func (e slugEntry) String() string      { return iofs.FormatDirEntry(e) }

// Info walks the skill's version directory if that has not happened yet.
func (e slugEntry) Info() (iofs.FileInfo, error) {
	t, _, err := e.g.ref.get()
	if err != nil {
		return nil, &iofs.PathError{Op: "stat", Path: e.g.skill.Slug, Err: err}
	}
	return fileInfo{name: e.g.skill.Slug, e: &t.entries[0]}, nil
}

// dirFile is an open directory of the view.
type dirFile struct {
	name    string
	info    iofs.FileInfo
	entries []iofs.DirEntry
	off     int
}

func (d *dirFile) Stat() (iofs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error                 { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &iofs.PathError{Op: "read", Path: d.name, Err: syscall.EISDIR}
}

// ReadDir follows io/fs.ReadDirFile: with n > 0 at most n entries and io.EOF
// at the end, otherwise all remaining entries.
func (d *dirFile) ReadDir(n int) ([]iofs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}

// viewFile is an open file of the view. Reads fail once its skill is revoked
// (only views returned by Server.ViewFS are ever revoked).
type viewFile struct {
	f    *os.File
	name string
	info fileInfo
	g    *grant
}

var (
	_ io.ReaderAt = (*viewFile)(nil)
	_ io.Seeker   = (*viewFile)(nil)
)

func (f *viewFile) Stat() (iofs.FileInfo, error) { return f.info, nil }
func (f *viewFile) Close() error                 { return f.f.Close() }

func (f *viewFile) revoked(op string) error {
	if f.g.revoked() {
		return &iofs.PathError{Op: op, Path: f.name, Err: iofs.ErrPermission}
	}
	return nil
}

func (f *viewFile) Read(p []byte) (int, error) {
	if err := f.revoked("read"); err != nil {
		return 0, err
	}
	return f.f.Read(p)
}

func (f *viewFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.revoked("read"); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *viewFile) Seek(off int64, whence int) (int64, error) {
	return f.f.Seek(off, whence)
}
