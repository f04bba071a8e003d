package diff

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"skillfs/skills"
)

// Bounds of a tree diff: a text diff is shown for files up to
// MaxFileBytes a side, up to MaxEdits lines changed and up to
// MaxFileOutput bytes of diff; past those the change is named, its
// diff left out. DefaultOutput bounds the text of all diffs together.
//
// The line diff is Myers' algorithm in linear space (the "middle snake",
// divide and conquer): besides the two files it holds 4 bytes per line of
// each twice (where it ends, its number), a table of 8 to 16 bytes per line
// of the part that differs to number them (no copy of a line), and
// two vectors of O(MaxEdits) words for the search, shared by every
// level of it, never a trace of the search. A diffstat alone does not
// build the edit script at all: one search from both ends gives the number
// of lines changed. Files are compared one pair at a time, in memory reused
// from one pair to the next (see diffScratch), and each change is handed
// on as it is made (TreeDiff.Each), so a comparison holds its largest pair
// of files and one file's diff at most: TreeDiff.Memory says how much,
// from the files' sizes, before anything is read.
const (
	MaxFileBytes  = 1 << 20
	MaxEdits      = 4000
	MaxFileOutput = 1 << 20
	DefaultOutput = 4 << 20
	diffContext   = 3
)

// The comparison budget of one request (see Budget): bytes of files
// read to compare them, and steps of the line diff (a line compared with
// another, a line numbered, or a diagonal of the edit graph visited or
// made ready for the search). A pair of wholly
// different 3,000-line files takes about 4 million steps (some 50 ms) and
// under 1 MiB; a request stops after about eight of them.
const (
	DefaultBudgetBytes = 64 << 20
	DefaultBudgetSteps = 32 << 20
)

// Budget is what one request may spend comparing trees, shared by
// every comparison (TreeDiff.Each) it makes. A file whose bytes do not fit what is
// left is reported not compared (FileChange.NotCompared) and the files
// after it are still compared; once the steps run out, or no byte is
// left, every file after is not compared. So the work and memory of a
// request stay bounded whatever the trees hold.
type Budget struct {
	Bytes, Steps int64 // what is left
}

// NewBudget is a budget of bytes and steps (0: the defaults).
func NewBudget(bytes, steps int64) *Budget {
	if bytes <= 0 {
		bytes = DefaultBudgetBytes
	}
	if steps <= 0 {
		steps = DefaultBudgetSteps
	}
	return &Budget{Bytes: bytes, Steps: steps}
}

// Spent reports whether the budget is used up.
func (b *Budget) Spent() bool { return b.Bytes <= 0 || b.Steps <= 0 }

// take spends n bytes if that many are left; otherwise it spends nothing
// (a smaller file may still fit).
func (b *Budget) take(n int64) bool {
	if b.Spent() || n > b.Bytes {
		return false
	}
	b.Bytes -= n
	return true
}

// Statuses of a FileChange.
const (
	FileAdded   = "added"
	FileRemoved = "removed"
	FileChanged = "changed"
	// FileNotCompared is a file in both trees, of the same size and
	// mode, the budget left out: it may or may not differ.
	FileNotCompared = "not_compared"
)

// FileChange is one file that differs between two trees.
type FileChange struct {
	Path    string `json:"path"`
	Status  string `json:"status"` // FileAdded, FileRemoved, FileChanged or FileNotCompared
	Binary  bool   `json:"binary,omitempty"`
	Added   int    `json:"added"`   // lines added (0 when LinesUnknown)
	Removed int    `json:"removed"` // lines removed
	// LinesUnknown: the lines were not counted (a binary file, one over
	// MaxFileBytes, or one not compared).
	LinesUnknown bool `json:"lines_unknown,omitempty"`
	// NotCompared: the request's budget was spent before this file, or
	// what was left of it was too little for it.
	NotCompared bool `json:"not_compared,omitempty"`
	// Diff is the unified diff of a text file; Note says why there is
	// none, or what else changed (the mode).
	Diff string `json:"diff,omitempty"`
	Note string `json:"note,omitempty"`
}

// Stat sums up a tree diff. Insertions and deletions leave out the
// files counted in LinesUnknown; NotCompared counts the files the budget
// left (those in both trees with the same size and mode may not differ at
// all, and are in no other count).
type Stat struct {
	FilesAdded   int `json:"files_added"`
	FilesRemoved int `json:"files_removed"`
	FilesChanged int `json:"files_changed"`
	Insertions   int `json:"insertions"`
	Deletions    int `json:"deletions"`
	LinesUnknown int `json:"lines_unknown"`
	NotCompared  int `json:"not_compared"`
}

// String is the stat as one line: "+2 -1 files, +10 -3 lines".
func (s Stat) String() string {
	return fmt.Sprintf("%d added, %d removed, %d changed files; +%d -%d lines",
		s.FilesAdded, s.FilesRemoved, s.FilesChanged, s.Insertions, s.Deletions)
}

// Stat sums up changes.
func StatOf(changes []FileChange) Stat {
	var s Stat
	for i := range changes {
		s.Add(&changes[i])
	}
	return s
}

// Add counts one change into s.
func (s *Stat) Add(c *FileChange) {
	switch c.Status {
	case FileAdded:
		s.FilesAdded++
	case FileRemoved:
		s.FilesRemoved++
	case FileChanged:
		s.FilesChanged++
	}
	if c.LinesUnknown {
		s.LinesUnknown++
	}
	if c.NotCompared {
		s.NotCompared++
	}
	s.Insertions += c.Added
	s.Deletions += c.Removed
}

// treeFile is a regular file of a tree.
type treeFile struct {
	abs  string
	exec bool
	size int64
}

// listTree lists the regular files of a published tree by slash path,
// without the store's metadata file; "" is the empty tree.
func listTree(root string) (map[string]treeFile, error) {
	out := map[string]treeFile{}
	if root == "" {
		return out, nil
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil // directories; a published tree holds nothing else
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == skills.MetaFileName {
			return nil // the store's own record, not part of the tree (see TreeHash)
		}
		out[filepath.ToSlash(rel)] = treeFile{abs: p, exec: fi.Mode()&0o100 != 0, size: fi.Size()}
		return nil
	})
	return out, err
}

// TreeDiff is a comparison of two published trees, listed and not yet
// read: what it will hold is known (Memory) before it runs (Each).
type TreeDiff struct {
	fa, fb map[string]treeFile
	paths  []string // in both or either, sorted
	listed int64    // bytes the listing holds
}

// Open lists the trees a (old) and b (new), either "" for an empty
// tree, for comparing them.
func Open(a, b string) (*TreeDiff, error) {
	fa, err := listTree(a)
	if err != nil {
		return nil, err
	}
	fb, err := listTree(b)
	if err != nil {
		return nil, err
	}
	td := &TreeDiff{fa: fa, fb: fb, paths: make([]string, 0, len(fa)+len(fb))}
	for p, f := range fa {
		td.paths = append(td.paths, p)
		td.listed += listedBytes(p, f)
	}
	for p, f := range fb {
		if _, ok := fa[p]; !ok {
			td.paths = append(td.paths, p)
		}
		td.listed += listedBytes(p, f)
	}
	slices.Sort(td.paths)
	return td, nil
}

// listedBytes bounds what listing one file holds: its two names, its entry
// in a map (with the map's spare room) and in the list of paths.
func listedBytes(p string, f treeFile) int64 { return int64(len(p)+len(f.abs)) + 160 }

// Files is how many paths the comparison goes through.
func (td *TreeDiff) Files() int { return len(td.paths) }

// diffBase is what a comparison holds besides its listing and its files:
// the change being made and its notes.
const diffBase = 16 << 10

// Memory bounds the bytes Each holds at any one time, from the sizes the
// listing gave: the listing, and the scratch its largest files need (see
// pairMemory; a file past MaxFileBytes is compared in blocks, never
// read whole), with text one file's diff (MaxFileOutput at most, and
// the copy handed on). It counts every byte as live; the garbage of a
// scratch that grew from one pair to a larger one is the collector's.
func (td *TreeDiff) Memory(text bool) int64 {
	var sa, sb int64 // the largest file of each side that is read whole
	longest, large := 0, false
	for _, p := range td.paths {
		longest = max(longest, len(p))
		if f, ok := td.fa[p]; ok {
			large = large || f.size > MaxFileBytes
			if f.size <= MaxFileBytes {
				sa = max(sa, f.size)
			}
		}
		if f, ok := td.fb[p]; ok {
			large = large || f.size > MaxFileBytes
			if f.size <= MaxFileBytes {
				sb = max(sb, f.size)
			}
		}
	}
	n := diffBase + td.listed + pairMemory(sa, sb, text, longest)
	if large {
		n += 2 * compareBlock
	}
	return n
}

// compareBlock is what two files too large to read whole are compared by.
const compareBlock = 64 << 10

// pairMemory bounds the scratch comparing a file of sa bytes with one of sb
// bytes takes (see diffScratch), whatever they hold (a file of n bytes has
// at most n lines), with text the diff text of a path of at most longest
// bytes and its copy.
func pairMemory(sa, sb int64, text bool, longest int) int64 {
	la, lb := sa+1, sb+1 // lines, and where each ends
	m := sa + sb         // lines of the middle, numbered
	n := sa + sb         // the files
	n += 4 * (la + lb)   // where their lines end
	n += 4 * m           // their numbers
	n += 4*int64(slotsFor(int(m))) + 4*m
	n += 2 * 8 * (min(la+lb, MaxEdits+2) + 3) // the search's vectors
	if text {
		n += 32 * min(la+lb, MaxEdits+1) // the edit script
		n += 2 * min(MaxFileOutput, textBound(sa, sb, longest))
	}
	return n
}

// Each compares the trees file by file in path order
// and hands fn each file that changed, as it is made; an error of fn stops
// it. The change is fn's to keep; none is kept here.
func (td *TreeDiff) Each(text bool, maxOutput int, budget *Budget, fn func(*FileChange) error) error {
	if maxOutput <= 0 {
		maxOutput = DefaultOutput
	}
	if budget == nil {
		budget = NewBudget(0, 0)
	}
	sc := &diffScratch{}
	left := maxOutput
	for _, p := range td.paths {
		x, inA := td.fa[p]
		y, inB := td.fb[p]
		c, err := sc.diffFile(p, x, inA, y, inB, text, &left, budget)
		if err != nil {
			return err
		}
		if c != nil {
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// notCompared is what is known of a file the budget left out: a side
// missing or a size or mode that differs says it changed, nothing says it
// did not.
func notCompared(c *FileChange, x treeFile, inA bool, y treeFile, inB bool, budget *Budget) *FileChange {
	c.NotCompared, c.LinesUnknown = true, true
	c.Note = "not compared: the comparison budget of this request is spent"
	if !budget.Spent() {
		c.Note = "not compared: larger than what is left of the comparison budget of this request"
	}
	if inA && inB && x.size == y.size && x.exec == y.exec {
		c.Status = FileNotCompared
	}
	return c
}

// diffFile compares one path of two trees in sc; nil when it did not change.
func (sc *diffScratch) diffFile(p string, x treeFile, inA bool, y treeFile, inB bool, text bool, left *int, budget *Budget) (*FileChange, error) {
	c := &FileChange{Path: p, Status: FileChanged}
	switch {
	case !inA:
		c.Status = FileAdded
	case !inB:
		c.Status = FileRemoved
	}
	tooBig := inA && x.size > MaxFileBytes || inB && y.size > MaxFileBytes
	if tooBig {
		if inA && inB && x.size == y.size && x.exec == y.exec {
			if !budget.take(x.size + y.size) {
				return notCompared(c, x, inA, y, inB, budget), nil
			}
			if sc.sameFile(x.abs, y.abs) {
				return nil, nil
			}
		}
		c.LinesUnknown = true
		c.Note = fmt.Sprintf("files differ (over %d bytes: not compared line by line)", MaxFileBytes)
		return c, nil
	}
	var need int64
	if inA {
		need += x.size
	}
	if inB {
		need += y.size
	}
	if !budget.take(need) {
		return notCompared(c, x, inA, y, inB, budget), nil
	}
	var old, cur []byte
	var err error
	if inA {
		if sc.a, err = readInto(sc.a, x.abs, x.size); err != nil {
			return nil, err
		}
		old = sc.a
	}
	if inB {
		if sc.b, err = readInto(sc.b, y.abs, y.size); err != nil {
			return nil, err
		}
		cur = sc.b
	}
	if inA && inB && bytes.Equal(old, cur) {
		if x.exec == y.exec {
			return nil, nil
		}
		c.Note = fmt.Sprintf("mode %s → %s", modeName(x.exec), modeName(y.exec))
		return c, nil
	}
	if !isText(old) || !isText(cur) {
		c.Binary, c.LinesUnknown, c.Note = true, true, "binary files differ"
		return c, nil
	}
	d := sc.lineDiff(old, cur, &budget.Steps)
	var ok bool
	if text {
		ok = d.script()
	} else {
		ok = d.count()
	}
	c.Added, c.Removed = d.added, d.removed
	switch {
	case d.stepsOut:
		budget.Steps = 0
		c.Added, c.Removed = 0, 0
		return notCompared(c, x, inA, y, inB, budget), nil
	case !ok:
		c.Note = fmt.Sprintf("more than %d lines changed: diff not shown", MaxEdits)
		return c, nil
	}
	if inA && inB && x.exec != y.exec {
		c.Note = fmt.Sprintf("mode %s → %s", modeName(x.exec), modeName(y.exec))
	}
	if !text {
		return c, nil
	}
	switch u, fits := unified(p, inA, inB, d, min(*left, MaxFileOutput)); {
	case fits:
		*left -= len(u)
		c.Diff = string(u)
	case *left <= MaxFileOutput:
		c.Note = strings.TrimPrefix(c.Note+"; diff not shown: the output limit is reached", "; ")
		*left = 0
	default:
		c.Note = strings.TrimPrefix(c.Note+fmt.Sprintf("; diff not shown: over %d bytes", MaxFileOutput), "; ")
	}
	return c, nil
}

// readInto reads the size bytes of the file at path into buf's memory.
// A file that is not that size any more is an error: published content
// never changes.
func readInto(buf []byte, path string, size int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	buf = grow(buf, int(size))
	if _, err := io.ReadFull(f, buf); err != nil {
		return buf, fmt.Errorf("read %s: %w", path, err)
	}
	var one [1]byte
	if n, _ := f.Read(one[:]); n > 0 {
		return buf, fmt.Errorf("read %s: larger than the %d bytes listed", path, size)
	}
	return buf, nil
}

// sameFile compares two large files without holding them, in sc's blocks.
func (sc *diffScratch) sameFile(a, b string) bool {
	fa, err := os.Open(a)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false
	}
	defer fb.Close()
	sc.cmpA, sc.cmpB = grow(sc.cmpA, compareBlock), grow(sc.cmpB, compareBlock)
	ba, bb := sc.cmpA, sc.cmpB
	for {
		na, ea := fa.Read(ba)
		nb, eb := readFull(fb, bb[:na])
		if nb != na || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil {
			var one [1]byte
			n, _ := fb.Read(one[:])
			return n == 0 && eb == nil
		}
	}
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func modeName(exec bool) string {
	if exec {
		return "0755"
	}
	return "0644"
}

// isText reports whether b is UTF-8 text without NUL bytes.
func isText(b []byte) bool {
	return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}
