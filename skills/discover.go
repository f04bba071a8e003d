package skills

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// DefaultDiscoverDepth is the depth Discover searches when given none: deep
// enough for plugins/<name>/skills/<skill>/ layouts with room to spare.
const DefaultDiscoverDepth = 6

// maxDiscoverDirs bounds the directories one recursive search may visit.
const maxDiscoverDirs = 100000

// Candidate is a skill root found inside a source tree.
type Candidate struct {
	Name string // folder name (for the root itself, the base name of the root)
	Rel  string // slash path from the searched root, "." for the root itself
	Dir  string // absolute path
}

// StandardSkillDirs returns the places, relative to a source root and in
// the order Discover searches them, where skill repositories keep their
// skills, one per subdirectory.
func StandardSkillDirs() []string { return slices.Clone(standardSkillDirs) }

var standardSkillDirs = []string{
	"skills",
	"skills/.curated",
	"skills/.experimental",
	"skills/.system",
	".agents/skills",
	".claude/skills",
}

// hiddenSearchable are hidden directory names the recursive search still
// enters, because the standard places use them.
var hiddenSearchable = map[string]bool{
	".agents": true, ".claude": true, ".curated": true, ".experimental": true, ".system": true,
}

// Discover finds skill roots (directories holding SKILL.md or skill.md) inside
// root. If root is one, it is the only candidate. Otherwise the candidates are
// the subdirectories of StandardSkillDirs(), in that order and by name within
// each; if those hold none, a search up to maxDepth levels below root
// (DefaultDiscoverDepth when maxDepth <= 0), sorted by Rel, that skips .git,
// node_modules, __MACOSX and hidden directories other than those of the
// standard places, and does not descend into a skill root. No candidate is
// ErrNoManifest. Symlinks below root are never followed; root itself may be
// one.
func Discover(root string, maxDepth int) ([]Candidate, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultDiscoverDepth
	}
	abs, err := filepath.Abs(root)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("discover skills: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("discover skills: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("discover skills: not a directory: %w", ErrInvalid)
	}
	if hasManifest(abs) {
		return []Candidate{{Name: filepath.Base(abs), Rel: ".", Dir: abs}}, nil
	}
	var out []Candidate
	for _, place := range standardSkillDirs {
		if !isPlainDir(abs, place) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(abs, filepath.FromSlash(place)))
		if err != nil {
			return nil, fmt.Errorf("discover skills: %w", err)
		}
		for _, e := range ents {
			// ReadDir reports a symlink as a symlink, never as a directory.
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			d := filepath.Join(abs, filepath.FromSlash(place), e.Name())
			if hasManifest(d) {
				out = append(out, Candidate{Name: e.Name(), Rel: place + "/" + e.Name(), Dir: d})
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	visited := 0
	var walk func(dir, rel string, depth int) error
	walk = func(dir, rel string, depth int) error {
		visited++
		if visited > maxDiscoverDirs {
			return &LimitError{Limit: LimitEntries, Value: int64(visited), Max: maxDiscoverDirs, Path: rel}
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil // an unreadable corner of a clone hides nothing we could import
		}
		for _, e := range ents {
			name := e.Name()
			if !e.IsDir() || name == ".git" || name == "node_modules" || name == "__MACOSX" {
				continue
			}
			if strings.HasPrefix(name, ".") && !hiddenSearchable[name] {
				continue
			}
			d := filepath.Join(dir, name)
			crel := path.Join(rel, name)
			if hasManifest(d) {
				out = append(out, Candidate{Name: name, Rel: crel, Dir: d})
				continue
			}
			if depth < maxDepth {
				if err := walk(d, crel, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(abs, "", 1); err != nil {
		return nil, fmt.Errorf("discover skills: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("discover skills: %w", ErrNoManifest)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	return out, nil
}

// hasManifest reports whether dir holds SKILL.md or skill.md. Anything by
// that name counts, even a symlink: staging then rejects it by name, which
// says more than silently finding no skill.
func hasManifest(dir string) bool {
	for _, n := range []string{ManifestName, lowerManifestName} {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// isPlainDir reports whether every component of rel below root is a real
// directory, not a symlink.
func isPlainDir(root, rel string) bool {
	p := root
	for _, c := range strings.Split(rel, "/") {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}
