package manifest

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"skillfs/skills"
)

func TestParseManifestRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		front    string
		always   bool
		globs    []string
		problems []string // lenient's warnings; strict's problems are the same without what becomes of the value
	}{
		{"none", "", false, nil, nil},
		{"always", "alwaysApply: true\n", true, nil, nil},
		{"always as a string in any case", "alwaysApply: 'TRUE'\n", true, nil, nil},
		{"not always", "alwaysApply: false\n", false, nil, nil},
		{"null always", "alwaysApply:\n", false, nil, nil},
		{"a bad always", "alwaysApply: yes please\n", false, nil, []string{`alwaysApply: line 4: "yes please" is not true or false; ignored`}},
		{"a list for always", "alwaysApply: [true]\n", false, nil, []string{"alwaysApply: line 4: must be true or false; ignored"}},
		{"globs as a string", "globs: \"**/*.ts, src/**,,docs/*.md\"\n", false, []string{"**/*.ts", "src/**", "docs/*.md"}, nil},
		{"a comma inside braces", "globs: '**/*.{ts,tsx}, a/**'\n", false, []string{"**/*.{ts,tsx}", "a/**"}, nil},
		{"globs as a list", "globs:\n  - '**/*.go'\n  - ' cmd/** '\n  - '**/*.go'\n  -\n", false, []string{"**/*.go", "cmd/**"}, nil},
		{"null globs", "globs: ~\n", false, nil, nil},
		{"a mapping for globs", "globs: {a: b}\n", false, nil, []string{"globs: line 4: must be a string of comma-separated globs or a list of globs; ignored"}},
		{"a list item not a string", "globs:\n  - [a]\n  - b/*\n", false, []string{"b/*"}, []string{"globs: line 5: item 1 must be a string; ignored"}},
		{"a bad glob is dropped", "globs: 'a/[b, c/*'\n", false, []string{"c/*"}, []string{`globs: line 4: "a/[b": segment "[b" is not a valid pattern; ignored`}},
		{"an open brace", "globs: 'a/{b'\n", false, nil, []string{`globs: line 4: "a/{b": a { without its }; ignored`}},
		{"a closing brace alone", "globs: 'a/b}'\n", false, nil, []string{`globs: line 4: "a/b}": a } without its {; ignored`}},
		{"a glob too long", "globs: '" + strings.Repeat("a", MaxGlobLen+1) + "'\n", false, nil,
			[]string{`globs: line 4: "` + strings.Repeat("a", MaxGlobLen+1) + `": 257 bytes long, over 256; ignored`}},
		{"too many globs", "globs: '" + strings.Join(numberedGlobs(MaxGlobs+2), ",") + "'\n", false, numberedGlobs(MaxGlobs),
			[]string{"globs: line 4: more than 64 globs; the rest are ignored"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(skillMD("name: pdf\ndescription: d\n"+tc.front, ""))
			m, w, err := Parse(data, Lenient)
			if err != nil {
				t.Fatalf("lenient: %v", err)
			}
			if m.AlwaysApply != tc.always || !slices.Equal(m.Globs, tc.globs) {
				t.Errorf("lenient: AlwaysApply %t, Globs %q; want %t, %q", m.AlwaysApply, m.Globs, tc.always, tc.globs)
			}
			if !slices.Equal(w, tc.problems) {
				t.Errorf("lenient warnings %q, want %q", w, tc.problems)
			}
			m, _, err = Parse(data, Strict)
			if len(tc.problems) == 0 {
				if err != nil || m.AlwaysApply != tc.always || !slices.Equal(m.Globs, tc.globs) {
					t.Errorf("strict: %+v, %v", m, err)
				}
				return
			}
			var got []string
			if e, ok := err.(*Error); ok {
				for _, p := range e.Problems {
					got = append(got, p.String())
				}
			}
			var want []string
			for _, w := range tc.problems {
				want = append(want, strings.TrimSuffix(strings.TrimSuffix(w, "; ignored"), "; the rest are ignored"))
			}
			if !slices.Equal(got, want) {
				t.Errorf("strict problems %q (%v), want %q", got, err, want)
			}
		})
	}
}

func TestSplitGlobs(t *testing.T) {
	for in, want := range map[string][]string{
		"":                    {""},
		"a":                   {"a"},
		"a,b":                 {"a", "b"},
		"*.{ts,tsx},b":        {"*.{ts,tsx}", "b"},
		"{a,{b,c}},d":         {"{a,{b,c}}", "d"},
		`a\,b,c`:              {`a\,b`, "c"},
		"x},y":                {"x}", "y"},
		" **/*.ts , src/** ,": {" **/*.ts ", " src/** ", ""},
	} {
		if got := SplitGlobs(in); !slices.Equal(got, want) {
			t.Errorf("SplitGlobs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"**/*.ts", []string{"a.ts", "src/a.ts", "src/deep/x/a.ts", "./src/a.ts", "/src/a.ts", "src//a.ts"}, []string{"a.tsx", "src/a.js", "src", ""}},
		{"src/**", []string{"src", "src/a", "src/a/b.go"}, []string{"srcx/a", "lib/src/a", "a"}},
		{"*.ts", []string{"a.ts", ".ts"}, []string{"src/a.ts", "a.ts/b"}},
		{"src/**/test/*.go", []string{"src/test/a.go", "src/a/b/test/c.go"}, []string{"src/test/a/b.go", "test/a.go"}},
		{"**", []string{"", "a", "a/b/c"}, nil},
		{"**/*.{ts,tsx}", []string{"a.ts", "x/a.tsx"}, []string{"a.js"}},
		{"{src,lib}/**/*.go", []string{"src/a.go", "lib/x/a.go"}, []string{"cmd/a.go"}},
		{"docs/[a-c]?.md", []string{"docs/b1.md"}, []string{"docs/d1.md", "docs/b12.md"}},
		{`a\*b`, []string{"a*b"}, []string{"axb"}},
		{"a/**/**/b", []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"a/x/c"}},
		{"README.md", []string{"README.md", "./README.md"}, []string{"docs/README.md", "readme.md"}},
		{"a/[b", nil, []string{"a/[b", "a/b"}}, // invalid: matches nothing
	} {
		for _, p := range tc.yes {
			if !MatchGlob(tc.glob, p) {
				t.Errorf("MatchGlob(%q, %q) = false, want true", tc.glob, p)
			}
		}
		for _, p := range tc.no {
			if MatchGlob(tc.glob, p) {
				t.Errorf("MatchGlob(%q, %q) = true, want false", tc.glob, p)
			}
		}
	}
}

func TestBraceLimit(t *testing.T) {
	g := strings.Repeat("{a,b}", 7) // 128 alternatives
	if err := CheckGlob(g); err == nil || !strings.Contains(err.Error(), "more than 64 alternatives") {
		t.Errorf("CheckGlob of 128 alternatives: %v", err)
	}
	if err := CheckGlob(strings.Repeat("{a,b}", 6)); err != nil {
		t.Errorf("CheckGlob of 64 alternatives: %v", err)
	}
}

// refMatch is a plain backtracking matcher of pattern segments, the
// definition MatchGlob's dynamic programming must agree with.
func refMatch(pat, segs []string) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for k := 0; k <= len(segs); k++ {
			if refMatch(pat[1:], segs[k:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], segs[0])
	return ok && refMatch(pat[1:], segs[1:])
}

func FuzzMatchGlob(f *testing.F) {
	f.Add("**/*.ts", "src/a.ts")
	f.Add("src/**", "src")
	f.Add("{a,b}/**/c*", "b/x/cd")
	f.Add("**/**/[a-", "a/b")
	f.Add(`a\{,b}`, "a{")
	f.Fuzz(func(t *testing.T, g, name string) {
		if len(name) > 512 {
			return
		}
		got := MatchGlob(g, name)
		if c, err := CompileGlob(g); err == nil {
			segs := skills.SplitSlash(name)
			if n, bound := countSteps(c, segs); n > bound {
				t.Fatalf("matching %q against %q took %d steps, over its cost %d", g, name, n, bound)
			}
		}
		if CheckGlob(g) != nil {
			if got {
				t.Fatalf("the invalid glob %q matches %q", g, name)
			}
			return
		}
		alts, err := expandBraces(g)
		if err != nil || len(alts) == 0 || len(alts) > maxGlobAlternatives {
			t.Fatalf("expandBraces(%q) = %d alternatives, %v", g, len(alts), err)
		}
		want := false
		for _, a := range alts {
			want = want || refMatch(skills.SplitSlash(a), skills.SplitSlash(name))
		}
		if got != want {
			t.Fatalf("MatchGlob(%q, %q) = %t, the reference says %t", g, name, got, want)
		}
		if MatchGlob(g, "./"+name) != got || MatchGlob(g, "/"+name) != got {
			t.Fatalf("MatchGlob(%q) differs for %q and its ./ or / form", g, name)
		}
		if !MatchGlob("**", name) {
			t.Fatalf("** does not match %q", name)
		}
	})
}

// FuzzGlobsKey reads SKILL.md files with the rule keys set to fuzzed
// values: every mode keeps its promises (checkManifestProperties), and
// every glob kept is one MatchGlob can use.
func FuzzGlobsKey(f *testing.F) {
	f.Add("**/*.ts, src/**", "true")
	f.Add("[a, '{b,c}']", "yes")
	f.Add("\n  - x/*\n  - [y]", "~")
	f.Fuzz(func(t *testing.T, globs, always string) {
		data := []byte("---\nname: pdf\ndescription: d\nglobs: " + globs + "\nalwaysApply: " + always + "\n---\nbody\n")
		checkManifestProperties(t, data)
		for _, mode := range []Mode{Strict, Lenient} {
			m, _, err := Parse(data, mode)
			if err != nil {
				continue
			}
			if len(m.Globs) > MaxGlobs {
				t.Fatalf("%v: %d globs kept", mode, len(m.Globs))
			}
			for _, g := range m.Globs {
				if err := CheckGlob(g); err != nil || g != strings.TrimSpace(g) || g == "" {
					t.Fatalf("%v: kept glob %q: %v", mode, g, err)
				}
			}
		}
	})
}

// numberedGlobs is n distinct globs, g0/* to g<n-1>/*.
func numberedGlobs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "g" + strconv.Itoa(i) + "/*"
	}
	return out
}

// FuzzSegmentMatch holds the compiled segment matcher to path.Match, its
// definition, on every valid pattern and every segment (no '/').
func FuzzSegmentMatch(f *testing.F) {
	f.Add("*a?c*[x-z]", "abcxz")
	f.Add("*?", "\xc3\xa9a")
	f.Add("[^\ufffd]*", "\x80")
	f.Add(`*\*[\]]`, "a*]")
	f.Add("a*b*c", "aabbcc")
	f.Fuzz(func(t *testing.T, p, s string) {
		if strings.Contains(s, "/") {
			return
		}
		want, err := path.Match(p, s)
		sp, cerr := compileSegment(p)
		if (err != nil) != (cerr != nil) {
			t.Fatalf("pattern %q: path.Match says %v, compileSegment %v", p, err, cerr)
		}
		if err != nil {
			return
		}
		if got := sp.match(s); got != want {
			t.Fatalf("match(%q, %q) = %t, path.Match says %t", p, s, got, want)
		}
	})
}

// countSteps matches c against segs counting the steps: how many it
// took, and how many its Cost allows.
func countSteps(c *Glob, segs []string) (n, bound int64) {
	steps = &n
	defer func() { steps = nil }()
	c.Match(segs)
	return n, c.Cost(int64(len(segs)+1), int64(len(strings.Join(segs, ""))))
}

// attackGlobs are globs of the most work a byte of path may cost: one
// whose last chunk follows a star (path.Match tries it at every offset,
// about its length times the segment's bytes in all), and one whose
// chunk between two stars has '?' in it (tried at every offset here too).
var attackGlobs = map[string]string{
	"a last chunk":   "*" + strings.Repeat("{a,b}", 6) + strings.Repeat("a", MaxGlobLen-32) + "c",
	"a middle '?'":   "*" + strings.Repeat("?", MaxGlobLen-3) + "c*",
	"a middle class": "*" + strings.Repeat("[a]", (MaxGlobLen-3)/3) + "c*",
}

// TestGlobCostOfAttacks: a glob of the most alternatives, ending in a
// literal after a star, costs as much for a path of 4,096 bytes as for one
// of 4 (its last chunk is tried at the segment's end only), and the steps
// of every attack glob stay within its cost, the cost within the size of
// the glob times the path's bytes.
func TestGlobCostOfAttacks(t *testing.T) {
	long := []string{strings.Repeat("a", 4096)}
	c, err := CompileGlob(attackGlobs["a last chunk"])
	if err != nil {
		t.Fatal(err)
	}
	if short := c.Cost(2, 4); c.Cost(2, 4096) != short || short > 2*64*(MaxGlobLen+8) {
		t.Errorf("the last-chunk glob costs %d for 4096 bytes, %d for 4: want both the same, under %d", c.Cost(2, 4096), short, 2*64*(MaxGlobLen+8))
	}
	for name, g := range attackGlobs {
		c, err := CompileGlob(g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, segs := range [][]string{long, {strings.Repeat("a", 255)}, slices.Repeat([]string{strings.Repeat("a", 255)}, 16)} {
			n, bound := countSteps(c, segs)
			if n > bound {
				t.Errorf("%s: %d steps, over its cost %d", name, n, bound)
			}
			bytes := int64(len(strings.Join(segs, "")))
			if max := int64(c.perCell)*int64(len(segs)+1) + 2*int64(len(g)+1)*bytes; bound > max {
				t.Errorf("%s: cost %d over (2 x its length) x the %d bytes", name, bound, bytes)
			}
		}
	}
}

// BenchmarkGlobWorst matches each attack glob against a segment of 255
// bytes (the most a path's may have), and reports the time a counted step takes: the
// globs request's budget (steps) times it is the longest a request runs.
func BenchmarkGlobWorst(b *testing.B) {
	segs := []string{strings.Repeat("a", 255)}
	for name, g := range attackGlobs {
		c, err := CompileGlob(g)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := countSteps(c, segs)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c.Match(segs)
			}
			b.ReportMetric(float64(n), "steps/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/step")
		})
	}
}
