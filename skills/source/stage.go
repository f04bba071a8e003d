package source

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"skillfs/skills"
)

// lowerManifestName is accepted at a skill root when there is no SKILL.md and
// renamed to ManifestName in the staged copy.
const lowerManifestName = "skill.md"

// manifestNames are the names a skill's manifest may have, in order of
// preference.
var manifestNames = []string{skills.ManifestName, lowerManifestName}

// StageResult describes a staged skill tree.
type StageResult struct {
	Files    int      // regular files copied
	Bytes    int64    // their total size
	Warnings []string // entries skipped or renamed, one line each
}

// StageOptions tunes StageDirOpts.
type StageOptions struct {
	// Root is the root of the source src lies in: the repository, the
	// unpacked archive or the uploaded folder. Symlinks are confined to it:
	// one whose target resolves inside Root is staged as a copy of that
	// target; one that leads outside Root, dangles or loops is left out
	// with a warning. "" means src itself.
	Root string
	// Used, when set, is what the other skills of the same source staged
	// before this one add up to: this one is counted on top of it against
	// the files, entries and total bytes limits, and on success Used
	// includes it. The limits are those of a source (skills/FORMAT.md says so),
	// and a symlink is stored as a copy of its target, so without this a
	// file that many skills link to would count once per skill.
	Used *Usage
	// Link stages each regular file as a hard link to the source's file
	// instead of a copy, where the two lie on one filesystem (a copy
	// otherwise). Only for a source the caller owns and nothing else
	// writes (its own clone or unpacked archive, removed once the import
	// is done): the staged file and the source's are then one file, so
	// neither may be written in place afterwards, only replaced.
	Link bool
}

// Usage is what staged skills hold, counted as the limits count it.
type Usage struct {
	Files   int
	Entries int
	Bytes   int64
}

// StageDir is StageDirOpts with src as its own root: a symlink is staged
// only when its target lies inside the skill folder.
func StageDir(src, dst string, lim skills.Limits) (*StageResult, error) {
	return StageDirOpts(src, dst, lim, StageOptions{})
}

// StageDirOpts copies the skill rooted at src into dst, enforcing lim and
// the package rules: regular files and directories are copied, names
// confined by CleanRelPath, no .git, .DS_Store or __MACOSX (skipped with a
// warning), files stored 0644 or 0755 by the owner execute bit, directories
// 0755, mtimes kept. A root skill.md with no SKILL.md beside it becomes
// SKILL.md. A src without either (or with a directory by that name) is
// ErrNoManifest. Names starting with ".skillfs" are reserved (ErrUnsafePath),
// except a skills.MetaFileName at the root, which is skipped with a warning.
//
// A symlink anywhere below src (SKILL.md and folders included) is resolved
// one component at a time without ever looking outside opts.Root. When its
// target lies inside Root it is stored as a copy of the target, under the
// link's name: a file, or a folder copied recursively, every entry counted
// against lim like any other. A link that leads outside Root (by "..", by
// an absolute path, or through other links), dangles, loops, or names a
// folder that contains it is left out with one warning naming its path
// below src and its target as written. The staged tree never holds a
// symlink.
//
// Devices, sockets and fifos (or links to them) are errors wrapping
// ErrSpecialFile: a *skills.SpecialFileError for one, a *skills.SpecialFilesError naming
// every one when there are several, all found in one pass. Errors name
// paths relative to src, never src itself, which is often a temporary copy:
// the caller names the source.
//
// src itself may be a symlink to a directory (the caller named it); it must
// lie inside Root. dst must not exist or be an empty directory; on any error
// it is removed entirely.
func StageDirOpts(src, dst string, lim skills.Limits, opts StageOptions) (res *StageResult, err error) {
	root, err := realPath(src)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("stage: not a directory: %w", skills.ErrInvalid)
	}
	s := &stager{b: skills.NewBudget(lim), res: &StageResult{}, root: root, link: opts.Link}
	var before Usage
	if opts.Used != nil {
		before = *opts.Used
		s.b.Files, s.b.Entries, s.b.Bytes = before.Files, before.Entries, before.Bytes
	}
	if opts.Root != "" {
		if s.root, err = realPath(opts.Root); err != nil {
			return nil, fmt.Errorf("stage: source root: %w", err)
		}
		if s.rootAsGiven, err = filepath.Abs(opts.Root); err != nil {
			return nil, fmt.Errorf("stage: source root: %w", err)
		}
		if !within(s.root, root) {
			return nil, fmt.Errorf("stage: the skill folder is not inside its source: %w", skills.ErrUnsafePath)
		}
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	var hasUpper, hasLower bool
	var skipped []string // why a manifest that is a link does not count
	for _, e := range ents {
		name := e.Name()
		if name != skills.ManifestName && name != lowerManifestName {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&iofs.ModeSymlink != 0 {
			lt, err := s.resolve(filepath.Join(root, name))
			if err != nil {
				return nil, fmt.Errorf("stage: %w", skills.RelError(name, err))
			}
			if lt.skip != "" {
				skipped = append(skipped, linkSkipped(name, lt))
				continue
			}
			isDir = lt.info.IsDir()
		}
		if isDir {
			return nil, fmt.Errorf("stage: %s is a directory, not a file: %w", name, skills.ErrNoManifest)
		}
		if name == skills.ManifestName {
			hasUpper = true
		} else {
			hasLower = true
		}
	}
	if !hasUpper && !hasLower {
		if len(skipped) > 0 {
			return nil, fmt.Errorf("stage: %s: %w", strings.Join(skipped, "; "), skills.ErrNoManifest)
		}
		return nil, fmt.Errorf("stage: %w", skills.ErrNoManifest)
	}
	s.renameLower = hasLower && !hasUpper
	if err := prepareDst(dst); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	defer func() {
		if err != nil {
			_ = skills.RemoveTree(dst)
			res = nil
		}
	}()
	s.stack = []string{root}
	if err := s.copyDir(root, dst, "", ents); err != nil {
		return nil, err
	}
	if err := specialFilesError(s.specials); err != nil {
		return nil, err
	}
	if err := os.Chtimes(dst, fi.ModTime(), fi.ModTime()); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	s.res.Files = s.b.Files - before.Files
	s.res.Bytes = s.b.Bytes - before.Bytes
	if opts.Used != nil {
		*opts.Used = Usage{Files: s.b.Files, Entries: s.b.Entries, Bytes: s.b.Bytes}
	}
	return s.res, nil
}

type stager struct {
	b           *skills.Budget
	res         *StageResult
	renameLower bool
	root        string                     // real path of the source's root: nothing outside it is read
	rootAsGiven string                     // the root as the caller spelled it, absolute: absolute links may use it
	stack       []string                   // real paths of the folders being copied, outermost first
	specials    []*skills.SpecialFileError // devices, sockets and fifos found so far
	link        bool                       // hard-link regular files where possible (StageOptions.Link)
}

// junkNames are the bookkeeping of other tools (git, the macOS Finder and
// its archiver) that a skill never needs. Staging leaves them out wherever
// they are, without a warning: every git checkout has one, and skills/FORMAT.md
// says they are skipped.
var junkNames = []string{".git", ".DS_Store", "__MACOSX"}

// junkName reports whether an entry is one of junkNames.
func junkName(name string) bool { return slices.Contains(junkNames, name) }

// CheckNotLeftOut refuses a slash path below a skill's folder that staging
// would leave out (a component named .git, .DS_Store or __MACOSX): such a
// file can never be part of a stored skill, so a change that writes or
// removes one (an online edit) would change nothing. The error wraps
// ErrUnsafePath and names the path and the rule.
func CheckNotLeftOut(rel string) error {
	junk := firstJunk(rel)
	if junk == "" {
		return nil
	}
	return fmt.Errorf("%s: %s is never stored in a skill (imports leave out %s wherever they are), so nothing under that name can be written or removed: %w",
		rel, junk, strings.Join(junkNames, ", "), skills.ErrUnsafePath)
}

// copyDir copies the entries of srcDir (already read as ents) into dstDir,
// which exists; rel is srcDir's slash path below the skill folder. srcDir is
// a real path (no symlink in it) inside the source's root.
func (s *stager) copyDir(srcDir, dstDir, rel string, ents []os.DirEntry) error {
	for _, e := range ents {
		name := e.Name()
		crel := path.Join(rel, name)
		if junkName(name) {
			continue
		}
		if crel == skills.MetaFileName {
			// A copy of a stored version (e.g. taken from the quarantine)
			// brings the store's metadata along: the store writes its own.
			s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("skipped %s: skillfs metadata, not content", crel))
			continue
		}
		if strings.HasPrefix(name, skills.ReservedPrefix) {
			// The filesystem never serves these names; storing one would
			// keep content no agent can read.
			return fmt.Errorf("%q: names starting with %q are reserved for skillfs: %w", crel, skills.ReservedPrefix, skills.ErrUnsafePath)
		}
		if _, err := skills.CleanRelPath(crel); err != nil {
			return err
		}
		sp := filepath.Join(srcDir, name)
		info, err := os.Lstat(sp)
		if err != nil {
			return skills.RelError(crel, err)
		}
		link := ""
		if info.Mode()&iofs.ModeSymlink != 0 {
			lt, err := s.resolve(sp)
			if err != nil {
				return skills.RelError(crel, err)
			}
			if lt.skip == "" && lt.info.IsDir() && s.contains(lt.real) {
				lt.skip = "it leads to a folder that contains it"
			}
			if lt.skip != "" {
				s.res.Warnings = append(s.res.Warnings, linkSkipped(crel, lt))
				continue
			}
			// From here on the entry is its target, read from where it
			// really lies.
			sp, info, link = lt.real, lt.info, lt.target
		}
		dname := name
		if rel == "" && name == lowerManifestName && s.renameLower {
			dname = skills.ManifestName
			s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("renamed %s to %s", name, skills.ManifestName))
		}
		dp := filepath.Join(dstDir, dname)
		switch {
		case info.IsDir():
			if err := s.copySubdir(sp, dp, crel, info); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := s.b.File(crel); err != nil {
				return err
			}
			if err := s.b.Size(crel, info.Size()); err != nil {
				return err
			}
			manifest := rel == "" && (name == skills.ManifestName || name == lowerManifestName)
			if manifest {
				if err := s.b.Manifest(crel, info.Size()); err != nil {
					return err
				}
			}
			if err := s.copyFile(sp, dp, crel, info); err != nil {
				return err
			}
			if manifest { // it may have grown since it was stat'ed
				if fi, err := os.Lstat(dp); err != nil {
					return skills.RelError(crel, err)
				} else if err := s.b.Manifest(crel, fi.Size()); err != nil {
					return err
				}
			}
		default:
			// Noted, not fatal yet: one attempt names every such entry.
			s.specials = append(s.specials, &skills.SpecialFileError{Path: crel, Kind: skills.FileKind(info.Mode()), Link: link})
		}
	}
	return nil
}

// copySubdir copies the directory sp (its information info) to dp, the
// entry crel of the source, and everything below it.
func (s *stager) copySubdir(sp, dp, crel string, info iofs.FileInfo) error {
	if err := s.b.Dir(crel); err != nil {
		return err
	}
	children, err := s.readDir(sp, crel)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dp, 0o755); err != nil {
		return skills.RelError(crel, err)
	}
	if err := os.Chmod(dp, 0o755); err != nil {
		return skills.RelError(crel, err)
	}
	s.stack = append(s.stack, sp)
	err = s.copyDir(sp, dp, crel, children)
	s.stack = s.stack[:len(s.stack)-1]
	if err != nil {
		return err
	}
	if err := os.Chtimes(dp, info.ModTime(), info.ModTime()); err != nil {
		return skills.RelError(crel, err)
	}
	return nil
}

// linkTarget is what a symlink of the source resolves to.
type linkTarget struct {
	target string        // as written in the link
	real   string        // the target's real path, inside the root
	info   iofs.FileInfo // the target, not followed
	skip   string        // when set, why the link is left out
}

// linkSkipped is the warning for a link left out.
func linkSkipped(rel string, lt linkTarget) string {
	return fmt.Sprintf("skipped symlink %q -> %q: %s", rel, lt.target, lt.skip)
}

// resolve follows the symlink at p (whose directory is a real path inside
// s.root) as the kernel would, but never looks at anything outside s.root
// (see resolveInRoot). A link leading outside, dangling (or going through
// a file as if it were a folder) or looping is left out: skip says why. An
// error is an I/O failure inside the root.
func (s *stager) resolve(p string) (linkTarget, error) {
	lt := linkTarget{}
	t, err := os.Readlink(p)
	if err != nil {
		return lt, err
	}
	lt.target = t
	rel, err := filepath.Rel(s.root, p)
	if err != nil {
		return lt, err
	}
	real, fi, err := resolveInRoot(s.root, filepath.ToSlash(rel), s.rootAsGiven)
	switch {
	case errors.Is(err, errOutside):
		lt.skip = "it leads outside the source"
	case errors.Is(err, errLinkLoop):
		lt.skip = "it is a loop of symlinks"
	case errors.Is(err, iofs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		lt.skip = "its target does not exist"
	case err != nil:
		return lt, err
	case slices.ContainsFunc(strings.Split(real, "/"), junkName):
		// Another tool's bookkeeping is never stored, however reached:
		// a link to a checkout's .git would bring its config and hooks.
		lt.skip = "it leads into " + firstJunk(real) + ", which is never stored"
	default:
		lt.real, lt.info = filepath.Join(s.root, filepath.FromSlash(real)), fi
	}
	return lt, nil
}

// firstJunk is the first component of a slash path that junkName names.
func firstJunk(p string) string {
	for _, c := range strings.Split(p, "/") {
		if junkName(c) {
			return c
		}
	}
	return ""
}

// contains reports whether the folder at real path dir holds (or is) one of
// the folders being copied: copying it would reach the link again, for ever.
func (s *stager) contains(dir string) bool {
	for _, d := range s.stack {
		if within(dir, d) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or lies below it; both are clean
// absolute paths.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// realPath is p made absolute with every symlink resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// copyFile copies one regular file, counting the bytes actually read: the
// file may have grown since it was stat'ed.
func (s *stager) copyFile(sp, dp, rel string, info iofs.FileInfo) error {
	// O_NOFOLLOW and O_NONBLOCK: if the entry was swapped for a symlink or a
	// fifo after Lstat, fail (or return at once) instead of following it or
	// blocking; the Stat below then rejects it.
	in, err := os.OpenFile(sp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return skills.RelError(rel, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return skills.RelError(rel, err)
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, info) {
		return fmt.Errorf("%q changed while being read: %w", rel, skills.ErrSpecialFile)
	}
	if err := s.confined(in, rel); err != nil {
		return err
	}
	if s.link {
		linked, err := s.linkFile(sp, dp, rel, fi)
		if linked || err != nil {
			return err
		}
	}
	mode := skills.StoredFileMode(fi.Mode())
	out, err := os.OpenFile(dp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return skills.RelError(rel, err)
	}
	_, err = s.b.CopyCounted(out, in, rel)
	var le *skills.LimitError
	if err != nil && !errors.As(err, &le) {
		err = skills.RelError(rel, err)
	}
	if err == nil {
		err = out.Chmod(mode) // the umask may have narrowed it
	}
	if cerr := out.Close(); err == nil && cerr != nil {
		err = skills.RelError(rel, cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Chtimes(dp, fi.ModTime(), fi.ModTime()); err != nil {
		return skills.RelError(rel, err)
	}
	return nil
}

// linkFile stages the source's file sp, open and checked as fi, as a hard
// link at dp, counting its size. linked is false, with nothing staged, when
// the filesystem will not link it (another device, no hard links), for the
// caller to copy it instead.
func (s *stager) linkFile(sp, dp, rel string, fi iofs.FileInfo) (linked bool, err error) {
	if err := s.b.Size(rel, fi.Size()); err != nil {
		return false, err
	}
	if err := os.Link(sp, dp); err != nil {
		if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK) || errors.Is(err, syscall.ENOTSUP) {
			return false, nil
		}
		return false, skills.RelError(rel, err)
	}
	// The name linked must still be the file checked.
	if li, err := os.Lstat(dp); err != nil || !os.SameFile(li, fi) {
		_ = os.Remove(dp)
		return false, fmt.Errorf("%q changed while being read: %w", rel, skills.ErrSpecialFile)
	}
	if err := s.b.Add(rel, fi.Size()); err != nil {
		return false, err
	}
	return true, nil
}

// readDir lists the folder at p (a real path) sorted by name, like
// os.ReadDir, but not through a symlink and only inside the root.
func (s *stager) readDir(p, rel string) ([]os.DirEntry, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, skills.RelError(rel, err)
	}
	defer f.Close()
	if err := s.confined(f, rel); err != nil {
		return nil, err
	}
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, skills.RelError(rel, err)
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// confined checks that the open file f really lies inside the source's
// root, by the path the kernel holds for the descriptor: a folder on the way
// swapped for a symlink after it was checked cannot lead a read outside.
// Where /proc is not mounted the check is skipped; the resolution already
// confined the path.
func (s *stager) confined(f *os.File, rel string) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var p string
	var perr error
	if err := rc.Control(func(fd uintptr) {
		p, perr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil || perr != nil || !filepath.IsAbs(p) {
		return nil
	}
	if !within(s.root, p) {
		return fmt.Errorf("%q: moved outside the source while being read: %w", rel, skills.ErrUnsafePath)
	}
	return nil
}

// prepareDst makes dst an empty directory, refusing one that already holds
// something: it is about to be removed on error and must not take anything
// else with it.
func prepareDst(dst string) error {
	fi, err := os.Lstat(dst)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("create %q: %w", dst, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("check %q: %w", dst, err)
	case !fi.IsDir():
		return fmt.Errorf("destination %q is not a directory: %w", dst, skills.ErrExists)
	}
	f, err := os.Open(dst)
	if err != nil {
		return fmt.Errorf("check %q: %w", dst, err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("destination %q is not empty: %w", dst, skills.ErrExists)
	}
	return nil
}

// specialFilesError is nil for none, the *skills.SpecialFileError for one, and a
// *skills.SpecialFilesError for more.
func specialFilesError(files []*skills.SpecialFileError) error {
	switch len(files) {
	case 0:
		return nil
	case 1:
		return files[0]
	}
	return &skills.SpecialFilesError{Files: files}
}
