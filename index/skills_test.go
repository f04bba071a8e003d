package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skillfs/skills"
)

func TestInsertSkillRoundTrip(t *testing.T) { forEachBackend(t, testInsertSkillRoundTrip) }

func testInsertSkillRoundTrip(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	s, v := testSkill("pdf"), testVersion("pdf", "h1")
	s.Version = "ignored: the first version becomes current"
	if err := db.InsertSkill(ctx, s, v); err != nil {
		t.Fatal(err)
	}
	got, err := db.Skill(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	want := *s
	want.Version = "h1"
	mustEqual(t, "skill", got, &want)

	gotV, err := db.Version(ctx, "pdf", "h1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "version", gotV, v)
}

func TestInsertSkillStoresEmptyListsAndZeroValues(t *testing.T) {
	forEachBackend(t, testInsertSkillStoresEmptyListsAndZeroValues)
}

func testInsertSkillStoresEmptyListsAndZeroValues(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	s := &skills.Skill{Slug: "bare", SourceType: skills.SourceBuiltin}
	v := &skills.Version{Hash: "h", SourceType: skills.SourceBuiltin} // Slug may be left empty
	if err := db.InsertSkill(ctx, s, v); err != nil {
		t.Fatal(err)
	}
	got, err := db.Skill(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	want := &skills.Skill{Slug: "bare", SourceType: skills.SourceBuiltin, Version: "h",
		SkillDependencies: []string{}, ToolDependencies: []string{}, MCPDependencies: []string{}}
	mustEqual(t, "bare skill", got, want)
	var sd, share string
	if err := db.r.QueryRow("SELECT skill_deps, share FROM skills WHERE slug = 'bare'").Scan(&sd, &share); err != nil {
		t.Fatal(err)
	}
	if sd != "[]" {
		t.Errorf("stored nil list as %s, want []", sd)
	}
	if share != `{"read":{"kind":""},"manage":{"kind":""}}` {
		t.Errorf("stored zero share as %s", share)
	}
	gotV, err := db.Version(ctx, "bare", "h")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "bare version", gotV, &skills.Version{Slug: "bare", Hash: "h", Path: "store/skills/bare/h", SourceType: skills.SourceBuiltin})
}

func TestInsertSkillErrors(t *testing.T) { forEachBackend(t, testInsertSkillErrors) }

func testInsertSkillErrors(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	insertSkill(t, db, "taken", "h1")
	for _, tc := range []struct {
		name   string
		mutate func(*skills.Skill, *skills.Version)
		want   error
	}{
		{"slug taken", func(s *skills.Skill, v *skills.Version) { s.Slug, v.Slug = "taken", "taken" }, skills.ErrExists},
		{"empty slug", func(s *skills.Skill, v *skills.Version) { s.Slug, v.Slug = "", "" }, skills.ErrInvalid},
		{"bad source type", func(s *skills.Skill, _ *skills.Version) { s.SourceType = "ftp" }, skills.ErrInvalid},
		{"bad version source type", func(_ *skills.Skill, v *skills.Version) { v.SourceType = "" }, skills.ErrInvalid},
		{"version of another slug", func(_ *skills.Skill, v *skills.Version) { v.Slug = "other" }, skills.ErrInvalid},
		{"no hash", func(_ *skills.Skill, v *skills.Version) { v.Hash = "" }, skills.ErrInvalid},
		{"negative bytes", func(_ *skills.Skill, v *skills.Version) { v.Bytes = -1 }, skills.ErrInvalid},
		{"invalid UTF-8 dependency", func(s *skills.Skill, _ *skills.Version) { s.ToolDependencies = []string{"\xff"} }, skills.ErrInvalid},
		{"time out of range", func(s *skills.Skill, _ *skills.Version) { s.CreatedAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) }, skills.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, v := testSkill("new"), testVersion("new", "h9")
			tc.mutate(s, v)
			wantErr(t, "InsertSkill", db.InsertSkill(ctx, s, v), tc.want)
			if _, err := db.Skill(ctx, "new"); !errors.Is(err, skills.ErrNotFound) {
				t.Fatalf("failed insert left a row: %v", err)
			}
		})
	}
	wantErr(t, "nil version", db.InsertSkill(ctx, testSkill("x"), nil), skills.ErrInvalid)
	wantErr(t, "nil skill", db.InsertSkill(ctx, nil, testVersion("x", "h")), skills.ErrInvalid)
	// The loser of "slug taken" did not touch the winner.
	vs, err := db.Versions(ctx, "taken")
	if err != nil || len(vs) != 1 || vs[0].Hash != "h1" {
		t.Fatalf("versions of taken = %v, %v", vs, err)
	}
}

func TestAddVersion(t *testing.T) { forEachBackend(t, testAddVersion) }

func testAddVersion(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	s, v1 := insertSkill(t, db, "pdf", "h1")

	s.Name, s.Description = "PDF tools", "Reads PDFs."
	s.SkillDependencies, s.ToolDependencies, s.MCPDependencies = []string{"x"}, nil, []string{"m"}
	s.Source = "uploads/pdf-2.zip"
	s.UpdatedAt = t0.Add(time.Hour)
	// Not the version's business: must not be stored.
	s.Enabled = false
	s.Share = skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
	s.Creator = "mallory"
	s.CreatedAt = t0.Add(-time.Hour)

	v2 := testVersion("pdf", "h2")
	v2.Previous, v2.InstalledAt, v2.Files = "h1", t0.Add(time.Hour), 9
	if err := db.AddVersion(ctx, s, v2); err != nil {
		t.Fatal(err)
	}
	got, err := db.Skill(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	want := testSkill("pdf")
	want.Version = "h2"
	want.Name, want.Description = "PDF tools", "Reads PDFs."
	want.SkillDependencies, want.ToolDependencies, want.MCPDependencies = []string{"x"}, []string{}, []string{"m"}
	want.Source = "uploads/pdf-2.zip"
	want.UpdatedAt = t0.Add(time.Hour)
	mustEqual(t, "skill after AddVersion", got, want)

	vs, err := db.Versions(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "versions newest first", vs, []*skills.Version{v2, v1})

	// Going back to a stored hash makes it current without a duplicate row.
	if err := db.AddVersion(ctx, s, testVersion("pdf", "h1")); err != nil {
		t.Fatal(err)
	}
	got, err = db.Skill(ctx, "pdf")
	if err != nil || got.Version != "h1" {
		t.Fatalf("current after re-adding h1 = %+v, %v", got, err)
	}
	vs, err = db.Versions(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "versions after re-adding h1", vs, []*skills.Version{v2, v1})

	wantErr(t, "AddVersion to missing slug", db.AddVersion(ctx, testSkill("nope"), testVersion("nope", "h")), skills.ErrNotFound)
	if _, err := db.Version(ctx, "nope", "h"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("AddVersion to a missing slug stored a version: %v", err)
	}
	wantErr(t, "AddVersion invalid", db.AddVersion(ctx, s, testVersion("other", "h3")), skills.ErrInvalid)
}

func TestSkillsSortedAndLookupErrors(t *testing.T) {
	forEachBackend(t, testSkillsSortedAndLookupErrors)
}

func testSkillsSortedAndLookupErrors(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	list, err := db.Skills(ctx)
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("Skills on empty index = %#v, %v; want empty non-nil", list, err)
	}
	for _, slug := range []string{"zeta", "alpha", "mid"} {
		insertSkill(t, db, slug, "h-"+slug)
	}
	list, err = db.Skills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, s := range list {
		slugs = append(slugs, s.Slug)
	}
	mustEqual(t, "slugs", slugs, []string{"alpha", "mid", "zeta"})

	_, err = db.Skill(ctx, "missing")
	wantErr(t, "Skill", err, skills.ErrNotFound)
	_, err = db.Versions(ctx, "missing")
	wantErr(t, "Versions", err, skills.ErrNotFound)
	_, err = db.Version(ctx, "alpha", "h-zeta")
	wantErr(t, "Version of another skill's hash", err, skills.ErrNotFound)
	_, err = db.DeleteSkill(ctx, "missing")
	wantErr(t, "DeleteSkill", err, skills.ErrNotFound)
	_, err = db.UpdateSkill(ctx, "missing", func(*skills.Skill) error { return nil })
	wantErr(t, "UpdateSkill", err, skills.ErrNotFound)
}

func TestUpdateSkill(t *testing.T) { forEachBackend(t, testUpdateSkill) }

func testUpdateSkill(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	insertSkill(t, db, "pdf", "h1")
	now := t0.Add(24 * time.Hour)
	db.now = func() time.Time { return now }

	share := skills.Share{
		Read:   skills.Scope{Kind: skills.ScopeGlobal},
		Manage: skills.Scope{Kind: skills.ScopeDepartment, IDs: []string{"ops"}},
	}
	got, err := db.UpdateSkill(ctx, "pdf", func(s *skills.Skill) error {
		s.Share = share
		s.Enabled = false
		s.Name, s.Description = "New name", "New description"
		s.SkillDependencies, s.ToolDependencies, s.MCPDependencies = nil, []string{"rg"}, []string{"fs"}
		// Ignored: identity, provenance and current version are not fn's to change.
		s.Slug, s.Version, s.Creator, s.Source = "renamed", "h-other", "mallory", "elsewhere"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := testSkill("pdf")
	want.Version = "h1"
	want.Share, want.Enabled = share, false
	want.Name, want.Description = "New name", "New description"
	want.SkillDependencies, want.ToolDependencies, want.MCPDependencies = []string{}, []string{"rg"}, []string{"fs"}
	want.UpdatedAt = now
	mustEqual(t, "returned skill", got, want)
	stored, err := db.Skill(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "stored skill", stored, want)
	if _, err := db.Skill(ctx, "renamed"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("UpdateSkill renamed the skill: %v", err)
	}
}

func TestUpdateSkillAbortLeavesRowUnchanged(t *testing.T) {
	forEachBackend(t, testUpdateSkillAbortLeavesRowUnchanged)
}

func testUpdateSkillAbortLeavesRowUnchanged(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	insertSkill(t, db, "pdf", "h1")
	before, err := db.Skill(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	errVeto := errors.New("veto")
	for _, tc := range []struct {
		name string
		fn   func(*skills.Skill) error
		want error
	}{
		{"fn error returned as is", func(s *skills.Skill) error { s.Name, s.Enabled = "changed", false; return errVeto }, errVeto},
		{"invalid result", func(s *skills.Skill) error { s.Name = "changed"; s.SkillDependencies = []string{"\xfe"}; return nil }, skills.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.UpdateSkill(ctx, "pdf", tc.fn)
			wantErr(t, "UpdateSkill", err, tc.want)
			after, err := db.Skill(ctx, "pdf")
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "row after aborted update", after, before)
		})
	}
	t.Run("panic releases the writer", func(t *testing.T) {
		func() {
			defer func() { _ = recover() }()
			db.UpdateSkill(ctx, "pdf", func(s *skills.Skill) error { s.Name = "changed"; panic("boom") })
		}()
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := db.AddTool(tctx, "after-panic"); err != nil {
			t.Fatalf("writer still held after panic: %v", err)
		}
		after, err := db.Skill(ctx, "pdf")
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "row after panic", after, before)
	})
}

// TestUpdateSkillIsAtomicAcrossHandles appends to a list from several
// goroutines on two handles of the same file, as two daemons would; a
// read-modify-write that was not one transaction would lose entries.
func TestUpdateSkillIsAtomicAcrossHandles(t *testing.T) {
	forEachBackend(t, testUpdateSkillIsAtomicAcrossHandles)
}

func testUpdateSkillIsAtomicAcrossHandles(t *testing.T, b backend) {
	path := b.target(t)
	dbs := []*DB{openAt(t, path), openAt(t, path)}
	ctx := context.Background()
	insertSkill(t, dbs[0], "shared", "h1")
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, len(dbs)*workers)
	for d, db := range dbs {
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					_, err := db.UpdateSkill(ctx, "shared", func(s *skills.Skill) error {
						s.ToolDependencies = append(s.ToolDependencies, fmt.Sprintf("t%d-%d-%d", d, w, i))
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, err := dbs[1].Skill(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	deps := slices.Clone(s.ToolDependencies)
	slices.Sort(deps)
	deps = slices.Compact(deps)
	// testSkill starts with git and jq.
	if want := len(dbs)*workers*each + 2; len(s.ToolDependencies) != want || len(deps) != want {
		t.Fatalf("%d entries (%d distinct), want %d", len(s.ToolDependencies), len(deps), want)
	}
}

// TestInsertSkillRace races InsertSkill for one slug from goroutines on two
// handles of one file: exactly one wins, the rest get ErrExists, and the
// stored skill is entirely the winner's.
func TestInsertSkillRace(t *testing.T) { forEachBackend(t, testInsertSkillRace) }

func testInsertSkillRace(t *testing.T, b backend) {
	path := b.target(t)
	dbs := []*DB{openAt(t, path), openAt(t, path)}
	ctx := context.Background()
	const rounds, perHandle = 10, 4
	for r := range rounds {
		slug := fmt.Sprintf("race-%d", r)
		start := make(chan struct{})
		type result struct {
			hash string
			err  error
		}
		results := make(chan result, len(dbs)*perHandle)
		var wg sync.WaitGroup
		for d, db := range dbs {
			for g := range perHandle {
				wg.Go(func() {
					hash := fmt.Sprintf("h-%d-%d", d, g)
					s, v := testSkill(slug), testVersion(slug, hash)
					s.Creator = hash
					<-start
					results <- result{hash, db.InsertSkill(ctx, s, v)}
				})
			}
		}
		close(start)
		wg.Wait()
		close(results)
		winner := ""
		for res := range results {
			switch {
			case res.err == nil && winner == "":
				winner = res.hash
			case res.err == nil:
				t.Fatalf("round %d: both %s and %s won", r, winner, res.hash)
			case !errors.Is(res.err, skills.ErrExists):
				t.Fatalf("round %d: loser %s got %v, want ErrExists", r, res.hash, res.err)
			}
		}
		if winner == "" {
			t.Fatalf("round %d: nobody won", r)
		}
		s, err := dbs[r%2].Skill(ctx, slug)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := dbs[r%2].Versions(ctx, slug)
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != winner || s.Creator != winner || len(vs) != 1 || vs[0].Hash != winner {
			t.Fatalf("round %d: stored %s by %s with %d versions, want only %s", r, s.Version, s.Creator, len(vs), winner)
		}
	}
}

func TestDeleteSkillCascades(t *testing.T) { forEachBackend(t, testDeleteSkillCascades) }

func testDeleteSkillCascades(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	_, v1 := insertSkill(t, db, "gone", "h1")
	s := testSkill("gone")
	v2 := testVersion("gone", "h2")
	if err := db.AddVersion(ctx, s, v2); err != nil {
		t.Fatal(err)
	}
	_, kept := insertSkill(t, db, "kept", "k1")
	sess := &skills.Session{ID: "s1", UID: "alice", CreatedAt: t0,
		Pins: []skills.Pin{{Slug: "kept", Version: "k1"}, {Slug: "gone", Version: "h1"}, {Slug: "other", Version: "o"}}}
	if err := db.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordActivation(ctx, "s1", "gone", t0); err != nil {
		t.Fatal(err)
	}

	deleted, err := db.DeleteSkill(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "deleted versions", deleted, []*skills.Version{v2, v1})

	if _, err := db.Skill(ctx, "gone"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("skill still there: %v", err)
	}
	var n int
	if err := db.r.QueryRow("SELECT COUNT(*) FROM versions WHERE slug = 'gone'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d version rows left, %v", n, err)
	}
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// Pins stay for the serving host to revoke (with its event).
	mustEqual(t, "pins after delete", got.Pins, []skills.Pin{{Slug: "kept", Version: "k1"}, {Slug: "gone", Version: "h1"}, {Slug: "other", Version: "o"}})
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Slug != "gone" {
		t.Fatalf("activation history after delete = %v, %v", acts, err)
	}
	all, err := db.AllVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "versions left", all, []*skills.Version{kept})

	// The slug is free again.
	insertSkill(t, db, "gone", "h3")
}

// AllVersions lists every version, each with a path relative to the data
// directory whatever path the caller passed in.
func TestAllVersions(t *testing.T) { forEachBackend(t, testAllVersions) }

func testAllVersions(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	all, err := db.AllVersions(ctx)
	if err != nil || len(all) != 0 {
		t.Fatalf("AllVersions on empty index = %v, %v", all, err)
	}
	s, v1 := insertSkill(t, db, "a", "h1")
	v2 := testVersion("a", "h2")
	v2.Path = "/somewhere/absolute/store/skills/a/h2"
	if err := db.AddVersion(ctx, s, v2); err != nil {
		t.Fatal(err)
	}
	_, v3 := insertSkill(t, db, "b", "h1")
	all, err = db.AllVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v2.Path = "store/skills/a/h2"
	mustEqual(t, "versions", all, []*skills.Version{v2, v1, v3})
}

// TestResolveVersion: a full hash or a unique prefix names a version; a
// prefix two versions share is ErrAmbiguousVersion naming them; no match,
// or no skill, is ErrNotFound.
func TestResolveVersion(t *testing.T) { forEachBackend(t, testResolveVersion) }

func testResolveVersion(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	s, _ := insertSkill(t, db, "pdf", "abcd1111")
	for _, h := range []string{"abcd2222", "abce3333"} {
		if err := db.AddVersion(ctx, s, testVersion("pdf", h)); err != nil {
			t.Fatal(err)
		}
	}
	insertSkill(t, db, "other", "abcf4444")
	for prefix, want := range map[string]string{"abcd1111": "abcd1111", "abcd2": "abcd2222", "abce": "abce3333"} {
		v, err := db.ResolveVersion(ctx, "pdf", prefix)
		if err != nil || v.Hash != want {
			t.Errorf("%s: %v, %v; want %s", prefix, v, err, want)
		}
	}
	_, err := db.ResolveVersion(ctx, "pdf", "abcd")
	if !errors.Is(err, skills.ErrAmbiguousVersion) || !strings.Contains(err.Error(), "abcd1111") || !strings.Contains(err.Error(), "abcd2222") {
		t.Errorf("shared prefix: %v", err)
	}
	for _, c := range [][2]string{{"pdf", "abcf"}, {"pdf", "ffff"}, {"nosuch", "abcd"}} {
		if _, err := db.ResolveVersion(ctx, c[0], c[1]); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("%s@%s: %v, want ErrNotFound", c[0], c[1], err)
		}
	}
}

// BenchmarkUpdateSkill is a catalog write: read the row, change it, write
// it back, in one transaction that waits its turn among the writers.
func BenchmarkUpdateSkill(b *testing.B) { benchEachBackend(b, benchUpdateSkill) }

func benchUpdateSkill(b *testing.B, be backend) {
	db := be.open(b)
	ctx := context.Background()
	insertSkill(b, db, "pdf", "h1")
	for b.Loop() {
		if _, err := db.UpdateSkill(ctx, "pdf", func(s *skills.Skill) error { s.Enabled = !s.Enabled; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
