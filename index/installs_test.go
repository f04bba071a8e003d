package index

import (
	"context"
	"errors"
	"testing"
	"time"

	"skillfs/skills"
)

// TestInstalls: install records are kept per session in order, counted per
// user within a window (quota refusals left out), and a user's usage is the
// skills they created with the bytes of every version.
func TestInstalls(t *testing.T) { forEachBackend(t, testInstalls) }

func testInstalls(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	rec := func(at time.Time, user, session, outcome string) {
		t.Helper()
		in := &skills.Install{At: at, User: user, Session: session, Kind: skills.InstallPath, Source: "/workspace/demo",
			Slug: "demo", Version: "abc", Outcome: outcome}
		if err := db.RecordInstall(ctx, in); err != nil {
			t.Fatal(err)
		}
		if in.ID == 0 {
			t.Fatal("no id")
		}
	}
	rec(t0, "alice", "s1", skills.InstallOK)
	rec(t0.Add(time.Minute), "alice", "s1", "invalid")
	rec(t0.Add(2*time.Minute), "alice", "s2", "quota")
	rec(t0.Add(3*time.Minute), "bob", "s3", skills.InstallOK)
	list, err := db.Installs(ctx, "s1")
	if err != nil || len(list) != 2 || list[0].Outcome != skills.InstallOK || list[1].Outcome != "invalid" ||
		!list[0].At.Equal(t0) || list[0].Source != "/workspace/demo" || list[0].User != "alice" {
		t.Fatalf("Installs(s1) = %+v, %v", list, err)
	}
	for _, tc := range []struct {
		since time.Time
		want  int
	}{{t0, 2}, {t0.Add(30 * time.Second), 1}, {t0.Add(time.Hour), 0}} {
		if times, err := db.InstallTimes(ctx, "alice", tc.since, "quota"); err != nil || len(times) != tc.want ||
			(tc.want > 0 && !times[len(times)-1].Equal(t0.Add(time.Minute))) {
			t.Errorf("InstallTimes(alice, %v) = %v, %v; want %d ending at the second install", tc.since, times, err, tc.want)
		}
	}
	if err := db.RecordInstall(ctx, &skills.Install{At: t0, Session: "s1", Outcome: "ok", Kind: skills.InstallGit}); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("a record without a user: %v", err)
	}
	if u, err := db.UserUsage(ctx, "alice"); err != nil || u.Skills != 0 || u.Bytes != 0 {
		t.Fatalf("usage before any skill: %+v, %v", u, err)
	}
	insertSkill(t, db, "one", "h1")
	two, _ := insertSkill(t, db, "two", "h2")
	v := testVersion("two", "h3")
	v.Bytes = 100
	if err := db.AddVersion(ctx, two, v); err != nil {
		t.Fatal(err)
	}
	if u, err := db.UserUsage(ctx, "alice"); err != nil || u.Skills != 2 || u.Bytes != 1234*2+100 {
		t.Fatalf("usage = %+v, %v; want 2 skills, %d bytes", u, err, 1234*2+100)
	}
	if u, err := db.UserUsage(ctx, "bob"); err != nil || u.Skills != 0 {
		t.Fatalf("bob's usage = %+v, %v", u, err)
	}
}
