package fs

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

func TestViewFSConfinement(t *testing.T) {
	st := newStore(t)
	fsys := NewViewFS(View{st.alpha1, st.beta1})
	cases := []struct {
		name string
		path string
		want error
	}{
		{"empty", "", iofs.ErrInvalid},
		{"absolute", "/alpha/SKILL.md", iofs.ErrInvalid},
		{"dot-dot", "../alpha/SKILL.md", iofs.ErrInvalid},
		{"inner dot-dot", "alpha/../beta/SKILL.md", iofs.ErrInvalid},
		{"inner dot", "alpha/./SKILL.md", iofs.ErrInvalid},
		{"double slash", "alpha//SKILL.md", iofs.ErrInvalid},
		{"trailing slash", "alpha/", iofs.ErrInvalid},
		{"backslash dot-dot", `alpha\..\delta`, iofs.ErrNotExist},
		{"percent dot-dot", "alpha/%2e%2e/delta", iofs.ErrNotExist},
		{"skill outside view", "delta/secret.txt", iofs.ErrNotExist},
		{"hidden file", "alpha/.skillfs-meta.json", iofs.ErrNotExist},
		{"hidden file deeper", "alpha/references/.skillfs-partial", iofs.ErrNotExist},
		{"file as directory", "alpha/SKILL.md/x", iofs.ErrNotExist},
		{"store path", strings.TrimPrefix(st.alpha1.Dir, "/") + "/SKILL.md", iofs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if f, err := fsys.Open(tc.path); !errors.Is(err, tc.want) {
				if err == nil {
					f.Close()
				}
				t.Errorf("open: err = %v, want %v", err, tc.want)
			}
			if _, err := iofs.Stat(fsys, tc.path); !errors.Is(err, tc.want) {
				t.Errorf("stat: err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestViewFSNames checks which slugs NewViewFS serves.
func TestViewFSNames(t *testing.T) {
	st := newStore(t)
	second := st.alpha2
	fsys := NewViewFS(View{
		st.beta1, st.alpha1, second, // duplicate: the first wins
		{Slug: "a/b", Dir: st.gamma1.Dir},
		{Slug: "..", Dir: st.gamma1.Dir},
		{Slug: ".skillfs", Dir: st.gamma1.Dir},
	})
	des, err := iofs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if !slices.Equal(names, []string{"alpha", "beta"}) {
		t.Errorf("root lists %q, want [alpha beta]", names)
	}
	if data, err := iofs.ReadFile(fsys, "alpha/SKILL.md"); err != nil || !strings.Contains(string(data), "version one") {
		t.Errorf("alpha/SKILL.md = %q, %v; want the first of the duplicates", data, err)
	}
}

// TestStoreTampering checks that entries a store should never hold are not
// served, and that a directory swapped for a symlink after the walk cannot
// lead a reader outside the version.
func TestStoreTampering(t *testing.T) {
	st := newStore(t)
	dir := writeVersion(t, filepath.Join(st.root, "omega", "o1"), fstest.MapFS{
		"SKILL.md":            skilltest.File(manifest("omega", "omega")),
		"references/guide.md": skilltest.File("omega guide\n"),
	})
	outside := writeVersion(t, filepath.Join(st.root, "outside"), fstest.MapFS{
		"guide.md": skilltest.File("must not be served\n"),
	})
	for name, target := range map[string]string{"link": "/etc/passwd", "up": "..", "ref": "references"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	omega := Skill{Slug: "omega", Version: "o1", Dir: dir}

	check := func(t *testing.T, fsys iofs.FS) {
		files, _ := walkAll(t, fsys)
		if want := []string{"omega/SKILL.md", "omega/references/guide.md"}; !slices.Equal(files, want) {
			t.Errorf("files = %q, want %q", files, want)
		}
		for _, p := range []string{"omega/link", "omega/up", "omega/ref/guide.md"} {
			if _, err := iofs.Stat(fsys, p); !errors.Is(err, iofs.ErrNotExist) {
				t.Errorf("stat %q: err = %v, want not exist", p, err)
			}
		}
	}
	t.Run("viewfs", func(t *testing.T) { check(t, NewViewFS(View{omega})) })
	t.Run("mount", func(t *testing.T) {
		srv := mountTest(t, Options{})
		check(t, os.DirFS(setSession(t, srv, "sess", View{omega})))
	})
	t.Run("swapped directory", func(t *testing.T) {
		fsys := NewViewFS(View{omega})
		if _, err := iofs.Stat(fsys, "omega/references/guide.md"); err != nil {
			t.Fatal(err) // walked now
		}
		refs := filepath.Join(dir, "references")
		if err := os.Rename(refs, refs+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, refs); err != nil {
			t.Fatal(err)
		}
		data, err := iofs.ReadFile(fsys, "omega/references/guide.md")
		if err == nil || strings.Contains(string(data), "must not") {
			t.Errorf("read through a swapped-in symlink: %q, %v", data, err)
		}
	})
}

// TestServerViewFS checks the in-process view of a live session follows
// revocation like the mount.
func TestServerViewFS(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	setSession(t, srv, "sess", View{st.alpha1, st.beta1})
	if _, err := srv.ViewFS("nope"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("view of unknown session: err = %v, want not found", err)
	}
	fsys, err := srv.ViewFS("sess")
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Open("alpha/references/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	setSession(t, srv, "sess", View{st.beta1})
	if _, err := io.ReadAll(f); !errors.Is(err, iofs.ErrPermission) {
		t.Errorf("read after revocation: err = %v, want permission", err)
	}
	if _, err := fsys.Open("alpha/SKILL.md"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("open after revocation: err = %v, want not exist", err)
	}
	if data, err := iofs.ReadFile(fsys, "beta/notes.txt"); err != nil || string(data) != "beta notes\n" {
		t.Errorf("unrevoked file: %q, %v", data, err)
	}
}

func FuzzViewFSOpen(f *testing.F) {
	for _, seed := range []string{
		".", "alpha", "alpha/SKILL.md", "alpha/references/guide.md", "../alpha", "alpha/../beta",
		"alpha/.skillfs-meta.json", "delta/secret.txt", "/etc/passwd", "alpha//x", "alpha/\x00", "beta/notes.txt",
	} {
		f.Add(seed)
	}
	st := newStore(f)
	view := View{st.alpha1, st.beta1}
	fsys := NewViewFS(view)
	f.Fuzz(func(t *testing.T, name string) {
		file, err := fsys.Open(name)
		if err != nil {
			return
		}
		defer file.Close()
		// Whatever opened must be a valid path of the view, not hidden, and
		// hold exactly the stored bytes.
		if !iofs.ValidPath(name) {
			t.Fatalf("opened invalid path %q", name)
		}
		if name == "." {
			return
		}
		slug, rest, _ := strings.Cut(name, "/")
		var sk *Skill
		for i := range view {
			if view[i].Slug == slug {
				sk = &view[i]
			}
		}
		if sk == nil {
			t.Fatalf("opened %q outside the view", name)
		}
		for part := range strings.SplitSeq(name, "/") {
			if strings.HasPrefix(part, HiddenPrefix) {
				t.Fatalf("opened hidden %q", name)
			}
		}
		fi, err := file.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			return
		}
		got, err := io.ReadAll(file)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(sk.Dir, filepath.FromSlash(rest)))
		if err != nil || string(got) != string(want) {
			t.Fatalf("%q served %q, store holds %q (%v)", name, got, want, err)
		}
	})
}
