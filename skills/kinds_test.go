package skills

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// sentinelNames lists the package-level Err* variables the package's
// source declares, read from the source so that a new sentinel cannot be
// left out of the table unnoticed.
func sentinelNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("found no sentinel errors in the package source")
	}
	return names
}

// TestKindsCoverEverySentinel: every sentinel error the package declares
// has exactly one row in Kinds, and each row is one of them.
func TestKindsCoverEverySentinel(t *testing.T) {
	byName := map[string]error{
		"ErrNotFound": ErrNotFound, "ErrExists": ErrExists, "ErrInvalidManifest": ErrInvalidManifest,
		"ErrUnsafePath": ErrUnsafePath, "ErrSpecialFile": ErrSpecialFile, "ErrLimit": ErrLimit,
		"ErrNoManifest": ErrNoManifest, "ErrAmbiguous": ErrAmbiguous, "ErrAmbiguousVersion": ErrAmbiguousVersion, "ErrPermission": ErrPermission,
		"ErrInvalid": ErrInvalid, "ErrDependency": ErrDependency, "ErrDamaged": ErrDamaged, "ErrUnavailable": ErrUnavailable,
		"ErrElsewhere": ErrElsewhere, "ErrBusy": ErrBusy,
	}
	names := sentinelNames(t)
	for _, n := range names {
		if _, ok := byName[n]; !ok {
			t.Errorf("sentinel %s is declared but this test does not know it: add it to byName and to Kinds", n)
		}
	}
	if len(names) != len(byName) {
		t.Errorf("the source declares %d sentinels %v, the test knows %d", len(names), names, len(byName))
	}
	for name, e := range byName {
		n := 0
		for _, row := range Kinds {
			if row.Err == e {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s has %d rows in Kinds, want 1", name, n)
		}
		k, ok := KindOf(fmt.Errorf("context: %w", e))
		if !ok || k.Exit <= 1 || k.HTTP < 400 || k.Errno == 0 || k.Name == "" {
			t.Errorf("KindOf(%s) = %+v, %v", name, k, ok)
		}
	}
	if len(Kinds) != len(byName) {
		t.Errorf("Kinds has %d rows for %d sentinels", len(Kinds), len(byName))
	}
}

// TestClasses: every class has its own exit code, name and meaning, and
// each class's API code turns back into an error of that class.
func TestClasses(t *testing.T) {
	exits, names := map[int]bool{}, map[string]bool{}
	for i, c := range Classes {
		if exits[c.Exit] || names[c.Name] || c.Meaning == "" || c.HTTP < 400 {
			t.Errorf("class %+v: a reused exit code or name, or no meaning or status", c)
		}
		if i > 0 && Classes[i-1].Exit >= c.Exit {
			t.Errorf("Classes out of exit-code order at %s", c.Name)
		}
		exits[c.Exit], names[c.Name] = true, true
		if c == ClassInternal {
			if CodeError(c.Name) != nil {
				t.Errorf("CodeError(%q) names a sentinel", c.Name)
			}
			continue
		}
		back := CodeError(c.Name)
		if k, _ := KindOf(back); k.Name != c.Name || k.Exit != c.Exit || k.HTTP != c.HTTP {
			t.Errorf("CodeError(%q) = %v, of kind %+v", c.Name, back, k)
		}
	}
	for _, row := range Kinds {
		if !names[row.Class.Name] {
			t.Errorf("%v: class %q is not in Classes", row.Err, row.Class.Name)
		}
	}
}

func TestKindOf(t *testing.T) {
	cases := []struct {
		err  error
		want Kind
		ok   bool
	}{
		{nil, Kind{}, true},
		{fmt.Errorf("find skill: %w", ErrNotFound), Kind{"not_found", 3, http.StatusNotFound, syscall.ENOENT}, true},
		{ErrAmbiguous, Kind{"conflict", 6, http.StatusConflict, syscall.EIO}, true},
		{ErrAmbiguousVersion, Kind{"conflict", 6, http.StatusConflict, syscall.EIO}, true},
		{ErrElsewhere, Kind{"conflict", 6, http.StatusConflict, syscall.EREMOTE}, true},
		{ErrLimit, Kind{"invalid", 5, http.StatusBadRequest, syscall.EFBIG}, true},
		{ErrUnsafePath, Kind{"invalid", 5, http.StatusBadRequest, syscall.EACCES}, true},
		// A damaged data directory wins over what failed because of it.
		{errors.Join(ErrNotFound, ErrDamaged), Kind{"damaged", 8, http.StatusServiceUnavailable, syscall.EIO}, true},
		{errors.New("disk on fire"), Kind{"internal", 1, http.StatusInternalServerError, syscall.EIO}, false},
	}
	for _, tc := range cases {
		if k, ok := KindOf(tc.err); k != tc.want || ok != tc.ok {
			t.Errorf("KindOf(%v) = %+v, %v; want %+v, %v", tc.err, k, ok, tc.want, tc.ok)
		}
	}
	if CodeError("conflict") != ErrExists || CodeError("invalid") != ErrInvalid || CodeError("nonsense") != nil {
		t.Error("CodeError does not turn codes into their classes' first sentinels")
	}
}

// An error of the unavailable kind is reported as such, once, whatever a
// driver's words in it; others keep their message.
func TestMessageOfUnavailable(t *testing.T) {
	err := fmt.Errorf("create session: dial tcp 10.0.0.5:5432: connection refused: %w", ErrUnavailable)
	msg := Message(err)
	if !strings.HasPrefix(msg, UnavailableSays+": ") || !strings.HasSuffix(msg, err.Error()) {
		t.Fatalf("Message = %q", msg)
	}
	if again := Message(fmt.Errorf("%s: %w", msg, ErrUnavailable)); strings.Count(again, UnavailableSays) != 1 {
		t.Fatalf("a message that says it already: %q", again)
	}
	other := fmt.Errorf("no skill x: %w", ErrNotFound)
	if Message(other) != other.Error() {
		t.Fatalf("Message of another kind = %q", Message(other))
	}
}
