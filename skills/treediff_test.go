package skills

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// diffTree writes a tree of regular files.
func diffTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		writeTree(t, root, tfile{name: p, body: body, mode: 0o644})
	}
	return root
}

func TestDiffTreesExact(t *testing.T) {
	a := diffTree(t, map[string]string{
		"SKILL.md":     "---\nname: x\n---\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n",
		"gone.txt":     "bye\n",
		"same.txt":     "same\n",
		"logo.png":     "\x89PNG\x00\x01",
		"tail.txt":     "a\nb",
		"run/tool.txt": "x\n",
		MetaFileName:   "{}", // the store's record: never compared
	})
	b := diffTree(t, map[string]string{
		"SKILL.md":     "---\nname: x\n---\none\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n",
		"new.txt":      "hello\nworld\n",
		"same.txt":     "same\n",
		"logo.png":     "\x89PNG\x00\x02",
		"tail.txt":     "a\nb\n",
		"run/tool.txt": "x\n",
		MetaFileName:   `{"other": true}`,
	})
	changes, err := DiffTrees(a, b, true, 0)
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
	st := Stat(changes)
	if st != (DiffStat{FilesAdded: 1, FilesRemoved: 1, FilesChanged: 3, Insertions: 5, Deletions: 3}) {
		t.Errorf("stat %+v", st)
	}
	// The other way round, and against itself.
	if back, _ := DiffTrees(b, a, false, 0); Stat(back) != (DiffStat{FilesAdded: 1, FilesRemoved: 1, FilesChanged: 3, Insertions: 3, Deletions: 5}) {
		t.Errorf("reverse stat %+v", Stat(back))
	}
	if none, _ := DiffTrees(a, a, true, 0); len(none) != 0 {
		t.Errorf("a tree differs from itself: %+v", none)
	}
}

// TestDiffTreesBounds: a file past the size bound is named, not compared
// line by line; the output bound leaves later diffs out, saying so.
func TestDiffTreesBounds(t *testing.T) {
	big := strings.Repeat("line\n", MaxDiffFileBytes/5+1)
	a := diffTree(t, map[string]string{"big.txt": big, "x.txt": "1\n", "y.txt": "1\n"})
	b := diffTree(t, map[string]string{"big.txt": big + "more\n", "x.txt": "2\n", "y.txt": "2\n"})
	changes, err := DiffTrees(a, b, true, 50) // one 42-byte diff fits, two do not
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
// a it gives b, and it is as short as the longest common subsequence allows.
func TestLineEditsMinimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() []string {
		n := r.IntN(12)
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + r.IntN(3)))
		}
		return out
	}
	for i := 0; i < 3000; i++ {
		a, b := gen(), gen()
		ops, ok := lineEdits(a, b)
		if !ok {
			t.Fatal("bound hit on a small input")
		}
		var got []string
		edits := 0
		ai := 0
		for _, o := range ops {
			switch o.kind {
			case ' ':
				if a[o.a] != b[o.b] || o.a != ai {
					t.Fatalf("%v→%v: bad kept line %+v", a, b, o)
				}
				got = append(got, a[o.a])
				ai++
			case '-':
				if o.a != ai {
					t.Fatalf("%v→%v: removal out of order %+v", a, b, o)
				}
				ai++
				edits++
			case '+':
				got = append(got, b[o.b])
				edits++
			}
		}
		if strings.Join(got, "") != strings.Join(b, "") || ai != len(a) {
			t.Fatalf("%v→%v: script gives %v", a, b, got)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("%v→%v: %d edits, shortest is %d", a, b, edits, want)
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
