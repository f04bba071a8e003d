package diff

import (
	"bytes"
	"hash/maphash"
	"strconv"
)

// diffScratch is the memory comparing files works in, made for the first
// pair that needs it and reused by every pair after (a TreeDiff's), so a
// comparison holds what its largest files need once, not a copy per file:
// the two files' bytes, where their lines end, the numbering of the lines
// that differ, the search's vectors, the edit script and the diff text.
// Each part grows to exactly what a pair needs (see pairMemory, which
// bounds them).
type diffScratch struct {
	a, b       []byte  // the files
	endA, endB []int32 // where their lines end
	ida, idb   []int32 // the middle's lines, numbered
	slots      []int32 // the numbering's table
	first      []int32 // where a line of each number is
	vf, vb     []int   // the search's vectors
	hunks      []hunk  // the edit script
	out        []byte  // the diff text of one file
	cmpA, cmpB []byte  // blocks of two large files compared
}

// grow returns b with length n, reusing its memory when it has room and
// allocating exactly n otherwise.
func grow[T any](b []T, n int) []T {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]T, n)
}

// lines is a text cut into lines, each with its newline (the last may
// lack one): line i is buf[end[i-1]:end[i]].
type lines struct {
	buf []byte
	end []int32 // MaxDiffFileBytes fits
}

// splitLines cuts b into lines, their ends kept in end's memory.
func splitLines(b []byte, end []int32) lines {
	l := lines{buf: b, end: grow(end, bytes.Count(b, []byte{'\n'})+1)[:0]}
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
	sc             *diffScratch // what it works in
	a, b           lines
	head           int     // lines the texts share at the start
	ida, idb       []int32 // the middle's lines, numbered
	steps          *int64  // left of the budget
	stepsOut       bool    // the budget ran out
	hunks          []hunk  // the edit script (script only), in whole-text line numbers
	added, removed int
}

// newLineDiff compares old and cur in a scratch of their own.
func newLineDiff(old, cur []byte, steps *int64) *lineDiff {
	return (&diffScratch{}).lineDiff(old, cur, steps)
}

// lineDiff compares old and cur in sc, taking steps from steps.
func (sc *diffScratch) lineDiff(old, cur []byte, steps *int64) *lineDiff {
	sc.endA, sc.endB = sc.endA[:0], sc.endB[:0]
	d := &lineDiff{sc: sc, a: splitLines(old, sc.endA), b: splitLines(cur, sc.endB), steps: steps, hunks: sc.hunks[:0]}
	sc.endA, sc.endB = d.a.end, d.b.end
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
	d.ida, d.idb = sc.numberLines(d.a, d.head, na-tail, d.b, d.head, nb-tail)
	return d
}

// numberLines numbers the lines a[a0:a1] and b[b0:b1] so that equal lines
// get equal numbers: an open-addressing table of the lines seen, hashed by
// content, at most half full. It holds 4 bytes per slot (2 to 4 per line)
// and 4 per distinct line, no copy of a line, all in sc.
func (sc *diffScratch) numberLines(a lines, a0, a1 int, b lines, b0, b1 int) (ida, idb []int32) {
	size := slotsFor((a1 - a0) + (b1 - b0))
	sc.slots = grow(sc.slots, size)
	slots := sc.slots // 0: empty; else 1 + the number of the lines there
	clear(slots)
	sc.first = grow(sc.first, (a1-a0)+(b1-b0))[:0]
	first := sc.first // per number: where a line with it is (a's lines, then b's after a.n())
	at := func(pos int32) []byte {
		if int(pos) < a.n() {
			return a.at(int(pos))
		}
		return b.at(int(pos) - a.n())
	}
	seed := maphash.MakeSeed()
	number := func(out []int32, l lines, from, to, base int) []int32 {
		out = grow(out, to-from)
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
	sc.ida = number(sc.ida, a, a0, a1, 0)
	sc.idb = number(sc.idb, b, b0, b1, a.n())
	return sc.ida, sc.idb
}

// slotsFor is the size of the numbering's table for n lines: the least
// power of two at least twice n.
func slotsFor(n int) int {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	return size
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
// longer than MaxEdits; then the counts are those of the whole middle.
func (d *lineDiff) count() bool {
	n, m := len(d.ida), len(d.idb)
	if n == 0 || m == 0 {
		d.added, d.removed = m, n
		return true
	}
	_, _, e, ok := d.middleSnake(0, n, 0, m, MaxEdits)
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
		if _, _, e, ok = d.middleSnake(0, n, 0, m, MaxEdits); !ok {
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
	d.sc.hunks = d.hunks // what it grew to, for the next file
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
// of O(min(maxE, n+m)) entries, in the scratch, made on the first search
// that needs them and reused by the later ones; making them ready costs a
// step per entry.
func (d *lineDiff) middleSnake(a0, a1, b0, b1, maxE int) (x, y, e int, ok bool) {
	n, m := a1-a0, b1-b0
	delta := n - m
	odd := delta%2 != 0
	dmax := min((n+m+1)/2, (maxE+2)/2)
	off := dmax + 1
	if !d.spend(int64(2*off + 1)) {
		return 0, 0, 0, false
	}
	d.sc.vf, d.sc.vb = grow(d.sc.vf, 2*off+1), grow(d.sc.vb, 2*off+1)
	vf := d.sc.vf // furthest x on diagonal k, forward
	vb := d.sc.vb // furthest x on diagonal k, from the end
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
// of context (hunks closer than 2*diffContext kept lines share one) into
// the scratch, and returns it; ok is false, and the text cut short, once
// it would be longer than limit bytes. The text is the scratch's: it is
// good until the next file.
func unified(p string, inA, inB bool, d *lineDiff, limit int) (text []byte, ok bool) {
	// Made once large enough for what the text can be, so it never grows.
	size := min(int64(limit), textBound(int64(len(d.a.buf)), int64(len(d.b.buf)), len(p)))
	if int64(cap(d.sc.out)) < size {
		d.sc.out = make([]byte, 0, size)
	}
	w := &limitWriter{b: d.sc.out[:0], limit: int(size)}
	from, to := "a/"+p, "b/"+p
	if !inA {
		from = "/dev/null"
	}
	if !inB {
		to = "/dev/null"
	}
	w.str("--- " + from + "\n+++ " + to + "\n")
	hs := d.hunks
	for i := 0; i < len(hs) && !w.over; {
		j := i
		for j+1 < len(hs) && hs[j+1].a0-hs[j].a1 <= 2*diffContext {
			j++
		}
		writeHunk(w, d.a, d.b, hs[i:j+1])
		i = j + 1
	}
	d.sc.out = w.b
	return w.b, !w.over
}

// textBound bounds the unified diff of a file of sa bytes with one of sb
// bytes, at path p: each line is written once (a line of the old file as
// removed or as context, one of the new as added), with its mark and at
// most one note of a missing newline a side, under its file's header and
// at most a header per edit.
func textBound(sa, sb int64, p int) int64 {
	lines := sa + sb + 2
	hunks := min(lines, MaxEdits+1)
	return sa + sb + lines + 2*32 + hunks*48 + 2*int64(p) + 32
}

// limitWriter appends to b until it would pass limit bytes, then stops
// (over), so a diff too long to show is never built whole.
type limitWriter struct {
	b     []byte
	limit int
	over  bool
}

func (w *limitWriter) fits(n int) bool {
	if w.over || len(w.b)+n > w.limit {
		w.over = true
		return false
	}
	return true
}

func (w *limitWriter) str(s string) {
	if w.fits(len(s)) {
		w.b = append(w.b, s...)
	}
}

// line writes one line of a hunk: its kind (' ', '-', '+') and the line,
// marked when it has no newline.
func (w *limitWriter) line(kind byte, l []byte) {
	const noNewline = "\n\\ No newline at end of file\n"
	n := 1 + len(l)
	if !bytes.HasSuffix(l, []byte{'\n'}) {
		n += len(noNewline)
	}
	if !w.fits(n) {
		return
	}
	w.b = append(append(w.b, kind), l...)
	if !bytes.HasSuffix(l, []byte{'\n'}) {
		w.b = append(w.b, noNewline...)
	}
}

// writeHunk writes hunks that share one header, with their context.
func writeHunk(w *limitWriter, a, b lines, hs []hunk) {
	first, last := hs[0], hs[len(hs)-1]
	pre := min(diffContext, first.a0)
	post := min(diffContext, a.n()-last.a1)
	a0, b0 := first.a0-pre, first.b0-pre
	na := last.a1 + post - a0
	nb := last.b1 + post - b0
	w.str("@@ -" + hunkRange(a0, na) + " +" + hunkRange(b0, nb) + " @@\n")
	at := a0
	for _, h := range hs {
		for ; at < h.a0; at++ {
			w.line(' ', a.at(at))
		}
		for i := h.a0; i < h.a1; i++ {
			w.line('-', a.at(i))
		}
		for i := h.b0; i < h.b1; i++ {
			w.line('+', b.at(i))
		}
		at = h.a1
	}
	for ; at < last.a1+post; at++ {
		w.line(' ', a.at(at))
	}
}

// hunkRange is one side of a hunk header as diff -u writes it: the first
// line (1-based; for an empty side, the line before) and the count, left
// out when it is 1.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(start) + ",0"
	case 1:
		return strconv.Itoa(start + 1)
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(n)
}
