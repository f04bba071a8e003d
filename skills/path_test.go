package skills

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanRelPath(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string // "" means ErrUnsafePath
	}{
		{name: "plain", in: "SKILL.md", want: "SKILL.md"},
		{name: "nested", in: "scripts/run.sh", want: "scripts/run.sh"},
		{name: "leading dot slash", in: "./a/b", want: "a/b"},
		{name: "inner dot", in: "a/./b", want: "a/b"},
		{name: "double slash", in: "a//b", want: "a/b"},
		{name: "trailing slash", in: "a/b/", want: "a/b"},
		{name: "dots inside a name", in: "a/..b/c..", want: "a/..b/c.."},
		{name: "three dots", in: ".../x", want: ".../x"},
		{name: "harmless escape kept", in: "my%20file.txt", want: "my%20file.txt"},
		{name: "lone percent", in: "100%.txt", want: "100%.txt"},
		{name: "encoded single dot", in: "a/%2e/b", want: "a/%2e/b"},
		{name: "unicode", in: "références/été.md", want: "références/été.md"},
		{name: "colon later", in: "a/c:b", want: "a/c:b"},

		{name: "empty", in: ""},
		{name: "only dot", in: "."},
		{name: "only slashes and dots", in: "./././"},
		{name: "absolute", in: "/etc/passwd"},
		{name: "drive letter backslash", in: `C:\x`},
		{name: "drive letter slash", in: "C:/x"},
		{name: "drive letter relative", in: "c:x"},
		{name: "unc", in: `\\host\share`},
		{name: "leading backslash", in: `\x`},
		{name: "backslash inside", in: `a\b`},
		{name: "parent", in: ".."},
		{name: "parent first", in: "../x"},
		{name: "parent inside", in: "a/../b"},
		{name: "parent last", in: "a/.."},
		{name: "encoded parent lower", in: "%2e%2e/x"},
		{name: "encoded parent upper", in: "%2E%2E/x"},
		{name: "encoded parent mixed", in: "%2E%2e/x"},
		{name: "half encoded parent", in: ".%2e/x"},
		{name: "encoded slash", in: "..%2fx"},
		{name: "encoded slash upper", in: "a/..%2Fx"},
		{name: "encoded backslash", in: "..%5cx"},
		{name: "all encoded", in: "%2e%2e%2f%2e%2e%2fetc"},
		{name: "encoded absolute", in: "%2fetc/passwd"},
		{name: "double encoded", in: "%252e%252e/x"},
		{name: "overlong dot", in: "%c0%ae%c0%ae/x"},
		{name: "encoded NUL", in: "a%00b"},
		{name: "NUL", in: "a\x00b"},
		{name: "newline", in: "a\nb"},
		{name: "invalid UTF-8", in: "a\xffb"},
		{name: "truncated UTF-8", in: "caf\xc3"},
		{name: "name over 255 bytes", in: "a/" + strings.Repeat("n", 256)},
		{name: "path over 1024 bytes", in: strings.Repeat(strings.Repeat("n", 200)+"/", 5) + strings.Repeat("x", 20)},
	}
	atLimit := strings.Repeat(strings.Repeat("n", 200)+"/", 5) + strings.Repeat("x", 19)
	cases = append(cases, struct{ name, in, want string }{"path of 1024 bytes", "./" + atLimit, atLimit})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CleanRelPath(tc.in)
			if tc.want == "" {
				if !errors.Is(err, ErrUnsafePath) {
					t.Fatalf("CleanRelPath(%q) = %q, %v; want ErrUnsafePath", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CleanRelPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestSafeJoin(t *testing.T) {
	root := t.TempDir()
	got, err := SafeJoin(root, "./a//b/")
	if err != nil || got != filepath.Join(root, "a", "b") {
		t.Fatalf("SafeJoin = %q, %v", got, err)
	}
	if _, err := SafeJoin(root, "a/../../x"); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("SafeJoin escape: %v", err)
	}
}

func FuzzCleanRelPath(f *testing.F) {
	for _, s := range []string{
		"SKILL.md", "a/b/c", "./a", "a//b/", "..", "../x", "a/../b", "/abs", `C:\x`, `a\b`,
		"%2e%2e/x", "%2E%2e%2fx", "%252e%252e", "%c0%ae", "a%00", "a\x00", "\xff", ".../x", "a/%2e/b",
		"references/été.md", "%", "%%2e%2e",
	} {
		f.Add(s)
	}
	root := filepath.FromSlash("/srv/root")
	f.Fuzz(func(t *testing.T, name string) {
		got, err := CleanRelPath(name)
		if err != nil {
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("error %v does not wrap ErrUnsafePath", err)
			}
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || filepath.IsAbs(got) {
			t.Fatalf("%q -> %q: empty or absolute", name, got)
		}
		if !utf8.ValidString(got) || strings.ContainsAny(got, "\\\x00") {
			t.Fatalf("%q -> %q: bad bytes", name, got)
		}
		for _, c := range strings.Split(got, "/") {
			if c == "" || c == "." || c == ".." {
				t.Fatalf("%q -> %q: component %q", name, got, c)
			}
		}
		if !filepath.IsLocal(got) {
			t.Fatalf("%q -> %q: not local", name, got)
		}
		joined := filepath.Join(root, got)
		if !strings.HasPrefix(joined, root+string(filepath.Separator)) {
			t.Fatalf("%q -> %q escapes %q as %q", name, got, root, joined)
		}
		// Percent-decoding the result must not open an escape either.
		dec := got
		for i := 0; i < 8; i++ {
			dec = PercentDecode(dec)
		}
		for _, c := range strings.FieldsFunc(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
			if c == ".." {
				t.Fatalf("%q -> %q decodes to %q", name, got, dec)
			}
		}
		again, err := CleanRelPath(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", name, got, again, err)
		}
	})
}
