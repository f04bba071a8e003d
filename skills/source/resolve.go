package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"skillfs/skills"
)

// errOutside marks a path whose symbolic links lead out of the directory it
// was resolved in.
var errOutside = errors.New("a symbolic link leads outside the source")

// errLinkLoop marks a path with too many symbolic links to resolve.
var errLinkLoop = errors.New("too many levels of symbolic links")

// maxLinkHops bounds the symbolic links one resolution follows, as the
// kernel's own limit (40) does.
const maxLinkHops = 40

// resolveInRoot resolves rel, a slash path below root, as the kernel would,
// following symbolic links, but never looks at anything outside root: root
// must be a real absolute path (no symbolic links in it), and a link whose
// target leaves root, by ".." or an absolute target elsewhere, is
// errOutside before anything outside is read. It returns the real path of
// the target as a clean slash path below root ("." for root itself) and the
// target's (Lstat) information, which is never a symbolic link.
//
// filepath.EvalSymlinks would do the resolving, but it reads every link it
// meets wherever it points; a source tree is someone else's, and its links
// may point anywhere.
func resolveInRoot(root, rel string, aliases ...string) (string, os.FileInfo, error) {
	var done []string
	todo := skills.SplitSlash(rel)
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			if len(done) == 0 {
				return "", nil, errOutside
			}
			done = done[:len(done)-1]
			continue
		}
		next := append(done[:len(done):len(done)], c)
		p := filepath.Join(root, filepath.FromSlash(strings.Join(next, "/")))
		fi, err := os.Lstat(p)
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if len(todo) > 0 && !fi.IsDir() {
				return "", nil, fmt.Errorf("%s: not a directory: %w", strings.Join(next, "/"), os.ErrNotExist)
			}
			done = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", nil, errLinkLoop
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", nil, err
		}
		target = filepath.ToSlash(target)
		if strings.HasPrefix(target, "/") {
			// An absolute target counts only when it names root itself
			// component by component: root holds no links, so the kernel
			// would pass through the same directories.
			rest, ok := cutRootPrefix(filepath.ToSlash(root), target)
			for _, a := range aliases {
				if !ok && a != "" {
					rest, ok = cutRootPrefix(filepath.ToSlash(a), target)
				}
			}
			if !ok {
				return "", nil, errOutside
			}
			done = nil
			target = rest
		}
		todo = append(skills.SplitSlash(target), todo...)
	}
	real := "."
	if len(done) > 0 {
		real = strings.Join(done, "/")
	}
	fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(real)))
	if err != nil {
		return "", nil, err
	}
	return real, fi, nil
}

// cutRootPrefix returns the part of the absolute slash path target below
// root, when target's leading components (empty and "." ones skipped, ".."
// refused) are exactly root's.
func cutRootPrefix(root, target string) (string, bool) {
	want := skills.SplitSlash(root)
	got := skills.SplitSlash(target)
	if len(got) < len(want) {
		return "", false
	}
	for i, c := range want {
		if got[i] != c {
			return "", false
		}
	}
	return strings.Join(got[len(want):], "/"), true
}

// realRoot returns the absolute path of dir with every symbolic link in it
// resolved: the root a search is confined to. dir itself may be a link.
func realRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// SubRoot returns the real absolute path of the folder rel (a slash path, as
// in git.Source.Path) inside root, a checkout: the root an import from a
// sub-folder of a repository searches. An empty rel (or ".") is root itself.
// rel must pass CleanRelPath (no "..", not absolute: else ErrUnsafePath); a
// symbolic link on the way may lead elsewhere inside root, but one that
// leads outside is refused (ErrUnsafePath) without anything outside being
// read. A folder that does not exist is ErrNotFound, naming rel as a path in
// the repository; a file is ErrInvalid.
func SubRoot(root, rel string) (string, error) {
	base, err := realRoot(root)
	if err != nil {
		return "", fmt.Errorf("sub-folder %q: %w", rel, err)
	}
	if rel == "" || rel == "." {
		return base, nil
	}
	clean, err := skills.CleanRelPath(rel)
	if err != nil {
		return "", fmt.Errorf("sub-folder: %w", err)
	}
	real, fi, err := resolveInRoot(base, clean)
	switch {
	case errors.Is(err, errOutside):
		return "", fmt.Errorf("sub-folder %q: %w: %w", clean, err, skills.ErrUnsafePath)
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("sub-folder %q: no such folder in the repository: %w", clean, skills.ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("sub-folder %q: %w", clean, err)
	case !fi.IsDir():
		return "", fmt.Errorf("sub-folder %q: not a folder: %w", clean, skills.ErrInvalid)
	}
	return filepath.Join(base, filepath.FromSlash(real)), nil
}

// ReadSkillManifest reads the SKILL.md (or, failing that, the skill.md) of
// the skill folder dir, which lies inside root ("" means dir itself): a
// manifest that is a symbolic link is followed only while it stays inside
// root, and read as ReadManifest reads (regular files only, at most max
// bytes). A SKILL.md that is a link leading outside root, or a loop, counts
// as absent, as staging leaves it out: the skill.md beside it is read then.
// A folder without either is an error wrapping ErrNoManifest.
func ReadSkillManifest(root, dir string, max int64) ([]byte, error) {
	if root == "" {
		root = dir
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	var skipped []string // manifests that are links left out, and why
	for _, name := range manifestNames {
		rel, err := filepath.Rel(realRoot, filepath.Join(realDir, name))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("%s: the skill folder is outside the source: %w", name, skills.ErrUnsafePath)
		}
		real, _, err := resolveInRoot(realRoot, filepath.ToSlash(rel))
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case errors.Is(err, errOutside), errors.Is(err, errLinkLoop):
			// Staging leaves such a link out and takes the skill.md
			// beside it: so does this.
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return skills.ReadManifest(filepath.Join(realRoot, filepath.FromSlash(real)), name, max, false)
	}
	if len(skipped) > 0 {
		return nil, fmt.Errorf("%s: %w", strings.Join(skipped, "; "), skills.ErrNoManifest)
	}
	return nil, fmt.Errorf("no %s: %w", skills.ManifestName, skills.ErrNoManifest)
}
