package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"skillfs/skills"
)

func TestSQLiteFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.db")
	want := []string{p, p + "-wal", p + "-shm", p + "-journal", p + ".catalog-lock"}
	if got := SQLiteFiles(p); !slices.Equal(got, want) {
		t.Errorf("SQLiteFiles(%q) = %q, want %q", p, got, want)
	}
	for _, target := range []string{"", " ", "postgres://u:p@h/db", "postgresql://h/db"} {
		if got := SQLiteFiles(target); got != nil {
			t.Errorf("SQLiteFiles(%q) = %q, want none", target, got)
		}
	}
	// Through a symlinked directory, Files names the real path: the one
	// the kernel gives the driver's descriptors.
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	db, err := Open(filepath.Join(dir, "link", "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Files(); len(got) != len(sqliteSuffixes) || got[0] != filepath.Join(real, "index.db") {
		t.Errorf("Files() = %q, want the real path first", got)
	}
}

// CheckFiles tells when the -wal or -shm this process has open was removed
// or replaced under it, and only then: a fresh index, one reopened (SQLite
// made new files itself) are fine.
func TestCheckFiles(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, p string)
		removed []string
		changed []string
	}{
		{"nothing", func(*testing.T, string) {}, nil, nil},
		{"wal removed", func(t *testing.T, p string) { removeFile(t, p+"-wal") }, []string{"-wal"}, nil},
		{"wal and shm removed", func(t *testing.T, p string) { removeFile(t, p+"-wal"); removeFile(t, p+"-shm") }, []string{"-shm", "-wal"}, nil},
		{"shm replaced", func(t *testing.T, p string) { replaceFile(t, p+"-shm") }, nil, []string{"-shm"}},
		{"database replaced", func(t *testing.T, p string) { replaceFile(t, p) }, nil, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "index.db")
			db, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.PutUser(ctx, skills.User{UID: "alice", Role: skills.RoleUser}); err != nil {
				t.Fatal(err)
			}
			if err := db.CheckFiles(); err != nil {
				t.Fatalf("before: %v", err)
			}
			tc.damage(t, p)
			err = db.CheckFiles()
			if tc.removed == nil && tc.changed == nil {
				if err != nil {
					t.Fatalf("CheckFiles: %v, want nil", err)
				}
				return
			}
			var re *ReplacedError
			if !errors.As(err, &re) {
				t.Fatalf("CheckFiles: %v, want a *ReplacedError", err)
			}
			if !slices.Equal(re.Removed, suffixed(p, tc.removed)) || !slices.Equal(re.Replaced, suffixed(p, tc.changed)) {
				t.Errorf("CheckFiles: removed %q, replaced %q; want %q, %q", re.Removed, re.Replaced, suffixed(p, tc.removed), suffixed(p, tc.changed))
			}
		})
	}

	// Closed and opened again, the index has new -wal and -shm files that
	// SQLite made: nothing changed under anyone.
	p := filepath.Join(t.TempDir(), "index.db")
	db, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(p); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CheckFiles(); err != nil {
		t.Errorf("reopened: %v", err)
	}
}

func suffixed(p string, suffixes []string) []string {
	if suffixes == nil {
		return nil
	}
	out := make([]string, len(suffixes))
	for i, s := range suffixes {
		out[i] = p + s
	}
	return out
}

func removeFile(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// replaceFile puts a copy of the file at p in its place, as `cp x y && mv y x`
// would.
func replaceFile(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p+".new", []byte("another file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
}
