package index

import (
	"context"
	"errors"
	"testing"

	"skillfs/skills"
	"skillfs/skills/diff"
)

// TestDiffStatsStoredOnceAndGoWithTheirVersions: a diffstat is stored
// once for a pair of stored versions, and goes when either version or the
// skill goes.
func TestDiffStatsStoredOnceAndGoWithTheirVersions(t *testing.T) {
	forEachBackend(t, testDiffStatsStoredOnceAndGoWithTheirVersions)
}

func testDiffStatsStoredOnceAndGoWithTheirVersions(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	s, _ := insertSkill(t, db, "pdf", "h1")
	for _, h := range []string{"h2", "h3"} {
		if err := db.AddVersion(ctx, s, testVersion("pdf", h)); err != nil {
			t.Fatal(err)
		}
	}
	st := diff.Stat{FilesChanged: 1, Insertions: 2, Deletions: 3, LinesUnknown: 1}
	k21, k32 := DiffStatKey{"h2", "h1"}, DiffStatKey{"h3", "h2"}
	for _, k := range []DiffStatKey{k21, k32} {
		if err := db.PutDiffStat(ctx, "pdf", k, st); err != nil {
			t.Fatal(err)
		}
	}
	// Stored once: a second stat for the same pair is not taken.
	if err := db.PutDiffStat(ctx, "pdf", k21, diff.Stat{FilesAdded: 9}); err != nil {
		t.Fatal(err)
	}
	got, err := db.DiffStats(ctx, "pdf")
	if err != nil || len(got) != 2 || got[k21] != st || got[k32] != st {
		t.Fatalf("stored %+v, %v", got, err)
	}
	if err := db.PutDiffStat(ctx, "pdf", DiffStatKey{"h3", "gone"}, st); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("a stat against an unknown version: %v", err)
	}
	// Forgetting h2 takes both stats that name it.
	if err := db.ForgetVersion(ctx, "pdf", "h2"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.DiffStats(ctx, "pdf"); err != nil || len(got) != 0 {
		t.Fatalf("after forgetting h2: %+v, %v", got, err)
	}
	if err := db.PutDiffStat(ctx, "pdf", DiffStatKey{"h3", "h1"}, st); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteSkill(ctx, "pdf"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.r.QueryRow("SELECT COUNT(*) FROM version_diffstats").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d stats left after the skill was deleted (%v)", n, err)
	}
}
