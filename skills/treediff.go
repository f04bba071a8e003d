package skills

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of a tree diff: a text diff is shown for files up to
// MaxDiffFileBytes a side and up to MaxDiffEdits lines changed; past those
// the change is named, its diff left out. DefaultDiffOutput bounds the
// text of all diffs together.
//
// The line diff is Myers' algorithm in linear space (the "middle snake",
// divide and conquer): besides the two files it holds 4 bytes per line of
// each twice (where it ends, its number), a table of 8 to 16 bytes per line
// of the part that differs to number them (no copy of a line), and
// two vectors of O(MaxDiffEdits) words for the search, allocated once per
// file and shared by every level of it, never a trace of the search. A
// diffstat alone does not build the edit script at all: one search from
// both ends gives the number of lines changed.
const (
	MaxDiffFileBytes  = 1 << 20
	MaxDiffEdits      = 4000
	DefaultDiffOutput = 4 << 20
	diffContext       = 3
)

// The comparison budget of one request (see DiffBudget): bytes of files
// read to compare them, and steps of the line diff (a line compared with
// another, a line numbered, or a diagonal of the edit graph visited or
// made ready for the search). A pair of wholly
// different 3,000-line files takes about 4 million steps (some 50 ms) and
// under 1 MiB; a request stops after about eight of them.
const (
	DefaultDiffBudgetBytes = 64 << 20
	DefaultDiffBudgetSteps = 32 << 20
)

// DiffBudget is what one request may spend comparing trees, shared by
// every DiffTrees call it makes. A file whose bytes do not fit what is
// left is reported not compared (FileChange.NotCompared) and the files
// after it are still compared; once the steps run out, or no byte is
// left, every file after is not compared. So the work and memory of a
// request stay bounded whatever the trees hold.
type DiffBudget struct {
	Bytes, Steps int64 // what is left
}

// NewDiffBudget is a budget of bytes and steps (0: the defaults).
func NewDiffBudget(bytes, steps int64) *DiffBudget {
	if bytes <= 0 {
		bytes = DefaultDiffBudgetBytes
	}
	if steps <= 0 {
		steps = DefaultDiffBudgetSteps
	}
	return &DiffBudget{Bytes: bytes, Steps: steps}
}

// Spent reports whether the budget is used up.
func (b *DiffBudget) Spent() bool { return b.Bytes <= 0 || b.Steps <= 0 }

// take spends n bytes if that many are left; otherwise it spends nothing
// (a smaller file may still fit).
func (b *DiffBudget) take(n int64) bool {
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
	// MaxDiffFileBytes, or one not compared).
	LinesUnknown bool `json:"lines_unknown,omitempty"`
	// NotCompared: the request's budget was spent before this file, or
	// what was left of it was too little for it.
	NotCompared bool `json:"not_compared,omitempty"`
	// Diff is the unified diff of a text file; Note says why there is
	// none, or what else changed (the mode).
	Diff string `json:"diff,omitempty"`
	Note string `json:"note,omitempty"`
}

// DiffStat sums up a tree diff. Insertions and deletions leave out the
// files counted in LinesUnknown; NotCompared counts the files the budget
// left (those in both trees with the same size and mode may not differ at
// all, and are in no other count).
type DiffStat struct {
	FilesAdded   int `json:"files_added"`
	FilesRemoved int `json:"files_removed"`
	FilesChanged int `json:"files_changed"`
	Insertions   int `json:"insertions"`
	Deletions    int `json:"deletions"`
	LinesUnknown int `json:"lines_unknown"`
	NotCompared  int `json:"not_compared"`
}

// String is the stat as one line: "+2 -1 files, +10 -3 lines".
func (s DiffStat) String() string {
	return fmt.Sprintf("%d added, %d removed, %d changed files; +%d -%d lines",
		s.FilesAdded, s.FilesRemoved, s.FilesChanged, s.Insertions, s.Deletions)
}

// Stat sums up changes.
func Stat(changes []FileChange) DiffStat {
	var s DiffStat
	for _, c := range changes {
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
	return s
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
		if rel == MetaFileName {
			return nil // the store's own record, not part of the tree (see TreeHash)
		}
		out[filepath.ToSlash(rel)] = treeFile{abs: p, exec: fi.Mode()&0o100 != 0, size: fi.Size()}
		return nil
	})
	return out, err
}

// DiffTrees compares the published trees a (old) and b (new), either ""
// for an empty tree, file by file in path order. With text set, changed
// text files get a unified diff, all of them together cut at maxOutput
// bytes (0: DefaultDiffOutput); without, only the line counts, and no
// edit script is built. The work is taken from budget (nil: a budget of
// its own, NewDiffBudget(0, 0)).
func DiffTrees(a, b string, text bool, maxOutput int, budget *DiffBudget) ([]FileChange, error) {
	if maxOutput <= 0 {
		maxOutput = DefaultDiffOutput
	}
	if budget == nil {
		budget = NewDiffBudget(0, 0)
	}
	fa, err := listTree(a)
	if err != nil {
		return nil, err
	}
	fb, err := listTree(b)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(fa)+len(fb))
	for p := range fa {
		paths = append(paths, p)
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	out := []FileChange{}
	left := maxOutput
	for _, p := range paths {
		x, inA := fa[p]
		y, inB := fb[p]
		c, err := diffFile(p, x, inA, y, inB, text, &left, budget)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	return out, nil
}

// notCompared is what is known of a file the budget left out: a side
// missing or a size or mode that differs says it changed, nothing says it
// did not.
func notCompared(c *FileChange, x treeFile, inA bool, y treeFile, inB bool, budget *DiffBudget) *FileChange {
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

// diffFile compares one path of two trees; nil when it did not change.
func diffFile(p string, x treeFile, inA bool, y treeFile, inB bool, text bool, left *int, budget *DiffBudget) (*FileChange, error) {
	c := &FileChange{Path: p, Status: FileChanged}
	switch {
	case !inA:
		c.Status = FileAdded
	case !inB:
		c.Status = FileRemoved
	}
	tooBig := inA && x.size > MaxDiffFileBytes || inB && y.size > MaxDiffFileBytes
	if tooBig {
		if inA && inB && x.size == y.size && x.exec == y.exec {
			if !budget.take(x.size + y.size) {
				return notCompared(c, x, inA, y, inB, budget), nil
			}
			if sameFile(x.abs, y.abs) {
				return nil, nil
			}
		}
		c.LinesUnknown = true
		c.Note = fmt.Sprintf("files differ (over %d bytes: not compared line by line)", MaxDiffFileBytes)
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
		if old, err = os.ReadFile(x.abs); err != nil {
			return nil, err
		}
	}
	if inB {
		if cur, err = os.ReadFile(y.abs); err != nil {
			return nil, err
		}
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
	d := newLineDiff(old, cur, &budget.Steps)
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
		c.Note = fmt.Sprintf("more than %d lines changed: diff not shown", MaxDiffEdits)
		return c, nil
	}
	if inA && inB && x.exec != y.exec {
		c.Note = fmt.Sprintf("mode %s → %s", modeName(x.exec), modeName(y.exec))
	}
	if !text {
		return c, nil
	}
	u := unified(p, inA, inB, d)
	if len(u) > *left {
		c.Note = strings.TrimPrefix(c.Note+"; diff not shown: the output limit is reached", "; ")
		*left = 0
		return c, nil
	}
	*left -= len(u)
	c.Diff = u
	return c, nil
}

// sameFile compares two large files without holding them.
func sameFile(a, b string) bool {
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
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
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

// lines is a text cut into lines, each with its newline (the last may
// lack one): line i is buf[end[i-1]:end[i]].
type lines struct {
	buf []byte
	end []int32 // MaxDiffFileBytes fits
}

func splitLines(b []byte) lines {
	l := lines{buf: b, end: make([]int32, 0, bytes.Count(b, []byte{'\n'})+1)}
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			i = len(b)
		} else {
			i += j + 1
		}
		l.end = append(l.end, int32(i))
	}
	return l
}

func (l lines) n() int { return len(l.end) }

func (l lines) at(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = l.end[i-1]
	}
	return l.buf[start:l.end[i]]
}

// hunk is one run of changes: lines a0..a1 of a replaced by b0..b1 of b
// (either run may be empty). The lines between two hunks are kept.
type hunk struct{ a0, a1, b0, b1 int }

// lineDiff compares two texts line by line. The lines of the part that
// differs (after the common head and tail) are numbered so that equal
// lines get equal numbers, and the search compares those numbers.
type lineDiff struct {
	a, b           lines
	head           int     // lines the texts share at the start
	ida, idb       []int32 // the middle's lines, numbered
	steps          *int64  // left of the budget
	stepsOut       bool    // the budget ran out
	hunks          []hunk  // the edit script (script only), in whole-text line numbers
	added, removed int
	vf, vb         []int // the search's vectors (see middleSnake), made once
}

func newLineDiff(old, cur []byte, steps *int64) *lineDiff {
	d := &lineDiff{a: splitLines(old), b: splitLines(cur), steps: steps}
	na, nb := d.a.n(), d.b.n()
	for d.head < na && d.head < nb && d.spend(1) && bytes.Equal(d.a.at(d.head), d.b.at(d.head)) {
		d.head++
	}
	tail := 0
	for tail < na-d.head && tail < nb-d.head && d.spend(1) && bytes.Equal(d.a.at(na-1-tail), d.b.at(nb-1-tail)) {
		tail++
	}
	// A step for each line numbered (a hash and a look-up).
	if d.stepsOut || !d.spend(int64(na-d.head-tail)+int64(nb-d.head-tail)) {
		return d
	}
	d.ida, d.idb = numberLines(d.a, d.head, na-tail, d.b, d.head, nb-tail)
	return d
}

// numberLines numbers the lines a[a0:a1] and b[b0:b1] so that equal lines
// get equal numbers: an open-addressing table of the lines seen, hashed by
// content, at most half full. It holds 4 bytes per slot (2 to 4 per line)
// and 4 per distinct line, no copy of a line.
func numberLines(a lines, a0, a1 int, b lines, b0, b1 int) (ida, idb []int32) {
	size := 1
	for size < 2*((a1-a0)+(b1-b0)) {
		size <<= 1
	}
	slots := make([]int32, size) // 0: empty; else 1 + the number of the lines there
	var first []int32            // per number: where a line with it is (a's lines, then b's after a.n())
	at := func(pos int32) []byte {
		if int(pos) < a.n() {
			return a.at(int(pos))
		}
		return b.at(int(pos) - a.n())
	}
	seed := maphash.MakeSeed()
	number := func(l lines, from, to, base int) []int32 {
		out := make([]int32, to-from)
		for i := range out {
			line := l.at(from + i)
			k := maphash.Bytes(seed, line) & uint64(size-1)
			for {
				id := slots[k]
				if id == 0 {
					first = append(first, int32(base+from+i))
					slots[k] = int32(len(first))
					out[i] = int32(len(first) - 1)
					break
				}
				if bytes.Equal(at(first[id-1]), line) {
					out[i] = id - 1
					break
				}
				k = (k + 1) & uint64(size-1)
			}
		}
		return out
	}
	ida = number(a, a0, a1, 0)
	idb = number(b, b0, b1, a.n())
	return ida, idb
}

// spend takes n steps of the budget; false once it has run out.
func (d *lineDiff) spend(n int64) bool {
	if *d.steps < n {
		*d.steps, d.stepsOut = 0, true
		return false
	}
	*d.steps -= n
	return true
}

// count counts the lines added and removed without an edit script: one
// search gives the length of the shortest one. ok is false when it is
// longer than MaxDiffEdits; then the counts are those of the whole middle.
func (d *lineDiff) count() bool {
	n, m := len(d.ida), len(d.idb)
	if n == 0 || m == 0 {
		d.added, d.removed = m, n
		return true
	}
	_, _, e, ok := d.middleSnake(0, n, 0, m, MaxDiffEdits)
	if !ok {
		d.added, d.removed = m, n
		return false
	}
	// e = added + removed, and added - removed = m - n.
	d.added, d.removed = (e+m-n)/2, (e-m+n)/2
	return true
}

// script builds the shortest edit script as hunks (see count for ok).
func (d *lineDiff) script() bool {
	n, m := len(d.ida), len(d.idb)
	e := 0
	if n > 0 && m > 0 { // a first search holds it to the bound; split searches again
		var ok bool
		if _, _, e, ok = d.middleSnake(0, n, 0, m, MaxDiffEdits); !ok {
			d.added, d.removed = m, n
			return false
		}
	}
	if !d.split(0, n, 0, m, e) {
		return false
	}
	for _, h := range d.hunks {
		d.added += h.b1 - h.b0
		d.removed += h.a1 - h.a0
	}
	return true
}

// add appends a hunk of middle lines, joined to the one before it when
// they touch.
func (d *lineDiff) add(a0, a1, b0, b1 int) {
	a0, a1, b0, b1 = a0+d.head, a1+d.head, b0+d.head, b1+d.head
	if k := len(d.hunks) - 1; k >= 0 && d.hunks[k].a1 == a0 && d.hunks[k].b1 == b0 {
		d.hunks[k].a1, d.hunks[k].b1 = a1, b1
		return
	}
	d.hunks = append(d.hunks, hunk{a0, a1, b0, b1})
}

// split finds the edit script of ida[a0:a1] → idb[b0:b1], at most maxE
// edits long, by halves: the middle snake of the shortest one cuts it in
// two smaller problems, neither longer than it.
func (d *lineDiff) split(a0, a1, b0, b1, maxE int) bool {
	for a0 < a1 && b0 < b1 && d.ida[a0] == d.idb[b0] {
		a0, b0 = a0+1, b0+1
	}
	for a0 < a1 && b0 < b1 && d.ida[a1-1] == d.idb[b1-1] {
		a1, b1 = a1-1, b1-1
	}
	if a0 == a1 || b0 == b1 {
		if a0 < a1 || b0 < b1 {
			d.add(a0, a1, b0, b1)
		}
		return true
	}
	x, y, e, ok := d.middleSnake(a0, a1, b0, b1, maxE)
	if !ok {
		return false
	}
	if (x == a0 && y == b0) || (x == a1 && y == b1) { // cannot happen once head and tail are off; never loop
		d.add(a0, a1, b0, b1)
		return true
	}
	return d.split(a0, x, b0, y, e) && d.split(x, a1, y, b1, e)
}

// middleSnake searches from both ends of ida[a0:a1] → idb[b0:b1] (both
// not empty, first and last lines different) at once until the paths
// meet, as Myers' linear-space algorithm does, in at most maxE edits. It
// returns where the forward path ends on the meeting snake, which splits
// the problem in two, and the length e of the shortest edit script; ok is
// false when that is over maxE or the budget ran out. Memory: two vectors
// of O(min(maxE, n+m)) entries, made on the first search of d and reused
// by the later ones, whose maxE is never larger; making them ready costs
// a step per entry.
func (d *lineDiff) middleSnake(a0, a1, b0, b1, maxE int) (x, y, e int, ok bool) {
	n, m := a1-a0, b1-b0
	delta := n - m
	odd := delta%2 != 0
	dmax := min((n+m+1)/2, (maxE+2)/2)
	off := dmax + 1
	if !d.spend(int64(2*off + 1)) {
		return 0, 0, 0, false
	}
	if len(d.vf) < 2*off+1 {
		d.vf, d.vb = make([]int, 2*off+1), make([]int, 2*off+1)
	}
	vf := d.vf[:2*off+1] // furthest x on diagonal k, forward
	vb := d.vb[:2*off+1] // furthest x on diagonal k, from the end
	for i := range vf {
		vf[i], vb[i] = -1, -1
	}
	vf[off+1], vb[off+1] = 0, 0
	ida, idb := d.ida[a0:a1], d.idb[b0:b1]
	for D := 0; D <= dmax; D++ {
		if !d.spend(int64(2*D + 2)) {
			return 0, 0, 0, false
		}
		for k := -D; k <= D; k += 2 {
			x1, y1, ok := d.reach(vf, off, k, D, ida, idb, false)
			if d.stepsOut {
				return 0, 0, 0, false
			}
			if kb := delta - k; ok && odd && kb >= -(D-1) && kb <= D-1 && vb[off+kb] >= 0 && x1+vb[off+kb] >= n {
				if e = 2*D - 1; e > maxE {
					return 0, 0, 0, false
				}
				return a0 + x1, b0 + y1, e, true
			}
		}
		for k := -D; k <= D; k += 2 {
			x2, _, ok := d.reach(vb, off, k, D, ida, idb, true)
			if d.stepsOut {
				return 0, 0, 0, false
			}
			if kf := delta - k; ok && !odd && kf >= -D && kf <= D && vf[off+kf] >= 0 && vf[off+kf]+x2 >= n {
				if e = 2 * D; e > maxE {
					return 0, 0, 0, false
				}
				xf := vf[off+kf]
				return a0 + xf, b0 + xf - kf, e, true
			}
		}
	}
	return 0, 0, 0, false // more than maxE edits
}

// reach takes diagonal k of one direction's search (v: the furthest x
// on each diagonal, from the start, or with back from the end) one edit
// and the snake after it further, and returns where it ends; ok is false
// when that is off the grid (v unchanged) or the budget ran out.
func (d *lineDiff) reach(v []int, off, k, D int, ida, idb []int32, back bool) (x, y int, ok bool) {
	n, m := len(ida), len(idb)
	if k == -D || k != D && v[off+k-1] < v[off+k+1] {
		x = v[off+k+1]
	} else {
		x = v[off+k-1] + 1
	}
	y = x - k
	if x < 0 || y < 0 || x > n || y > m {
		return 0, 0, false
	}
	x0 := x
	if back {
		for x < n && y < m && ida[n-x-1] == idb[m-y-1] {
			x, y = x+1, y+1
		}
	} else {
		for x < n && y < m && ida[x] == idb[y] {
			x, y = x+1, y+1
		}
	}
	if !d.spend(int64(x - x0)) {
		return 0, 0, false
	}
	v[off+k] = x
	return x, y, true
}

// unified writes the hunks of d as a unified diff with diffContext lines
// of context; hunks closer than 2*diffContext kept lines share one.
func unified(p string, inA, inB bool, d *lineDiff) string {
	var w strings.Builder
	from, to := "a/"+p, "b/"+p
	if !inA {
		from = "/dev/null"
	}
	if !inB {
		to = "/dev/null"
	}
	fmt.Fprintf(&w, "--- %s\n+++ %s\n", from, to)
	hs := d.hunks
	for i := 0; i < len(hs); {
		j := i
		for j+1 < len(hs) && hs[j+1].a0-hs[j].a1 <= 2*diffContext {
			j++
		}
		writeHunk(&w, d.a, d.b, hs[i:j+1])
		i = j + 1
	}
	return w.String()
}

// writeHunk writes hunks that share one header, with their context.
func writeHunk(w *strings.Builder, a, b lines, hs []hunk) {
	first, last := hs[0], hs[len(hs)-1]
	pre := min(diffContext, first.a0)
	post := min(diffContext, a.n()-last.a1)
	a0, b0 := first.a0-pre, first.b0-pre
	na := last.a1 + post - a0
	nb := last.b1 + post - b0
	fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(a0, na), hunkRange(b0, nb))
	line := func(kind byte, l []byte) {
		w.WriteByte(kind)
		w.Write(l)
		if !bytes.HasSuffix(l, []byte{'\n'}) {
			w.WriteString("\n\\ No newline at end of file\n")
		}
	}
	at := a0
	for _, h := range hs {
		for ; at < h.a0; at++ {
			line(' ', a.at(at))
		}
		for i := h.a0; i < h.a1; i++ {
			line('-', a.at(i))
		}
		for i := h.b0; i < h.b1; i++ {
			line('+', b.at(i))
		}
		at = h.a1
	}
	for ; at < last.a1+post; at++ {
		line(' ', a.at(at))
	}
}

// hunkRange is one side of a hunk header as diff -u writes it: the first
// line (1-based; for an empty side, the line before) and the count, left
// out when it is 1.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
