package source

import (
	"archive/zip"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"skillfs/skills"
)

// ExtractZip unpacks the ZIP archive at zipPath into dst under lim and
// returns warnings about entries it left out. Every entry name must pass
// CleanRelPath; duplicates (after cleaning, a file and a directory of the
// same name included) and devices, fifos and sockets are refused, and all
// limits are checked on the central directory before anything is written,
// then again on the bytes actually decompressed, since headers can lie.
// Encrypted entries, and entries whose data lies outside the archive or
// overlaps another entry's, are refused. Files keep the owner execute bit of
// their Unix mode (stored 0644 or 0755) and their modification time. Errors
// name the entry.
//
// A symlink entry (Unix mode 0120000) whose target, its data of at most
// maxZipLinkTarget bytes, is a relative path that stays inside the archive
// once cleaned lexically is unpacked as a symlink, so that staging with the
// unpacked tree as its root copies what it names; links are made last, once
// every file and directory is written, so no entry is ever written through
// one. A link whose target is absolute, leads outside the archive, is empty
// or too long, or holds a NUL, a backslash or a control character is left
// out with a warning naming the entry.
//
// dst must not exist or be an empty directory; on any error it is removed.
// Errors do not name zipPath, which may be a temporary copy: the caller names
// the source.
func ExtractZip(zipPath, dst string, lim skills.Limits) (warnings []string, err error) {
	defer func() {
		if err != nil && isCorrupt(err) {
			err = fmt.Errorf("%w: corrupt or truncated archive: %w", err, skills.ErrInvalid)
		}
		if err != nil {
			warnings = nil
		}
	}()
	// The type is checked on the open descriptor, and the open cannot
	// block: a FIFO or a device named as an archive is refused unread.
	f, fi, err := skills.OpenRegular(zipPath, filepath.Base(zipPath), true)
	if err != nil {
		return nil, fmt.Errorf("read zip: %w", err)
	}
	defer f.Close()
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are checked below
		return nil, fmt.Errorf("read zip: %w", err)
	}
	b := skills.NewBudget(lim)
	if n := len(zr.File); n > b.Limits.MaxEntries {
		return nil, fmt.Errorf("read zip: %w", &skills.LimitError{Limit: skills.LimitEntries, Value: int64(n), Max: int64(b.Limits.MaxEntries)})
	}
	plan, err := planZip(zr.File, fi.Size(), b)
	if err != nil {
		return nil, fmt.Errorf("read zip: %w", err)
	}
	if err := checkZipData(append(slices.Clip(plan.files), plan.links...), fi.Size()); err != nil {
		return nil, fmt.Errorf("read zip: %w", err)
	}
	links, err := readZipLinks(plan)
	if err != nil {
		return nil, fmt.Errorf("read zip: %w", err)
	}
	if err := prepareDst(dst); err != nil {
		return nil, fmt.Errorf("read zip: %w", err)
	}
	defer func() {
		if err != nil {
			_ = skills.RemoveTree(dst)
		}
	}()
	// The plan was counted on the central directory; count the bytes again
	// as they are decompressed.
	b = skills.NewBudget(lim)
	for _, d := range plan.dirs {
		if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, fmt.Errorf("read zip: %w", skills.RelError(d, err))
		}
	}
	for _, it := range plan.files {
		if err := extractEntry(it, dst, fi.Size(), b); err != nil {
			return nil, fmt.Errorf("read zip: %w", skills.RelError(it.f.Name, err))
		}
	}
	// Links last: every file and directory is written, and no link's name
	// is a parent of another entry (planZip refused that), so nothing is
	// ever written through one.
	for _, l := range links {
		if l.skip != "" {
			continue
		}
		if err := os.Symlink(l.target, filepath.Join(dst, filepath.FromSlash(l.rel))); err != nil {
			return nil, fmt.Errorf("read zip: %w", skills.RelError(l.name, err))
		}
	}
	// Directory times last, deepest first, once nothing more is written
	// into them.
	for i := len(plan.dirs) - 1; i >= 0; i-- {
		d := plan.dirs[i]
		t, ok := plan.dirTimes[d]
		if !ok {
			continue
		}
		if err := os.Chtimes(filepath.Join(dst, filepath.FromSlash(d)), t, t); err != nil {
			return nil, fmt.Errorf("read zip: %w", skills.RelError(d, err))
		}
	}
	return append(plan.warnings, linkWarnings(links)...), nil
}

// maxZipLinkTarget bounds the target of a symlink entry, as PATH_MAX does.
const maxZipLinkTarget = 4096

// zipLink is a symlink entry with its target read.
type zipLink struct {
	name   string // the entry name, for messages
	rel    string // cleaned
	target string
	skip   string // when set, why it is left out
}

// linkWarnings are the warnings for the links left out.
func linkWarnings(links []zipLink) []string {
	var out []string
	for _, l := range links {
		if l.skip != "" {
			out = append(out, fmt.Sprintf("skipped symlink entry %q -> %q: %s", l.name, l.target, l.skip))
		}
	}
	return out
}

// readZipLinks reads the target of every planned symlink entry, in archive
// order, and decides whether it is unpacked.
func readZipLinks(plan *zipPlan) ([]zipLink, error) {
	var links []zipLink
	for _, it := range plan.links {
		rc, err := it.f.Open()
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", it.f.Name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxZipLinkTarget+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", it.f.Name, err)
		}
		l := zipLink{name: it.f.Name, rel: it.rel, target: string(data)}
		l.skip = zipLinkProblem(it.rel, l.target)
		links = append(links, l)
	}
	return links, nil
}

// zipLinkProblem says why the link at rel (clean) to target cannot be
// unpacked, or "".
func zipLinkProblem(rel, target string) string {
	switch {
	case target == "":
		return "its target is empty"
	case len(target) > maxZipLinkTarget:
		return fmt.Sprintf("its target is longer than %d bytes", maxZipLinkTarget)
	case !utf8.ValidString(target) || strings.ContainsFunc(target, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return "its target holds a NUL, a backslash or a control character"
	case target[0] == '/':
		return "its target is absolute"
	}
	if p := path.Join(path.Dir(rel), target); p == ".." || strings.HasPrefix(p, "../") {
		return "it leads outside the archive"
	}
	return ""
}

type zipItem struct {
	rel string
	f   *zip.File
}

type zipPlan struct {
	dirs     []string             // every directory, explicit or implied, sorted so parents come first
	dirTimes map[string]time.Time // modification times of explicit directory entries
	files    []zipItem            // regular files in archive order
	links    []zipItem            // symlinks in archive order, their targets not read yet
	warnings []string             // entries left out unread
}

// planZip validates every entry of the central directory and accounts for it
// in b using the declared sizes.
func planZip(files []*zip.File, archiveSize int64, b *skills.Budget) (*zipPlan, error) {
	const (
		kindFile = iota + 1
		kindDir
		kindImplied
		kindLink
	)
	kinds := make(map[string]int, len(files))
	plan := &zipPlan{dirTimes: map[string]time.Time{}}
	var declared uint64
	for _, zf := range files {
		name := zf.Name
		isDir := zf.Mode().IsDir()
		rel, root, err := checkZipEntry(zf)
		if err != nil {
			return nil, err
		}
		if root {
			continue // "./": the archive root itself
		}
		isLink := zf.Mode().Type() == iofs.ModeSymlink
		// Implied parents first, so a file that is also used as a
		// directory is caught whichever comes first.
		for i := 0; i < len(rel); i++ {
			if rel[i] != '/' {
				continue
			}
			p := rel[:i]
			switch kinds[p] {
			case kindFile:
				return nil, fmt.Errorf("entry %q: %q is both a file and a directory: %w", name, p, skills.ErrUnsafePath)
			case kindLink:
				return nil, fmt.Errorf("entry %q: %q is both a symlink and a directory: %w", name, p, skills.ErrUnsafePath)
			case 0:
				if err := b.Dir(p); err != nil {
					return nil, err
				}
				kinds[p] = kindImplied
				plan.dirs = append(plan.dirs, p)
			}
		}
		switch prev := kinds[rel]; {
		case prev == kindImplied && isDir:
			kinds[rel] = kindDir
		case prev != 0:
			return nil, fmt.Errorf("entry %q: duplicate of an earlier entry %q: %w", name, rel, skills.ErrUnsafePath)
		case isDir:
			if err := b.Dir(rel); err != nil {
				return nil, err
			}
			kinds[rel] = kindDir
			plan.dirs = append(plan.dirs, rel)
		case isLink:
			// Counted as the file staging may make of it.
			if err := b.File(rel); err != nil {
				return nil, err
			}
			kinds[rel] = kindLink
			if zf.UncompressedSize64 > maxZipLinkTarget {
				plan.warnings = append(plan.warnings, fmt.Sprintf("skipped symlink entry %q: its target is longer than %d bytes", name, maxZipLinkTarget))
				break
			}
			plan.links = append(plan.links, zipItem{rel: rel, f: zf})
		default:
			if err := b.File(rel); err != nil {
				return nil, err
			}
			if zf.UncompressedSize64 > 1<<62 {
				return nil, &skills.LimitError{Limit: skills.LimitFileBytes, Value: 1 << 62, Max: b.Limits.MaxFileBytes, Path: rel}
			}
			if err := b.Size(rel, int64(zf.UncompressedSize64)); err != nil {
				return nil, err
			}
			if err := b.Ratio(rel, zf.UncompressedSize64, zf.CompressedSize64); err != nil {
				return nil, err
			}
			declared += zf.UncompressedSize64
			if declared > uint64(b.Limits.MaxTotalBytes) {
				return nil, &skills.LimitError{Limit: skills.LimitTotalBytes, Value: int64(min(declared, 1<<62)), Max: b.Limits.MaxTotalBytes, Path: rel}
			}
			kinds[rel] = kindFile
			plan.files = append(plan.files, zipItem{rel: rel, f: zf})
		}
		if isDir && !zf.Modified.IsZero() {
			plan.dirTimes[rel] = zf.Modified
		}
	}
	if err := b.Ratio("", declared, uint64(archiveSize)); err != nil {
		return nil, err
	}
	sort.Strings(plan.dirs) // a parent sorts before anything below it
	return plan, nil
}

// checkZipEntry checks an entry's name and type on its own: valid UTF-8, a
// safe relative path, a regular file, a directory without data or a
// symlink (one named like a directory is refused), not encrypted. root is
// true for an entry naming the archive's root ("./"), which is skipped.
func checkZipEntry(zf *zip.File) (rel string, root bool, err error) {
	name := zf.Name
	mode := zf.Mode()
	isDir := mode.IsDir()
	if !utf8.ValidString(name) {
		return "", false, fmt.Errorf("entry %q: name is not valid UTF-8: %w", name, skills.ErrUnsafePath)
	}
	if isDir && strings.Trim(name, "./") == "" && !strings.Contains(name, "..") && name != "" && name[0] != '/' {
		return "", true, nil
	}
	rel, err = skills.CleanRelPath(name)
	if err != nil {
		return "", false, fmt.Errorf("entry %q: %w", name, err)
	}
	isLink := mode.Type() == iofs.ModeSymlink // a symlink named like a directory is refused
	if t := mode.Type() &^ iofs.ModeDir; t != 0 && !isLink {
		return "", false, &skills.SpecialFileError{Path: name, Kind: skills.FileKind(mode)}
	}
	if zf.Flags&zipEncrypted != 0 {
		// archive/zip ignores the flag and would read the bytes as
		// they are: garbage, or plain text that claims otherwise.
		return "", false, fmt.Errorf("entry %q is encrypted, which skillfs does not read: %w", name, skills.ErrInvalid)
	}
	if isDir && zf.UncompressedSize64 != 0 {
		return "", false, fmt.Errorf("entry %q: directory with data: %w", name, zip.ErrFormat)
	}
	return rel, false, nil
}

// zipEncrypted are the general purpose flags of an encrypted entry:
// traditional (bit 0) and strong (bit 6) encryption.
const zipEncrypted = 0x1 | 0x40

// checkZipData checks that the data of every file lies inside the archive
// and that no two files share bytes. archive/zip takes the offsets of the
// central directory as they are: a negative one fails later with an I/O
// error, and several entries pointing at one stream (the overlapping-file
// bomb) expand the same bytes again and again.
func checkZipData(files []zipItem, archiveSize int64) error {
	type span struct {
		name       string
		start, end int64
	}
	spans := make([]span, 0, len(files))
	for _, it := range files {
		// The error of DataOffset names the file, perhaps a temporary
		// copy: it is not passed on.
		off, err := it.f.DataOffset()
		if err != nil || off < 0 || off > archiveSize {
			return fmt.Errorf("entry %q: its local header is damaged or outside the archive: %w", it.f.Name, zip.ErrFormat)
		}
		size := it.f.CompressedSize64
		if size > uint64(archiveSize-off) {
			return fmt.Errorf("entry %q: its data runs past the end of the archive: %w", it.f.Name, zip.ErrFormat)
		}
		if size > 0 {
			spans = append(spans, span{it.f.Name, off, off + int64(size)})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return fmt.Errorf("entry %q: its data overlaps entry %q: %w", spans[i].name, spans[i-1].name, zip.ErrFormat)
		}
	}
	return nil
}

// extractEntry writes one planned file below dst, counting the decompressed
// bytes against the limits and the compression ratio as they arrive.
func extractEntry(it zipItem, dst string, archiveSize int64, b *skills.Budget) error {
	rc, err := it.f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	mode := skills.StoredFileMode(it.f.Mode())
	p := filepath.Join(dst, filepath.FromSlash(it.rel))
	// dst is fresh and only ever receives directories and regular files, so
	// nothing below it can redirect this open; O_NOFOLLOW and O_EXCL keep
	// it that way.
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	before := b.Bytes
	_, err = b.CopyCountedRatio(out, rc, it.rel, func(n int64) error {
		if err := b.Ratio(it.rel, uint64(n), it.f.CompressedSize64); err != nil {
			return err
		}
		return b.Ratio(it.rel, uint64(before+n), uint64(archiveSize))
	})
	if err == nil {
		err = out.Chmod(mode)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !it.f.Modified.IsZero() {
		if err := os.Chtimes(p, it.f.Modified, it.f.Modified); err != nil {
			return err
		}
	}
	return nil
}

// isCorrupt tells a damaged archive (bad input) from an I/O failure.
func isCorrupt(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrChecksum) ||
		errors.Is(err, zip.ErrAlgorithm) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ce)
}
