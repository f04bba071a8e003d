package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"skillfs/skills"
)

// HiddenPrefix starts the names of skillfs's own bookkeeping files inside a
// version directory. Entries whose name starts with it are never served.
const HiddenPrefix = ".skillfs"

// entry is one file or directory of a version tree.
type entry struct {
	name     string
	rel      string // slash-separated path below the version directory; "" for its root
	dir      bool
	exec     bool
	manifest bool  // the top-level SKILL.md: opening it activates the skill
	parent   int32 // index of the directory holding it; 0 for the root (and the root itself)
	size     int64
	mtime    time.Time
	children []int32 // directories: indices of the children, sorted by name
}

// tree is the immutable listing of one version directory, walked once.
type tree struct {
	dir     string // absolute, symlink-free path of the version directory
	name    string // the version directory as the views name it (Skill.Dir)
	content Content
	entries []entry
}

// buildTree walks a version directory. Hidden bookkeeping entries are left
// out; anything that is not a regular file or directory (the store never
// holds one) is skipped and reported, so it can never be served.
func buildTree(dir string) (*tree, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve version directory %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve version directory %q: %w", dir, err)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return nil, nil, fmt.Errorf("stat version directory %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("version directory %q is not a directory: %w", dir, skills.ErrInvalid)
	}
	t := &tree{dir: real}
	t.entries = append(t.entries, entry{dir: true, mtime: fi.ModTime()})
	var skipped []string
	// Breadth-first, so a directory's entries are appended before its
	// children's entries and every index is stable once assigned.
	for i := 0; i < len(t.entries); i++ {
		if !t.entries[i].dir {
			continue
		}
		rel := t.entries[i].rel
		des, err := os.ReadDir(filepath.Join(real, filepath.FromSlash(rel)))
		if err != nil {
			return nil, nil, fmt.Errorf("read version directory %q: %w", dir, err)
		}
		var kids []int32
		for _, de := range des {
			name := de.Name()
			if strings.HasPrefix(name, HiddenPrefix) {
				continue
			}
			crel := name
			if rel != "" {
				crel = rel + "/" + name
			}
			info, err := de.Info()
			if err != nil {
				return nil, nil, fmt.Errorf("stat %q in version directory %q: %w", crel, dir, err)
			}
			e := entry{name: name, rel: crel, parent: int32(i), mtime: info.ModTime()}
			switch {
			case info.Mode().IsDir():
				e.dir = true
			case info.Mode().IsRegular():
				e.exec = info.Mode().Perm()&0o111 != 0
				e.size = info.Size()
				e.manifest = rel == "" && name == skills.ManifestName
			default:
				skipped = append(skipped, crel)
				continue
			}
			if len(t.entries) >= maxTreeEntries {
				return nil, nil, fmt.Errorf("walk version directory %q: more than %d entries: %w", dir, maxTreeEntries, skills.ErrLimit)
			}
			kids = append(kids, int32(len(t.entries)))
			t.entries = append(t.entries, e)
		}
		// os.ReadDir sorts by name already; children stay in that order.
		t.entries[i].children = kids
	}
	return t, skipped, nil
}

// child finds the entry called name in directory parent.
func (t *tree) child(parent int32, name string) (int32, bool) {
	kids := t.entries[parent].children
	i := sort.Search(len(kids), func(i int) bool { return t.entries[kids[i]].name >= name })
	if i < len(kids) && t.entries[kids[i]].name == name {
		return kids[i], true
	}
	return 0, false
}

// walk resolves a slash-separated relative path ("" or "." is the root).
func (t *tree) walk(rel string) (int32, bool) {
	idx := int32(0)
	if rel == "" || rel == "." {
		return idx, true
	}
	for name := range strings.SplitSeq(rel, "/") {
		if !t.entries[idx].dir {
			return 0, false
		}
		c, ok := t.child(idx, name)
		if !ok {
			return 0, false
		}
		idx = c
	}
	return idx, true
}

// treeRef is a lazily built tree shared by every grant of one version
// directory.
type treeRef struct {
	dir     string
	content Content // checks the tree's backing files (nil: none)
	refs    int     // guarded by treeCache.mu
	mu      sync.Mutex
	t       atomic.Pointer[tree]
	// bad, if set, is what every get answers: a directory that is no
	// version directory (a resumed grant's, restore.go).
	bad error
}

// get returns the tree, walking the directory at first use. A failed walk
// is not remembered, so a transient error heals on the next lookup.
func (r *treeRef) get() (*tree, []string, error) {
	if r.bad != nil {
		return nil, nil, r.bad
	}
	if t := r.t.Load(); t != nil {
		return t, nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.t.Load(); t != nil {
		return t, nil, nil
	}
	t, skipped, err := buildTree(r.dir)
	if err != nil {
		return nil, nil, err
	}
	t.name, t.content = r.dir, r.content
	r.t.Store(t)
	return t, skipped, nil
}

// treeCache shares trees by version directory among sessions and drops a
// tree when no view references it any more.
type treeCache struct {
	content Content // given to every tree (Options.Content)

	mu sync.Mutex
	m  map[string]*treeRef
}

func (c *treeCache) acquire(dir string) *treeRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*treeRef)
	}
	r := c.m[dir]
	if r == nil {
		r = &treeRef{dir: dir, content: c.content}
		c.m[dir] = r
	}
	r.refs++
	return r
}

func (c *treeCache) release(r *treeRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.refs--
	if r.refs <= 0 && c.m[r.dir] == r {
		delete(c.m, r.dir)
	}
}

func (c *treeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
