package index

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"skillfs/skills"
)

// A curated source is registered with what it offers in one step, a
// refresh replaces what it offers, a failed one keeps it, and removing the
// source removes its offer.
func TestCuratedSources(t *testing.T) { forEachBackend(t, testCuratedSources) }

func testCuratedSources(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	src := skills.CuratedSource{Source: "https://h/o/r.git", Ref: "main", AddedBy: "op", AddedAt: at, Commit: "c1", RefreshedAt: at}
	offer := func(slugs ...string) []skills.CuratedSkill {
		var out []skills.CuratedSkill
		for _, s := range slugs {
			out = append(out, skills.CuratedSkill{Slug: s, Name: s, Description: "d " + s, Path: "skills/" + s, Origin: "git:https://h/o/r.git//skills/" + s})
		}
		return out
	}
	if err := db.AddCuratedSource(ctx, src, offer("b", "a")); err != nil {
		t.Fatal(err)
	}
	if err := db.AddCuratedSource(ctx, src, offer("c")); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("add again: %v, want ErrExists", err)
	}
	// Every user lists curated sources: one carrying credentials is refused.
	creds := src
	creds.Source = "https://bot:t0ken@h/o/r.git"
	if err := db.AddCuratedSource(ctx, creds, offer("c")); !errors.Is(err, skills.ErrInvalid) || strings.Contains(err.Error(), "t0ken") {
		t.Fatalf("add a source with credentials: %v, want ErrInvalid not showing them", err)
	}
	list, err := db.CuratedSkills(ctx)
	if err != nil || len(list) != 2 || list[0].Slug != "a" || list[0].Ref != "main" || list[0].Commit != "c1" || list[0].Origin == "" || !list[0].RefreshedAt.Equal(at) {
		t.Fatalf("curated skills = %+v, %v", list, err)
	}
	later := at.Add(time.Hour)
	if err := db.RefreshCuratedSource(ctx, src.Source, "c2", later, offer("c")); err != nil {
		t.Fatal(err)
	}
	if err := db.SetCuratedError(ctx, src.Source, "unreachable"); err != nil {
		t.Fatal(err)
	}
	srcs, err := db.CuratedSources(ctx)
	if err != nil || len(srcs) != 1 || srcs[0].Skills != 1 || srcs[0].Commit != "c2" || srcs[0].Error != "unreachable" || !srcs[0].RefreshedAt.Equal(later) {
		t.Fatalf("sources after refresh = %+v, %v", srcs, err)
	}
	if err := db.RefreshCuratedSource(ctx, "https://other", "c", later, offer("x")); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("refresh an unknown source: %v, want ErrNotFound", err)
	}
	if err := db.RemoveCuratedSource(ctx, src.Source); err != nil {
		t.Fatal(err)
	}
	if list, err := db.CuratedSkills(ctx); err != nil || len(list) != 0 {
		t.Errorf("offer after remove = %+v, %v", list, err)
	}
	if err := db.RemoveCuratedSource(ctx, src.Source); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("remove again: %v, want ErrNotFound", err)
	}
}
