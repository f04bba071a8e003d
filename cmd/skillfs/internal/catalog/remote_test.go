package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
	skillsource "skillfs/skills/source"
)

// A path that exists wins over the common name of a repository it looks
// like; a name that is no path is the repository.
func TestRemoteSourcePrecedence(t *testing.T) {
	t.Chdir(t.TempDir())
	if got := skillsource.ExpandName("acme/skills"); got != "https://github.com/acme/skills.git" {
		t.Errorf("acme/skills with no such folder = %q", got)
	}
	if got := skillsource.ExpandName("acme/skills/x#v1"); got != "https://github.com/acme/skills.git#v1:x" {
		t.Errorf("acme/skills/x#v1 = %q", got)
	}
	if err := os.MkdirAll(filepath.Join("acme", "skills"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"acme/skills", "./acme/skills", "./missing/repo", "/nonexistent/o/r"} {
		if got := skillsource.ExpandName(s); got != s {
			t.Errorf("ExpandName(%q) = %q, want the path as given", s, got)
		}
	}
	if got := curatedName("acme/skills", false); !filepath.IsAbs(got) {
		t.Errorf("an existing folder is registered as %q, want its absolute path", got)
	}
}

// Through the API, which has no working directory, nothing is looked up on
// disk: an absolute path is a path, a name is the repository even when a
// folder of that name exists where the daemon runs, and another relative
// path is refused, whether it exists or not.
func TestAPISourceIgnoresTheWorkingDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	skillDir(t, filepath.Join("acme", "skills"), "name: local\ndescription: LOCAL-FOLDER")
	skillDir(t, "plain", "name: plain\ndescription: LOCAL-FOLDER")
	for in, want := range map[string]string{
		"acme/skills":        "https://github.com/acme/skills.git",
		" acme/skills/x#v1 ": "https://github.com/acme/skills.git#v1:x",
		"/nonexistent/o/r":   "/nonexistent/o/r",
		"./acme/skills":      "./acme/skills",
		"plain":              "plain",
	} {
		if got := skillsource.ExpandNameNoWorkDir(in); got != want {
			t.Errorf("ExpandNameNoWorkDir(%q) = %q, want %q", in, got, want)
		}
	}
	if got := curatedName("acme/skills", true); got != "https://github.com/acme/skills.git" {
		t.Errorf("a curated name through the API = %q", got)
	}
	abs, _ := filepath.Abs("acme/skills")
	if got := curatedNames("acme/skills"); !slices.Equal(got, []string{"acme/skills", "https://github.com/acme/skills.git", abs}) {
		t.Errorf("curatedNames(acme/skills) = %q", got)
	}
	// No network: github.com is a closed port here.
	config := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(config, []byte("[url \"https://127.0.0.1:1/\"]\n\tinsteadOf = https://github.com/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	cwd, _ := os.Getwd()
	c := openWith(t, Options{ImportRoots: rootsOf(t, cwd)}) // its absolute paths may be read
	ctx := context.Background()
	for src, want := range map[string]error{
		"acme/skills":  skills.ErrNotFound, // the repository, not the folder
		"acme/missing": skills.ErrNotFound,
		"plain":        skills.ErrInvalid,
		"./plain":      skills.ErrInvalid,
		"missing.zip":  skills.ErrInvalid,
		"../x":         skills.ErrInvalid,
	} {
		d, err := c.Prepare(ctx, ImportRequest{Source: src, All: true, API: true})
		if !errors.Is(err, want) || d != nil {
			t.Errorf("Prepare(%q) through the API = %+v, %v; want %v", src, d, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "LOCAL-FOLDER") {
			t.Errorf("Prepare(%q): %v", src, err)
		}
	}
	abs, _ = filepath.Abs("plain")
	if d, err := c.Prepare(ctx, ImportRequest{Source: abs, All: true, API: true}); err != nil || len(d.Skills) != 1 {
		t.Errorf("Prepare of an absolute path through the API: %+v, %v", d, err)
	}
	// The command line has a working directory: the folder wins there.
	if d, err := c.Prepare(ctx, ImportRequest{Source: "acme/skills", All: true}); err != nil || len(d.Skills) != 1 || d.Skills[0].Description != "LOCAL-FOLDER" {
		t.Errorf("Prepare of an existing folder on the command line: %+v, %v", d, err)
	}
}
