package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"skillfs/fs/readbench"
	"skillfs/skills/skilltest"
)

// BenchmarkRead runs the read cases (package readbench) on a session's
// mount served by the daemon and on a projection of the same session, a
// `cp -a` copy of its skills in a plain folder, in the same run.
func BenchmarkRead(b *testing.B) {
	e := newEnv(b)
	e.serve()
	src := filepath.Join(b.TempDir(), "src")
	var slugs []string
	for slug, files := range readbench.Fixture() {
		skilltest.WriteDir(b, filepath.Join(src, "skills", slug), files)
		slugs = append(slugs, slug)
	}
	e.ok("skill", "import", src, "--all", "--share", "global")
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", strings.Join(slugs, ","))
	store := map[string]string{}
	for _, slug := range slugs {
		var show struct {
			Path string `json:"path"`
		}
		e.okJSON(&show, "skill", "show", slug)
		store[slug] = show.Path
	}
	projection := readbench.Project(b, s.Path)
	readbench.Run(b, readbench.Side{
		Name: "mount",
		Dir:  s.Path,
		Backing: func(rel string) string {
			slug, name, _ := strings.Cut(rel, "/")
			return filepath.Join(store[slug], filepath.FromSlash(name))
		},
	}, readbench.Side{Name: "projection", Dir: projection})
}
