package catalog

import (
	"context"
	"path/filepath"
	"testing"
)

// Installing a curated skill takes exactly the folder the curated list
// recorded: a folder name holding glob characters picks no other skill.
func TestInstallCuratedTakesItsFolderExactly(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	src := t.TempDir()
	skillDir(t, filepath.Join(src, "skills", "a*"), "name: star\ndescription: the star skill")
	skillDir(t, filepath.Join(src, "skills", "ab"), "name: ab\ndescription: the ab skill")
	skillDir(t, filepath.Join(src, "skills", "[a]"), "name: bracket\ndescription: the bracket skill")
	skillDir(t, filepath.Join(src, "skills", "a"), "name: plain-a\ndescription: the a skill")
	if _, err := c.AddCurated(ctx, CuratedRequest{Source: src}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"star": "star", "bracket": "bracket"} {
		res, err := c.InstallCurated(ctx, CuratedRequest{Name: name})
		if err != nil || len(res.Installed) != 1 || res.Installed[0].Slug != want {
			t.Fatalf("install-curated %s: %+v, %v; want %s alone", name, res, err, want)
		}
	}
	list, err := c.List(ctx, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("catalog after two curated installs: %d skills, %v", len(list), err)
	}
}
