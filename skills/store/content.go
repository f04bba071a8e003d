package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"skillfs/skills"
)

// A version's content can live outside a store: in a shared index, as a
// listing of its entries (ContentEntry) whose files' bytes are kept as
// chunks named by their SHA-256. What a host needs to rebuild the version
// directory exactly is what TreeHash covers — every directory (empty ones
// too) and regular file by its slash path, each file's owner execute bit
// and bytes — plus the modification times the filesystem shows and the
// version's metadata file. A published version holds nothing else: staging
// stores symlinks as copies of their targets, refuses special files and
// names reserved for skillfs, and publishing sets every mode from the
// execute bit.

// ContentEntry is one entry of a version's content as a shared index lists
// it.
type ContentEntry struct {
	Path  string    // slash path below the version directory
	Dir   bool      // a directory; otherwise a regular file
	Exec  bool      // files: the owner execute bit
	Size  int64     // files: the bytes of its content
	MTime time.Time // the modification time shown; zero: not recorded
	// Chunks are the SHA-256 sums (hex) of the file's bytes in the
	// index's chunk size, in order; none for an empty file or a directory.
	Chunks []string
}

// ContentManifest is the content of one version as a shared index holds
// it: its entries in bytewise order of their paths, and its metadata file
// as published (nil when it had none).
type ContentManifest struct {
	Slug    string
	Hash    string
	Meta    []byte
	Entries []ContentEntry
}

// ContentFile is one entry of a version to upload into a shared index:
// a directory, or a regular file whose bytes Open yields.
type ContentFile struct {
	Path  string
	Dir   bool
	Exec  bool
	MTime time.Time
	// Open opens the file's bytes (files only). The reader counts what
	// it yields: the size a listing gave is never trusted.
	Open func() (io.ReadCloser, error)
}

// ReadContent lists the content of the version directory dir for upload,
// as TreeHash sees it: every directory and regular file below dir but the
// metadata file, in bytewise order of their paths. Anything else is an
// error wrapping ErrSpecialFile. Each file is opened only when it is read,
// and refused then if it is no longer the regular file listed.
func ReadContent(dir string) ([]ContentFile, error) {
	ents, err := walkTree(dir)
	if err != nil {
		return nil, fmt.Errorf("read content of %q: %w", dir, err)
	}
	ents = contentOnly(ents)
	out := make([]ContentFile, len(ents))
	for i, e := range ents {
		out[i] = ContentFile{Path: e.rel, Dir: e.dir, Exec: e.exec, MTime: e.mtime}
		if !e.dir {
			p, rel, info := filepath.Join(dir, filepath.FromSlash(e.rel)), e.rel, e.info
			out[i].Open = func() (io.ReadCloser, error) { return openListed(p, rel, info) }
		}
	}
	return out, nil
}

// openListed opens a file listed as info, checking on the open descriptor
// that it is still that regular file.
func openListed(p, rel string, info iofs.FileInfo) (*os.File, error) {
	f, fi, err := skills.OpenRegular(p, rel, false)
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, info) {
		f.Close()
		return nil, fmt.Errorf("%q changed while being read: %w", rel, skills.ErrSpecialFile)
	}
	return f, nil
}

// ContentChecker checks the paths of a content listing as they come, so
// that nothing it lets through can be written outside the directory the
// listing is written into, or be hashed in another order than TreeHash's:
// each path is clean (CleanRelPath leaves it as it is) and holds no name
// reserved for skillfs, comes after the one before it in bytewise order,
// and lies in a directory listed before it (or at the root). The zero value
// is ready to use.
type ContentChecker struct {
	last string
	dirs map[string]bool
}

// Next checks the entry rel (a directory when dir) that comes next. Its
// errors wrap ErrUnsafePath for a path that could leave the tree, and
// ErrInvalid for one out of order or in no listed directory.
func (c *ContentChecker) Next(rel string, dir bool) error {
	clean, err := skills.CleanRelPath(rel)
	if err != nil {
		return err
	}
	if clean != rel {
		return fmt.Errorf("path %q is not clean: %w", rel, skills.ErrUnsafePath)
	}
	for _, name := range strings.Split(rel, "/") {
		if strings.HasPrefix(name, skills.ReservedPrefix) {
			return fmt.Errorf("path %q: names starting with %s are reserved: %w", rel, skills.ReservedPrefix, skills.ErrUnsafePath)
		}
	}
	if c.last != "" && rel <= c.last {
		return fmt.Errorf("path %q comes after %q: not in order: %w", rel, c.last, skills.ErrInvalid)
	}
	if parent := path.Dir(rel); parent != "." && !c.dirs[parent] {
		return fmt.Errorf("path %q: its directory is not listed before it: %w", rel, skills.ErrInvalid)
	}
	c.last = rel
	if dir {
		if c.dirs == nil {
			c.dirs = map[string]bool{}
		}
		c.dirs[rel] = true
	}
	return nil
}

// WriteContent writes the entries of a content listing into dst, an
// existing empty directory (a staging directory), fetching each file's
// chunks in order with chunk, and returns the tree hash of what it wrote,
// for the caller to compare with the version's name before publishing it.
// Every chunk's bytes are checked against the sum that names them before a
// byte of them is written, and a file must come to exactly its recorded
// size. Files are created 0644 or 0755 by their execute bit, directories
// 0755, with the recorded modification times.
//
// A listing that breaks ContentChecker's rules, a directory with a size or
// chunks, or a chunk that is empty, does not match its sum or gives a file
// more or fewer bytes than recorded is an error wrapping ErrDamaged; the
// errors of chunk are returned as they are. On any error dst is left with
// what was written so far, for the caller to remove.
func WriteContent(dst string, entries []ContentEntry, chunk func(sum string) ([]byte, error)) (string, error) {
	var check ContentChecker
	h := NewTreeHasher()
	for i := range entries {
		e := &entries[i]
		if err := check.Next(e.Path, e.Dir); err != nil {
			return "", fmt.Errorf("content listing: %v: %w", err, skills.ErrDamaged)
		}
		p := filepath.Join(dst, filepath.FromSlash(e.Path))
		if e.Dir {
			if e.Exec || e.Size != 0 || len(e.Chunks) != 0 {
				return "", fmt.Errorf("content listing: directory %q has a size or content: %w", e.Path, skills.ErrDamaged)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return "", skills.RelError(e.Path, err)
			}
			h.Dir(e.Path)
			continue
		}
		sum, err := writeChunks(p, e, chunk)
		if err != nil {
			return "", err
		}
		h.File(e.Path, e.Exec, e.Size, sum)
	}
	// Directories last, deepest first: writing into one changes its time.
	for i := len(entries) - 1; i >= 0; i-- {
		if e := &entries[i]; e.Dir && !e.MTime.IsZero() {
			if err := os.Chtimes(filepath.Join(dst, filepath.FromSlash(e.Path)), e.MTime, e.MTime); err != nil {
				return "", skills.RelError(e.Path, err)
			}
		}
	}
	return h.Sum(), nil
}

// writeChunks writes the file e at p from its chunks and returns the
// SHA-256 of its bytes.
func writeChunks(p string, e *ContentEntry, chunk func(sum string) ([]byte, error)) (sum []byte, err error) {
	// Every chunk holds at least one byte: a listing naming more chunks
	// than bytes is refused before any is fetched.
	if e.Size < 0 || int64(len(e.Chunks)) > e.Size || (e.Size > 0 && len(e.Chunks) == 0) {
		return nil, fmt.Errorf("content listing: file %q: %d bytes in %d chunks: %w", e.Path, e.Size, len(e.Chunks), skills.ErrDamaged)
	}
	mode := os.FileMode(0o644)
	if e.Exec {
		mode = 0o755
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return nil, skills.RelError(e.Path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = skills.RelError(e.Path, cerr)
		}
	}()
	whole := sha256.New()
	var n int64
	for i, want := range e.Chunks {
		data, err := chunk(want)
		if err != nil {
			return nil, fmt.Errorf("file %q, chunk %d: %w", e.Path, i, err)
		}
		got := sha256.Sum256(data)
		switch {
		case len(data) == 0:
			return nil, fmt.Errorf("file %q, chunk %d (%s) is empty: %w", e.Path, i, want, skills.ErrDamaged)
		case hex.EncodeToString(got[:]) != want:
			return nil, fmt.Errorf("file %q, chunk %d: its bytes hash to %x, not to the %s that names it: %w", e.Path, i, got, want, skills.ErrDamaged)
		case n+int64(len(data)) > e.Size:
			return nil, fmt.Errorf("file %q: more than the %d bytes recorded: %w", e.Path, e.Size, skills.ErrDamaged)
		}
		if _, err := f.Write(data); err != nil {
			return nil, skills.RelError(e.Path, err)
		}
		whole.Write(data)
		n += int64(len(data))
	}
	if n != e.Size {
		return nil, fmt.Errorf("file %q: %d bytes, %d recorded: %w", e.Path, n, e.Size, skills.ErrDamaged)
	}
	if err := f.Chmod(mode); err != nil { // the umask may have narrowed it
		return nil, skills.RelError(e.Path, err)
	}
	if !e.MTime.IsZero() {
		if err := os.Chtimes(p, e.MTime, e.MTime); err != nil {
			return nil, skills.RelError(e.Path, err)
		}
	}
	return whole.Sum(nil), nil
}

// ChangeClock returns the time as the kernel stamps the changes of files
// (their ctime): CLOCK_REALTIME_COARSE, which lags the precise clock by up
// to a tick. A file changed after ChangeClock returned has a ctime no
// earlier than what it returned, so a check of a version that notes this
// time before it starts covers every change that a later ctime shows;
// time.Now could be ahead of the ctime of a change made after it. (A change
// made a little before may show a later ctime, the kernel stamping some
// changes precisely: that only costs a check that was not needed.)
func ChangeClock() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		// Not there: a clock a full second behind is safe, only
		// cautious (a change is taken as later than a check more often).
		return time.Now().Add(-time.Second)
	}
	return time.Unix(ts.Unix())
}

// RawMeta returns the bytes of a published version's metadata file as they
// are, for a copy of the version elsewhere; a version without one is
// ErrNotFound.
func (s *Store) RawMeta(slug, hash string) ([]byte, error) {
	dir := s.VersionPath(slug, hash)
	if dir == "" {
		return nil, fmt.Errorf("read metadata of %s/%s: %w", slug, hash, skills.ErrUnsafePath)
	}
	data, err := skills.ReadRegular(filepath.Join(dir, skills.MetaFileName), VersionRelPath(slug, hash)+"/"+skills.MetaFileName, maxMetaBytes, false)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("read metadata of %s/%s: %w", slug, hash, skills.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read metadata of %s/%s: %w", slug, hash, err)
	}
	return data, nil
}

// DecodeMeta parses the bytes of a metadata file (RawMeta) that must
// describe version hash of slug; anything else is ErrInvalid.
func DecodeMeta(data []byte, slug, hash string) (*VersionMeta, error) {
	if len(data) > maxMetaBytes {
		return nil, fmt.Errorf("version metadata of %d bytes, over %d: %w", len(data), maxMetaBytes, skills.ErrInvalid)
	}
	return decodeMeta(data, slug, hash)
}

// VersionOf names the version whose directory is dir (as VersionPath gives
// it); ok is false for any other path.
func (s *Store) VersionOf(dir string) (slug, hash string, ok bool) {
	rest, found := strings.CutPrefix(dir, s.skillsDir()+string(filepath.Separator))
	if !found {
		return "", "", false
	}
	slug, hash, found = strings.Cut(rest, string(filepath.Separator))
	if !found || s.VersionPath(slug, hash) != dir {
		return "", "", false
	}
	return slug, hash, true
}

// CheckLimits checks a version's listing, as a shared index holds it,
// against lim before anything of it is fetched: a listing another host
// wrote (or a damaged one) gets no more of this host's disk than an import
// from any other source would.
func (m *ContentManifest) CheckLimits(lim skills.Limits) error {
	b := skills.NewBudget(lim)
	for _, e := range m.Entries {
		if e.Dir {
			if err := b.Dir(e.Path); err != nil {
				return err
			}
			continue
		}
		if err := b.File(e.Path); err != nil {
			return err
		}
		if err := b.Size(e.Path, e.Size); err != nil {
			return err
		}
		if err := b.Add(e.Path, e.Size); err != nil {
			return err
		}
	}
	return nil
}
