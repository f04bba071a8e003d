package integration

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPackageLayering keeps the dependency graph the way the packages are
// meant to stack: the domain package skills at the bottom, its subpackages
// on it (each importing only those below it: manifest and git under source),
// index and policy on those, fs on skills alone, everything wired in cmd;
// nothing imports cmd or integration.
func TestPackageLayering(t *testing.T) {
	skillsAll := []string{"skillfs/skills", "skillfs/skills/manifest", "skillfs/skills/git",
		"skillfs/skills/source", "skillfs/skills/store", "skillfs/skills/diff"}
	allowed := map[string][]string{
		"skillfs/skills":          {},
		"skillfs/skills/manifest": {"skillfs/skills"},
		"skillfs/skills/git":      {"skillfs/skills"},
		"skillfs/skills/source":   {"skillfs/skills", "skillfs/skills/manifest", "skillfs/skills/git"},
		"skillfs/skills/store":    {"skillfs/skills", "skillfs/skills/manifest"},
		"skillfs/skills/diff":     {"skillfs/skills"},
		"skillfs/skills/gittest":  {},
		"skillfs/index":           skillsAll,
		"skillfs/policy":          skillsAll,
		"skillfs/fs":              {"skillfs/skills"},
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, deps := f[0], f[1:]
		for _, d := range deps {
			if !strings.HasPrefix(d, "skillfs/") {
				continue
			}
			if strings.HasPrefix(d, "skillfs/integration") || (strings.HasPrefix(d, "skillfs/cmd") && !strings.HasPrefix(pkg, "skillfs/cmd")) {
				t.Errorf("%s imports %s", pkg, d)
			}
			if ok, known := allowed[pkg]; known && !slices.Contains(ok, d) {
				t.Errorf("%s may import only %v, but imports %s", pkg, ok, d)
			}
		}
	}
}
