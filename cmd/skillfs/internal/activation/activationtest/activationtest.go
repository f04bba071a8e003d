// Package activationtest helps test the activation recorder and what uses
// it: an index with a session to record for, one the test makes
// unreachable, and the activated events of the log counted.
package activationtest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// Flaky is the index as the recorder sees it (activation.Index), made
// unreachable by the test: while Down, every call fails as one to a shared
// index that cannot be reached does; with Lose set, a write is stored and
// its answer lost.
type Flaky struct {
	*index.DB
	Down, Lose atomic.Bool
}

func (f *Flaky) fail(op string) error {
	if f.Down.Load() {
		return fmt.Errorf("%s: connect to the index: connection refused: %w", op, skills.ErrUnavailable)
	}
	return nil
}

// lost is the answer of a write stored while Lose is set.
func (f *Flaky) lost(op string, err error) error {
	if err == nil && f.Lose.Load() {
		return fmt.Errorf("%s: commit: connection reset: %w", op, skills.ErrUnavailable)
	}
	return err
}

func (f *Flaky) Skill(ctx context.Context, slug string) (*skills.Skill, error) {
	if err := f.fail("get skill"); err != nil {
		return nil, err
	}
	return f.DB.Skill(ctx, slug)
}

func (f *Flaky) SkillSet(ctx context.Context) (*index.SkillSet, error) {
	if err := f.fail("read catalog"); err != nil {
		return nil, err
	}
	return f.DB.SkillSet(ctx)
}

func (f *Flaky) RecordActivation(ctx context.Context, session, slug string, at time.Time, evs ...*skills.Event) (bool, error) {
	if err := f.fail("record activation"); err != nil {
		return false, err
	}
	first, err := f.DB.RecordActivation(ctx, session, slug, at, evs...)
	return first, f.lost("record activation", err)
}

func (f *Flaky) ApplySpill(ctx context.Context, id string, deltas []index.OpenDelta, evs ...*skills.Event) (bool, error) {
	if err := f.fail("apply spill"); err != nil {
		return false, err
	}
	applied, err := f.DB.ApplySpill(ctx, id, deltas, evs...)
	return applied, f.lost("apply spill", err)
}

func (f *Flaky) Activations(ctx context.Context, session string) ([]skills.Activation, error) {
	if err := f.fail("list activations"); err != nil {
		return nil, err
	}
	return f.DB.Activations(ctx, session)
}

// Key names the activations of a skill in a session.
type Key struct{ Session, Slug string }

// ActivatedEvents counts the activated events of the log by session and
// skill.
func ActivatedEvents(t testing.TB, db *index.DB) map[Key]int {
	t.Helper()
	page, err := db.Events(context.Background(), "", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := map[Key]int{}
	for _, e := range page.Events {
		if e.Type == "activated" {
			out[Key{e.Session, e.Slug}]++
		}
	}
	return out
}

// OpenDB opens a new SQLite index in a temporary folder with the ordinary
// users alice and bob and alice's open session s1, whose opens a recorder
// can then record.
func OpenDB(t testing.TB) *index.DB {
	t.Helper()
	db, err := index.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	AddUsers(t, db, "alice", "bob")
	s := &skills.Session{ID: "s1", UID: "alice", Requested: []string{}, Preload: []string{},
		Pins: []skills.Pin{}, CreatedAt: time.Now()}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return db
}

// AddUsers registers ordinary users, whom sessions may then name.
func AddUsers(t testing.TB, db *index.DB, uids ...string) {
	t.Helper()
	for _, uid := range uids {
		if err := db.PutUser(context.Background(), skills.User{UID: uid, Role: skills.RoleUser}); err != nil {
			t.Fatal(err)
		}
	}
}
