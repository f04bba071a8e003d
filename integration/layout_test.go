package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// layers is how the packages stack, bottom first: a package's code imports
// only packages of lower layers. Every package of the module has a place
// here, so a new one is placed on purpose.
var layers = [][]string{
	{"skills"}, // the domain: types, error kinds, limits, path and file rules
	{"skills/manifest", "skills/git", "skills/diff"},
	{"skills/store", "skills/source"},
	{"index", "policy", "fs", "fs/bind", "fs/keeper"},
	{"cmd/skillfs/api", "cmd/skillfs/internal/catalog/confine", "cmd/skillfs/internal/catalog/datadir", "cmd/skillfs/internal/activation",
		"cmd/skillfs/internal/sandbox", "cmd/skillfs-csi/internal/claims"},
	{"cmd/skillfs/internal/events", "cmd/skillfs/internal/catalog/content", "cmd/skillfs-csi/internal/node"},
	{"cmd/skillfs/internal/catalog", "cmd/skillfs-csi"},
	{"cmd/skillfs/internal/server"},
	{"cmd/skillfs/internal/daemon"},
	{"cmd/skillfs", "cmd/skillfs-csi/deploy"},
}

// foundations are the packages everything else stands on, with all they
// may depend on, directly or not: the SQL layer links no importer or
// archive reader (the git package for its rules of what may be stored:
// no credentials), the rules and the filesystem only the domain.
var foundations = map[string][]string{
	"index":   {"skills", "skills/git", "skills/diff", "skills/store"},
	"policy":  {"skills"},
	"fs":      {"skills"},
	"fs/bind": {"skills"},
	// The keeper stands alone: a process holding descriptors for others
	// links nothing of what it holds them for.
	"fs/keeper": {},
	// The CSI plugin's policy stands on nothing of the module.
	"cmd/skillfs-csi/internal/claims": {},
}

// testHelpers are imported by tests alone; each stands on the layers below
// the one given.
var testHelpers = map[string]int{
	"skills/skilltest":        0,
	"skills/gittest":          0,
	"fs/fusetest":             0,
	"fs/bind/sandboxtest":     0,
	"fs/readbench":            0,
	"index/pgtest":            0,
	"cmd/skillfs/api/apitest": 5,
	"cmd/skillfs/internal/activation/activationtest": 4,
	"integration": len(layers),
}

type listedPackage struct {
	ImportPath string
	Name       string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, "skillfs/")
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestPackageLayering keeps the dependency graph the way the packages are
// meant to stack (see layers): nothing imports a package above it or
// beside it, test helpers are imported by tests alone, and nothing
// imports cmd (outside cmd) or integration.
func TestPackageLayering(t *testing.T) {
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layer[p] = i
		}
	}
	for _, p := range listPackages(t) {
		own, placed := layer[p.ImportPath]
		if h, ok := testHelpers[p.ImportPath]; ok {
			own, placed = h, true
		}
		if !placed {
			t.Errorf("%s has no place in layers (integration/layout_test.go)", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			d, ok := strings.CutPrefix(imp, "skillfs/")
			if !ok {
				continue
			}
			if _, helper := testHelpers[d]; helper {
				if _, isHelper := testHelpers[p.ImportPath]; !isHelper {
					t.Errorf("%s imports %s, a helper of tests", p.ImportPath, d)
				}
				continue
			}
			if layer[d] >= own {
				t.Errorf("%s (layer %d) imports %s (layer %d): only lower layers", p.ImportPath, own, d, layer[d])
			}
		}
		for _, dep := range p.Deps {
			d, ok := strings.CutPrefix(dep, "skillfs/")
			if !ok {
				continue
			}
			if may, ok := foundations[p.ImportPath]; ok && !slices.Contains(may, d) {
				t.Errorf("%s depends on %s: it may depend on %v alone", p.ImportPath, d, may)
			}
			if strings.HasPrefix(d, "integration") || (strings.HasPrefix(d, "cmd/") && !strings.HasPrefix(p.ImportPath, "cmd/")) {
				t.Errorf("%s depends on %s", p.ImportPath, d)
			}
		}
	}
}

// TestLayoutDocumented: the README's "Layout of the code" names every
// package of the module once, and none that does not exist.
func TestLayoutDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Layout of the code\n")
	if !ok {
		t.Fatal(`README has no "## Layout of the code"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	var pkgs []string
	for _, p := range listPackages(t) {
		pkgs = append(pkgs, p.ImportPath)
	}
	for _, p := range pkgs {
		if n := count(documented, p); n != 1 {
			t.Errorf("package %s is in the README's layout %d times, want once", p, n)
		}
	}
	for _, d := range documented {
		if d != "scripts" && !slices.Contains(pkgs, d) {
			t.Errorf("the README's layout names %s, which is not a package", d)
		}
	}
}

func count(l []string, s string) int {
	n := 0
	for _, x := range l {
		if x == s {
			n++
		}
	}
	return n
}

// TestCSIPluginApart: gRPC is the CSI plugin's alone (the daemon and the
// CLI link none of it), and the plugin builds without cgo (it talks to the
// daemon over its socket, it links no SQLite).
func TestCSIPluginApart(t *testing.T) {
	deps := func(env []string, pkg string) []string {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, d := range deps(nil, "../cmd/skillfs") {
		if strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "github.com/container-storage-interface/") {
			t.Errorf("skillfs depends on %s: gRPC and CSI belong to skillfs-csi", d)
		}
	}
	plugin := deps([]string{"CGO_ENABLED=0"}, "../cmd/skillfs-csi")
	for _, d := range plugin {
		if d == "runtime/cgo" || strings.HasPrefix(d, "github.com/mattn/go-sqlite3") || strings.HasPrefix(d, "skillfs/cmd/skillfs/internal/") {
			t.Errorf("skillfs-csi depends on %s: it must build without cgo, apart from the daemon", d)
		}
	}
	if !slices.Contains(plugin, "google.golang.org/grpc") {
		t.Error("skillfs-csi does not depend on gRPC: the check above would prove nothing")
	}
	build := exec.Command("go", "build", "-o", os.DevNull, "../cmd/skillfs-csi")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/skillfs-csi: %v\n%s", err, out)
	}
}
