package diff

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// diffTree writes a tree of regular files, 0644, and returns its folder.
func diffTree(t *testing.T, files map[string]string) string {
	t.Helper()
	tree := fstest.MapFS{}
	for p, body := range files {
		tree[p] = skilltest.File(body)
	}
	return skilltest.WriteDir(t, t.TempDir(), tree)
}

func TestDiffTreesExact(t *testing.T) {
	a := diffTree(t, map[string]string{
		"SKILL.md":          "---\nname: x\n---\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n",
		"gone.txt":          "bye\n",
		"same.txt":          "same\n",
		"logo.png":          "\x89PNG\x00\x01",
		"tail.txt":          "a\nb",
		"run/tool.txt":      "x\n",
		skills.MetaFileName: "{}", // the store's record: never compared
	})
	b := diffTree(t, map[string]string{
		"SKILL.md":          "---\nname: x\n---\none\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n",
		"new.txt":           "hello\nworld\n",
		"same.txt":          "same\n",
		"logo.png":          "\x89PNG\x00\x02",
		"tail.txt":          "a\nb\n",
		"run/tool.txt":      "x\n",
		skills.MetaFileName: `{"other": true}`,
	})
	changes, err := trees(a, b, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, c := range changes {
		got.WriteString(c.Status + " " + c.Path + " " + c.Note + "\n" + c.Diff)
	}
	want := `changed SKILL.md 
--- a/SKILL.md
+++ b/SKILL.md
@@ -3,7 +3,7 @@
 ---
 one
 two
-three
+THREE
 four
 five
 six
@@ -11,3 +11,4 @@
 eight
 nine
 ten
+eleven
removed gone.txt 
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
changed logo.png binary files differ
added new.txt 
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
changed tail.txt 
--- a/tail.txt
+++ b/tail.txt
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+b
`
	if got.String() != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got.String(), want)
	}
	st := StatOf(changes)
	if st != (Stat{FilesAdded: 1, FilesRemoved: 1, FilesChanged: 3, Insertions: 5, Deletions: 3, LinesUnknown: 1}) {
		t.Errorf("stat %+v", st)
	}
	// The other way round, and against itself.
	if back, _ := trees(b, a, false, 0, nil); StatOf(back) != (Stat{FilesAdded: 1, FilesRemoved: 1, FilesChanged: 3, Insertions: 3, Deletions: 5, LinesUnknown: 1}) {
		t.Errorf("reverse stat %+v", StatOf(back))
	}
	if none, _ := trees(a, a, true, 0, nil); len(none) != 0 {
		t.Errorf("a tree differs from itself: %+v", none)
	}
}

// TestDiffTreesBounds: a file past the size bound is named, not compared
// line by line; the output bound leaves later diffs out, saying so.
func TestDiffTreesBounds(t *testing.T) {
	big := strings.Repeat("line\n", MaxFileBytes/5+1)
	a := diffTree(t, map[string]string{"big.txt": big, "x.txt": "1\n", "y.txt": "1\n"})
	b := diffTree(t, map[string]string{"big.txt": big + "more\n", "x.txt": "2\n", "y.txt": "2\n"})
	changes, err := trees(a, b, true, 50, nil) // one 42-byte diff fits, two do not
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 || changes[0].Diff != "" || !strings.Contains(changes[0].Note, "not compared line by line") {
		t.Fatalf("big file: %+v", changes)
	}
	if changes[1].Diff == "" || changes[2].Diff != "" || !strings.Contains(changes[2].Note, "output limit") {
		t.Errorf("output bound: %+v", changes[1:])
	}
}

// TestLineEditsMinimal checks the edit script on random inputs: applied to
// a it gives b, it is as short as the longest common subsequence allows,
// and the count without a script agrees with it.
func TestLineEditsMinimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func(n, letters int) []string {
		out := make([]string, r.IntN(n))
		for i := range out {
			out[i] = string(rune('a'+r.IntN(letters))) + "\n"
		}
		return out
	}
	for i := 0; i < 20000; i++ {
		n, letters := 14, 3
		if i%4 == 0 {
			n, letters = 60, 2+i%5
		}
		a, b := gen(n, letters), gen(n, letters)
		steps := int64(1 << 30)
		d := newLineDiff([]byte(strings.Join(a, "")), []byte(strings.Join(b, "")), &steps)
		if !d.script() {
			t.Fatal("bound hit on a small input")
		}
		var got []string
		at := 0
		for _, h := range d.hunks {
			if h.a0 < at || h.a1 < h.a0 || h.b1 < h.b0 || h.a0 == h.a1 && h.b0 == h.b1 {
				t.Fatalf("%v→%v: bad hunk %+v", a, b, h)
			}
			got = append(got, a[at:h.a0]...)
			if len(got) != h.b0 {
				t.Fatalf("%v→%v: hunk %+v out of step", a, b, h)
			}
			got = append(got, b[h.b0:h.b1]...)
			at = h.a1
		}
		got = append(got, a[at:]...)
		if strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("%v→%v: script gives %v", a, b, got)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); d.added+d.removed != want {
			t.Fatalf("%v→%v: %d edits, shortest is %d", a, b, d.added+d.removed, want)
		}
		c := newLineDiff([]byte(strings.Join(a, "")), []byte(strings.Join(b, "")), &steps)
		if !c.count() || c.added != d.added || c.removed != d.removed {
			t.Fatalf("%v→%v: count +%d -%d, script +%d -%d", a, b, c.added, c.removed, d.added, d.removed)
		}
	}
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

// diffAllocated compares two trees on a budget of their own, and says
// how many bytes that allocated.
func diffAllocated(t *testing.T, a, b string, text bool) ([]FileChange, uint64) {
	t.Helper()
	var changes []FileChange
	var err error
	n := allocated(func() { changes, err = trees(a, b, text, 0, nil) })
	if err != nil {
		t.Fatal(err)
	}
	return changes, n
}

// differentFiles is n lines, each unlike any line of another prefix.
func differentFiles(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s line %d\n", prefix, i)
	}
	return b.String()
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDiffOfWhollyDifferentFilesIsBounded: two wholly different 3,000-line
// files (6,000 edits, past MaxEdits) take under 1 MiB to compare, with
// a diff or without (a search that kept its trace took about 128 MB), and
// count only the lines between the shared head and tail; many such files
// in one request stop at the budget, the rest reported not compared.
func TestDiffOfWhollyDifferentFilesIsBounded(t *testing.T) {
	shared := differentFiles("shared", 50)
	one := map[string]string{"f.txt": shared + differentFiles("old", 3000) + shared}
	other := map[string]string{"f.txt": shared + differentFiles("new", 3000) + shared}
	a, b := diffTree(t, one), diffTree(t, other)
	for _, text := range []bool{false, true} {
		changes, n := diffAllocated(t, a, b, text)
		if n > 1<<20 {
			t.Errorf("text %v: %d bytes allocated for one pair of files", text, n)
		}
		if len(changes) != 1 || changes[0].Added != 3000 || changes[0].Removed != 3000 || changes[0].Diff != "" ||
			!strings.Contains(changes[0].Note, "more than 4000 lines changed") {
			t.Errorf("text %v: %+v", text, changes)
		}
	}

	const files = 40
	many, manyOther := map[string]string{}, map[string]string{}
	for i := 0; i < files; i++ {
		name := fmt.Sprintf("f%02d.txt", i)
		many[name], manyOther[name] = differentFiles("old", 3000), differentFiles("new", 3000)
	}
	a, b = diffTree(t, many), diffTree(t, manyOther)
	var changes []FileChange
	budget := NewBudget(0, 0)
	n := allocated(func() { changes, _ = trees(a, b, false, 0, budget) })
	if n > files<<20 {
		t.Errorf("%d pairs: %d bytes allocated", files, n)
	}
	st := StatOf(changes)
	if !budget.Spent() || st.NotCompared == 0 || st.NotCompared == files || st.FilesChanged != files-st.NotCompared {
		t.Errorf("%d pairs in one budget: %+v", files, st)
	}
	for _, c := range changes[files-st.NotCompared:] {
		if c.Status != FileNotCompared || !c.NotCompared || c.Added+c.Removed != 0 || !strings.Contains(c.Note, "budget") {
			t.Fatalf("a file past the budget: %+v", c)
		}
	}
	// The same request again comes out the same.
	again, _ := trees(a, b, false, 0, NewBudget(0, 0))
	if StatOf(again) != st {
		t.Errorf("the same budget gave %+v, then %+v", st, StatOf(again))
	}
}

// spreadEdits is a text of about 1 MiB of distinct short lines, and the
// same with edits lines replaced, evenly spread.
func spreadEdits(edits int) (string, string) {
	var a strings.Builder
	for n := 0; a.Len() < MaxFileBytes-16; n++ {
		fmt.Fprintf(&a, "%x\n", n)
	}
	lines := strings.SplitAfter(a.String(), "\n")
	lines = lines[:len(lines)-1]
	for i := 0; i < edits; i++ {
		lines[i*len(lines)/edits+1] = "zz\n"
	}
	return a.String(), strings.Join(lines, "")
}

// TestDiffOfLargeFilesIsBounded: a pair of 1 MiB files (some 175,000
// lines) with 64 lines changed takes little more memory than the files
// and their lines, diff or not: the search's vectors are made once per
// file, sized by the edits, not by the lines at every level of the
// recursion (that took some 50 MB a pair, and 1.2 GB a request).
func TestDiffOfLargeFilesIsBounded(t *testing.T) {
	old, cur := spreadEdits(64)
	a, b := diffTree(t, map[string]string{"f.txt": old}), diffTree(t, map[string]string{"f.txt": cur})
	for _, text := range []bool{false, true} {
		changes, n := diffAllocated(t, a, b, text)
		if len(changes) != 1 || changes[0].Added != 64 || changes[0].Removed != 64 || text != (changes[0].Diff != "") {
			t.Fatalf("text %v: %+v", text, changes)
		}
		if n > 16<<20 {
			t.Errorf("text %v: %d MiB allocated for one pair of 1 MiB files", text, n>>20)
		}
	}
}

// TestNumberingLinesIsCharged: numbering the lines to compare costs a
// step each, so a budget of fewer steps than lines leaves the file not
// compared before the work is done, whatever the search would cost.
func TestNumberingLinesIsCharged(t *testing.T) {
	same := differentFiles("same", 20000)
	a := diffTree(t, map[string]string{"f.txt": "old\n" + same + "old\n"})
	b := diffTree(t, map[string]string{"f.txt": "new\n" + same + "new\n"})
	budget := NewBudget(0, 60000) // the search alone takes about 40,000 (a snake each way)
	changes, err := trees(a, b, false, 0, budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || !changes[0].NotCompared || !budget.Spent() {
		t.Errorf("40,004 lines to number in 60,000 steps: %+v, %d steps left", changes, budget.Steps)
	}
	budget = NewBudget(0, 100000)
	if changes, _ = trees(a, b, false, 0, budget); len(changes) != 1 || changes[0].Added != 2 || changes[0].Removed != 2 {
		t.Errorf("in 100,000 steps: %+v", changes)
	}
}

// TestFileOverTheBudgetLeavesTheOthers: a file that does not fit what is
// left of the budget is the only one not compared; the files after it
// are, an identical large file and a changed small one alike.
func TestFileOverTheBudgetLeavesTheOthers(t *testing.T) {
	big := strings.Repeat("\x00", 2<<20)
	mid := strings.Repeat("line\n", 20000)
	a := diffTree(t, map[string]string{"a.bin": big, "m.txt": mid + "old\n", "z.md": "one\n"})
	b := diffTree(t, map[string]string{"a.bin": big, "m.txt": mid + "new\n", "z.md": "two\n"})
	budget := NewBudget(150<<10, 0) // neither a.bin (4 MiB) nor m.txt (200 KB) fits
	changes, err := trees(a, b, true, 0, budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 {
		t.Fatalf("changes: %+v", changes)
	}
	for _, c := range changes[:2] {
		if c.Status != FileNotCompared || !c.NotCompared || !strings.Contains(c.Note, "larger than what is left") {
			t.Errorf("a file over the budget: %+v", c)
		}
	}
	if z := changes[2]; z.Path != "z.md" || z.NotCompared || z.Added != 1 || z.Removed != 1 || z.Diff == "" {
		t.Errorf("the small file after them: %+v", z)
	}
	if st := StatOf(changes); st.FilesChanged != 1 || st.NotCompared != 2 || budget.Bytes != 150<<10-8 {
		t.Errorf("stat %+v, %d bytes left", st, budget.Bytes)
	}
}

// TestDiffMemoryIsBounded: what comparing two trees allocates, in all, is
// within what TreeDiff.Memory said before reading a byte, diff text or
// not, for the worst shapes of files: lines of one byte, wholly
// different, lines all alike, one line of a mebibyte, control characters
// (whose JSON is six times as long: the diff text is cut at
// MaxFileOutput, never built past it), files added and removed, and
// many files of one size (the scratch reused, not made again per file).
func TestDiffMemoryIsBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	random := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	spreadOld, spreadNew := spreadEdits(64)
	manyOld, manyNew := map[string]string{}, map[string]string{}
	for i := range 20 {
		name := fmt.Sprintf("f%02d.txt", i)
		manyOld[name], manyNew[name] = random(64<<10, "ab\n"), random(64<<10, "ab\n")
	}
	longLines := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(random(299, "abcdefgh") + "\n")
		}
		return b.String()
	}
	const mib = MaxFileBytes
	for _, tc := range []struct {
		name     string
		old, cur map[string]string
	}{
		{"one-byte lines, wholly different", map[string]string{"f": strings.Repeat("a\n", mib/2)}, map[string]string{"f": strings.Repeat("b\n", mib/2)}},
		{"short random lines", map[string]string{"f": random(mib, "ab\n")}, map[string]string{"f": random(mib, "ab\n")}},
		{"lines all alike but one", map[string]string{"f": strings.Repeat("\n", mib-2) + "a\n"}, map[string]string{"f": strings.Repeat("\n", mib-2) + "b\n"}},
		{"spread edits", map[string]string{"f": spreadOld}, map[string]string{"f": spreadNew}},
		{"one long line", map[string]string{"f": random(mib, "xyz")}, map[string]string{"f": random(mib, "xyz")}},
		{"control characters", map[string]string{"f": random(mib/2, "\x01\x02\n")}, map[string]string{"f": random(mib/2, "\x03\x04\n")}},
		{"added and removed", map[string]string{"gone": random(mib, "ab\n")}, map[string]string{"new": random(mib, "cd\n")}},
		{"many files of one size", manyOld, manyNew},
		{"a large diff shown", map[string]string{"f": longLines(1600)}, map[string]string{"f": longLines(1600)}},
		{"a diff over the file's limit", map[string]string{"f": longLines(1900)}, map[string]string{"f": longLines(1900)}},
	} {
		a, b := diffTree(t, tc.old), diffTree(t, tc.cur)
		for _, text := range []bool{false, true} {
			td, err := Open(a, b)
			if err != nil {
				t.Fatal(err)
			}
			bound := td.Memory(text)
			var changes, shown int
			n := allocated(func() {
				err = td.Each(text, 0, NewBudget(0, 0), func(c *FileChange) error {
					changes++
					shown += len(c.Diff)
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			// The changes themselves and their notes: a few hundred
			// bytes each, handed on and let go.
			allowance := uint64(td.Files()) * 1024
			t.Logf("%s (text %v): %d changes, %d bytes of diff; %.1f MiB allocated, bound %.1f MiB",
				tc.name, text, changes, shown, float64(n)/(1<<20), float64(bound)/(1<<20))
			if changes == 0 {
				t.Errorf("%s: no change found", tc.name)
			}
			if n > uint64(bound)+allowance {
				t.Errorf("%s (text %v): %d bytes allocated, over the bound of %d", tc.name, text, n, bound)
			}
		}
	}
}

// TestFileDiffOverItsLimit: a file whose diff would pass MaxFileOutput
// is named with its counts and a note, its diff left out; the files after
// it still get theirs.
func TestFileDiffOverItsLimit(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(strings.Repeat(c, 299)+"\n", n) }
	lines := MaxFileOutput/300/2 + 100 // removed and added: past the limit
	a := diffTree(t, map[string]string{"big.txt": long("a", lines), "z.txt": "one\n"})
	b := diffTree(t, map[string]string{"big.txt": long("b", lines), "z.txt": "two\n"})
	changes, err := trees(a, b, true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].Diff != "" || changes[0].Added != lines || changes[0].Removed != lines ||
		!strings.Contains(changes[0].Note, fmt.Sprintf("diff not shown: over %d bytes", MaxFileOutput)) {
		t.Fatalf("a diff over the limit: %+v", changes[0])
	}
	if changes[1].Diff == "" {
		t.Errorf("the file after it: %+v", changes[1])
	}
}

// BenchmarkDiffLargeTree compares two trees of 60 files of 1 MiB (some
// 175,000 lines each) with 64 lines changed in each, within one default
// budget, as a listing does (counts) and a diff does (text): B/op is what
// one comparison allocates in all, mem-bound-MiB what TreeDiff.Memory
// grants it.
func BenchmarkDiffLargeTree(b *testing.B) {
	old, cur := spreadEdits(64)
	ta, tb := map[string]string{}, map[string]string{}
	for i := range 60 {
		name := fmt.Sprintf("f%02d.txt", i)
		ta[name], tb[name] = old, cur
	}
	a, c := b.TempDir(), b.TempDir()
	for _, side := range []struct {
		root  string
		files map[string]string
	}{{a, ta}, {c, tb}} {
		tree := fstest.MapFS{}
		for p, body := range side.files {
			tree[p] = skilltest.File(body)
		}
		skilltest.WriteDir(b, side.root, tree)
	}
	for _, text := range []bool{false, true} {
		b.Run(map[bool]string{false: "counts", true: "text"}[text], func(b *testing.B) {
			b.ReportAllocs()
			var compared int
			var bound int64
			for b.Loop() {
				td, err := Open(a, c)
				if err != nil {
					b.Fatal(err)
				}
				bound = td.Memory(text)
				compared = 0
				if err := td.Each(text, 0, NewBudget(0, 0), func(fc *FileChange) error {
					if !fc.NotCompared {
						compared++
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(compared), "files-compared")
			b.ReportMetric(float64(bound)/(1<<20), "mem-bound-MiB")
		})
	}
}

// trees compares the published trees a (old) and b (new), either ""
// for an empty tree, file by file in path order. With text set, changed
// text files get a unified diff, all of them together cut at maxOutput
// bytes (0: DefaultOutput); without, only the line counts, and no
// edit script is built. The work is taken from budget (nil: a budget of
// its own, NewBudget(0, 0)). It keeps every change, as the tests
// want them; TreeDiff.Each hands them on one at a time.
func trees(a, b string, text bool, maxOutput int, budget *Budget) ([]FileChange, error) {
	td, err := Open(a, b)
	if err != nil {
		return nil, err
	}
	out := []FileChange{}
	err = td.Each(text, maxOutput, budget, func(c *FileChange) error {
		out = append(out, *c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
