package index

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"
)

// contentTree writes a version's tree: a SKILL.md, a file of big bytes
// (spanning chunks when big is over ChunkSize), an executable, an empty
// file and an empty directory. It returns the directory and its hash.
func contentTree(t *testing.T, big int, tag string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, big)
	rand.NewChaCha8([32]byte{}).Read(data) // no two chunks alike, the same in every tree
	skilltest.WriteDir(t, dir, fstest.MapFS{
		"SKILL.md":       skilltest.File("---\nname: c\n---\n" + tag),
		"assets/big.bin": {Data: data},
		"run.sh":         skilltest.Executable("#!/bin/sh\n"),
		"empty":          skilltest.File(""),
		"nothing":        skilltest.Dir(),
	})
	hash, _, _, err := store.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, hash
}

func readContent(t *testing.T, dir string) []store.ContentFile {
	t.Helper()
	files, err := store.ReadContent(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// countRows counts the rows of a table.
func countRows(t *testing.T, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.r.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Content stored by one upload is written back, chunk by chunk, as the
// same tree; a file over the chunk size spans several chunks.
func TestContentRoundTrip(t *testing.T) { forEachBackend(t, testContentRoundTrip) }

func testContentRoundTrip(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	// Over a batch of chunks: stored in two transactions.
	dir, hash := contentTree(t, 5*ChunkSize+123, "a")
	meta := []byte(`{"format":1}`)
	if ok, err := db.HasContent(ctx, "c", hash); err != nil || ok {
		t.Fatalf("HasContent before any upload = %v, %v", ok, err)
	}
	if err := db.PutContent(ctx, "c", hash, meta, readContent(t, dir)); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.HasContent(ctx, "c", hash); err != nil || !ok {
		t.Fatalf("HasContent after the upload = %v, %v", ok, err)
	}
	m, err := db.ContentManifest(ctx, "c", hash)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "meta", string(m.Meta), string(meta))
	var paths []string
	for _, e := range m.Entries {
		paths = append(paths, e.Path)
		if e.Path == "assets/big.bin" && (len(e.Chunks) != 6 || e.Size != 5*ChunkSize+123) {
			t.Errorf("big file: %d bytes in %d chunks, want %d in 6", e.Size, len(e.Chunks), 5*ChunkSize+123)
		}
	}
	mustEqual(t, "paths", paths, []string{"SKILL.md", "assets", "assets/big.bin", "empty", "nothing", "run.sh"})
	out := t.TempDir()
	got, err := store.WriteContent(out, m.Entries, func(sum string) ([]byte, error) { return db.Chunk(ctx, sum) })
	if err != nil {
		t.Fatal(err)
	}
	if got != hash {
		t.Fatalf("content written back hashes to %s, want %s", got, hash)
	}
	if _, err := db.Chunk(ctx, "00"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Chunk of an unknown sum = %v, want ErrNotFound", err)
	}
	if _, err := db.ContentManifest(ctx, "c", "nope"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("ContentManifest of an unknown version = %v, want ErrNotFound", err)
	}
}

// A second upload of stored content reads nothing and changes nothing; a
// version sharing a file with another stores its chunks once.
func TestContentStoredOnce(t *testing.T) { forEachBackend(t, testContentStoredOnce) }

func testContentStoredOnce(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	dir, hash := contentTree(t, ChunkSize+1, "a")
	if err := db.PutContent(ctx, "c", hash, nil, readContent(t, dir)); err != nil {
		t.Fatal(err)
	}
	chunks := countRows(t, db, "content_chunks")
	unreadable := readContent(t, dir)
	for i := range unreadable {
		unreadable[i].Open = func() (io.ReadCloser, error) { return nil, errors.New("read again") }
	}
	if err := db.PutContent(ctx, "c", hash, nil, unreadable); err != nil {
		t.Fatalf("a second upload of stored content: %v", err)
	}
	// Another version: only its SKILL.md differs.
	dir2, hash2 := contentTree(t, ChunkSize+1, "b")
	if err := db.PutContent(ctx, "c", hash2, nil, readContent(t, dir2)); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, "content_chunks"); n != chunks+1 {
		t.Errorf("chunks after a version that changes one small file: %d, want %d", n, chunks+1)
	}
}

// Two hosts uploading one version at once both succeed, and it is stored
// once.
func TestContentUploadedTwiceAtOnce(t *testing.T) { forEachBackend(t, testContentUploadedTwiceAtOnce) }

func testContentUploadedTwiceAtOnce(t *testing.T, b backend) {
	ctx := context.Background()
	target := b.target(t)
	hosts := []*DB{openBare(t, target), openBare(t, target)}
	dir, hash := contentTree(t, 5*ChunkSize, "a")
	errs := make(chan error, len(hosts))
	for _, db := range hosts {
		go func() { errs <- db.PutContent(ctx, "c", hash, nil, readContent(t, dir)) }()
	}
	for range hosts {
		if err := <-errs; err != nil {
			t.Fatalf("an upload of the same version at the same time: %v", err)
		}
	}
	if n := countRows(t, hosts[0], "content_entries"); n != len(readContent(t, dir)) {
		t.Errorf("%d entries stored, want %d", n, len(readContent(t, dir)))
	}
	if n := countRows(t, hosts[0], "content_chunks"); n != 7 { // the big file's 5, SKILL.md's, run.sh's
		t.Errorf("%d chunks stored, want 7", n)
	}
}

// Content that does not hash to its version, or a listing out of order,
// is refused and leaves nothing stored.
func TestBadContentChangesNothing(t *testing.T) { forEachBackend(t, testBadContentChangesNothing) }

func testBadContentChangesNothing(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	dir, hash := contentTree(t, 100, "a")
	otherDir, _ := contentTree(t, 100, "b")
	swapped := readContent(t, dir)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	cases := map[string]struct {
		files []store.ContentFile
		want  error
	}{
		"other content":  {readContent(t, otherDir), skills.ErrDamaged},
		"out of order":   {swapped, skills.ErrInvalid},
		"escaping path":  {[]store.ContentFile{{Path: "../x", Dir: true}}, skills.ErrUnsafePath},
		"file unopened":  {[]store.ContentFile{{Path: "x"}}, skills.ErrInvalid},
		"one file short": {readContent(t, dir)[1:], skills.ErrDamaged},
	}
	for name, c := range cases {
		if err := db.PutContent(ctx, "c", hash, nil, c.files); !errors.Is(err, c.want) {
			t.Errorf("%s: PutContent = %v, want %v", name, err, c.want)
		}
	}
	for _, table := range []string{"content_versions", "content_entries", "content_parts", "content_chunks"} {
		if n := countRows(t, db, table); n != 0 {
			t.Errorf("%s holds %d rows after refused uploads", table, n)
		}
	}
}

// The versions whose content no host has stored are listed for upload.
func TestVersionsWithoutContent(t *testing.T) { forEachBackend(t, testVersionsWithoutContent) }

func testVersionsWithoutContent(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	dir, hash := contentTree(t, 10, "a")
	insertSkill(t, db, "c", hash)
	insertSkill(t, db, "d", "dd")
	list := func() []string {
		vs, err := db.VersionsWithoutContent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range vs {
			out = append(out, v.Slug+"/"+v.Hash)
		}
		return out
	}
	mustEqual(t, "before the upload", list(), []string{"c/" + hash, "d/dd"})
	if err := db.PutContent(ctx, "c", hash, nil, readContent(t, dir)); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "after the upload", list(), []string{"d/dd"})
}
