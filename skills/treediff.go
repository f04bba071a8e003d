package skills

import (
	"bytes"
	"fmt"
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
const (
	MaxDiffFileBytes  = 1 << 20
	MaxDiffEdits      = 4000
	DefaultDiffOutput = 4 << 20
	diffContext       = 3
)

// Statuses of a FileChange.
const (
	FileAdded   = "added"
	FileRemoved = "removed"
	FileChanged = "changed"
)

// FileChange is one file that differs between two trees.
type FileChange struct {
	Path    string `json:"path"`
	Status  string `json:"status"` // FileAdded, FileRemoved or FileChanged
	Binary  bool   `json:"binary,omitempty"`
	Added   int    `json:"added"`   // lines added (0 for a binary file)
	Removed int    `json:"removed"` // lines removed
	// Diff is the unified diff of a text file; Note says why there is
	// none, or what else changed (the mode).
	Diff string `json:"diff,omitempty"`
	Note string `json:"note,omitempty"`
}

// DiffStat sums up a tree diff.
type DiffStat struct {
	FilesAdded   int `json:"files_added"`
	FilesRemoved int `json:"files_removed"`
	FilesChanged int `json:"files_changed"`
	Insertions   int `json:"insertions"`
	Deletions    int `json:"deletions"`
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
		default:
			s.FilesChanged++
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
// bytes (0: DefaultDiffOutput); without, only the line counts.
func DiffTrees(a, b string, text bool, maxOutput int) ([]FileChange, error) {
	if maxOutput <= 0 {
		maxOutput = DefaultDiffOutput
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
		c, err := diffFile(p, x, inA, y, inB, text, &left)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	return out, nil
}

// readSide reads one side of a file pair; a missing side is empty.
func readSide(f treeFile, present bool) ([]byte, error) {
	if !present || f.size > MaxDiffFileBytes {
		return nil, nil
	}
	return os.ReadFile(f.abs)
}

// diffFile compares one path of two trees; nil when it did not change.
func diffFile(p string, x treeFile, inA bool, y treeFile, inB bool, text bool, left *int) (*FileChange, error) {
	c := &FileChange{Path: p, Status: FileChanged}
	switch {
	case !inA:
		c.Status = FileAdded
	case !inB:
		c.Status = FileRemoved
	}
	old, err := readSide(x, inA)
	if err != nil {
		return nil, err
	}
	cur, err := readSide(y, inB)
	if err != nil {
		return nil, err
	}
	tooBig := inA && x.size > MaxDiffFileBytes || inB && y.size > MaxDiffFileBytes
	if tooBig {
		if inA && inB && x.size == y.size && x.exec == y.exec && sameFile(x.abs, y.abs) {
			return nil, nil
		}
		c.Note = fmt.Sprintf("files differ (over %d bytes: not compared line by line)", MaxDiffFileBytes)
		return c, nil
	}
	if inA && inB && bytes.Equal(old, cur) {
		if x.exec == y.exec {
			return nil, nil
		}
		c.Note = fmt.Sprintf("mode %s → %s", modeName(x.exec), modeName(y.exec))
		return c, nil
	}
	if !isText(old) || !isText(cur) {
		c.Binary, c.Note = true, "binary files differ"
		return c, nil
	}
	la, lb := splitLines(old), splitLines(cur)
	ops, ok := lineEdits(la, lb)
	if !ok {
		c.Added, c.Removed = len(lb), len(la)
		c.Note = fmt.Sprintf("more than %d lines changed: diff not shown", MaxDiffEdits)
		return c, nil
	}
	for _, o := range ops {
		switch o.kind {
		case '+':
			c.Added++
		case '-':
			c.Removed++
		}
	}
	if inA && inB && x.exec != y.exec {
		c.Note = fmt.Sprintf("mode %s → %s", modeName(x.exec), modeName(y.exec))
	}
	if !text {
		return c, nil
	}
	d := unified(p, inA, inB, la, lb, ops)
	if len(d) > *left {
		c.Note = strings.TrimPrefix(c.Note+"; diff not shown: the output limit is reached", "; ")
		*left = 0
		return c, nil
	}
	*left -= len(d)
	c.Diff = d
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

// splitLines cuts b into lines, each with its newline; the last may lack one.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// edit is one line of an edit script: ' ' kept, '-' removed from a, '+'
// added from b; a and b are the line's indexes in each (where it is, or
// would be).
type edit struct {
	kind byte
	a, b int
}

// lineEdits is the shortest edit script from a to b (Myers' algorithm,
// after the common head and tail are taken off); ok is false when it needs
// more than MaxDiffEdits edits.
func lineEdits(a, b []string) (ops []edit, ok bool) {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	for i := 0; i < head; i++ {
		ops = append(ops, edit{' ', i, i})
	}
	mid, ok := myers(a[head:len(a)-tail], b[head:len(b)-tail], MaxDiffEdits)
	if !ok {
		return nil, false
	}
	for _, o := range mid {
		ops = append(ops, edit{o.kind, o.a + head, o.b + head})
	}
	for i := 0; i < tail; i++ {
		ops = append(ops, edit{' ', len(a) - tail + i, len(b) - tail + i})
	}
	return ops, true
}

// myers computes the shortest edit script from a to b with at most maxD
// edits, keeping for each number of edits d the furthest reach of each
// diagonal (O(d²) memory).
func myers(a, b []string, maxD int) ([]edit, bool) {
	n, m := len(a), len(b)
	limit := min(n+m, maxD)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	for d := 0; d <= limit; d++ {
		trace = append(trace, slices.Clone(v[off-d-1:off+d+2]))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, n, m), true
			}
		}
	}
	return nil, false
}

// backtrack walks trace back from (n, m) to the start, in reverse, and
// returns the edits in order.
func backtrack(trace [][]int, n, m int) []edit {
	var rev []edit
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d] // index k+d+1
		at := func(k int) int { return v[k+d+1] }
		k := x - y
		var pk int
		if k == -d || k != d && at(k-1) < at(k+1) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			rev = append(rev, edit{' ', x, y})
		}
		if d > 0 {
			if x == px {
				rev = append(rev, edit{'+', x, y - 1})
			} else {
				rev = append(rev, edit{'-', x - 1, y})
			}
		}
		x, y = px, py
	}
	slices.Reverse(rev)
	return rev
}

// unified writes ops as a unified diff with diffContext lines of context.
func unified(p string, inA, inB bool, a, b []string, ops []edit) string {
	var w strings.Builder
	from, to := "a/"+p, "b/"+p
	if !inA {
		from = "/dev/null"
	}
	if !inB {
		to = "/dev/null"
	}
	fmt.Fprintf(&w, "--- %s\n+++ %s\n", from, to)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from diffContext lines before this change to
		// diffContext lines after the last change that follows within
		// 2*diffContext kept lines.
		start := max(0, i-diffContext)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
				continue
			}
			if j-end > 2*diffContext {
				break
			}
		}
		stop := min(len(ops), end+1+diffContext)
		writeHunk(&w, a, b, ops[start:stop])
		i = stop
	}
	return w.String()
}

func writeHunk(w *strings.Builder, a, b []string, ops []edit) {
	na, nb := 0, 0
	for _, o := range ops {
		if o.kind != '+' {
			na++
		}
		if o.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(ops[0].a, na), hunkRange(ops[0].b, nb))
	for _, o := range ops {
		line := ""
		switch o.kind {
		case '+':
			line = b[o.b]
		default:
			line = a[o.a]
		}
		w.WriteByte(o.kind)
		w.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			w.WriteString("\n\\ No newline at end of file\n")
		}
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
