package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"skillfs/skills"
)

func testSession(id string, created time.Time) *skills.Session {
	return &skills.Session{
		ID:        id,
		UID:       "alice",
		Requested: []string{"pdf", "docx"},
		Preload:   []string{"pdf"},
		Pins:      []skills.Pin{{Slug: "pdf", Version: "h1"}, {Slug: "base", Version: "b1"}, {Slug: "docx", Version: "d1"}},
		CreatedAt: created,
	}
}

func TestCreateSessionRoundTrip(t *testing.T) { forEachBackend(t, testCreateSessionRoundTrip) }

func testCreateSessionRoundTrip(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		in   *skills.Session
		want *skills.Session
	}{
		{"full", testSession("full", t0), testSession("full", t0)},
		{
			"all skills, nil lists",
			&skills.Session{ID: "all", UID: "bob", All: true, CreatedAt: t0},
			&skills.Session{ID: "all", UID: "bob", All: true, CreatedAt: t0,
				Requested: []string{}, Preload: []string{}, Pins: []skills.Pin{}},
		},
		{
			"created closed",
			&skills.Session{ID: "closed", UID: "bob", CreatedAt: t0, ClosedAt: t0.Add(time.Second)},
			&skills.Session{ID: "closed", UID: "bob", CreatedAt: t0, ClosedAt: t0.Add(time.Second),
				Requested: []string{}, Preload: []string{}, Pins: []skills.Pin{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.CreateSession(ctx, tc.in); err != nil {
				t.Fatal(err)
			}
			got, err := db.Session(ctx, tc.in.ID)
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "session", got, tc.want)
		})
	}
}

func TestCreateSessionErrors(t *testing.T) { forEachBackend(t, testCreateSessionErrors) }

func testCreateSessionErrors(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, testSession("s1", t0)); err != nil {
		t.Fatal(err)
	}
	clash := testSession("s1", t0.Add(time.Hour))
	clash.UID = "bob"
	clash.Pins = []skills.Pin{{Slug: "evil", Version: "x"}}
	for _, tc := range []struct {
		name string
		s    *skills.Session
		want error
	}{
		{"id clash", clash, skills.ErrExists},
		{"unknown user", &skills.Session{ID: "s2", UID: "mallory"}, skills.ErrNotFound},
		{"no id", &skills.Session{UID: "bob"}, skills.ErrInvalid},
		{"nil", nil, skills.ErrInvalid},
		{"duplicate pin", &skills.Session{ID: "dup", Pins: []skills.Pin{{Slug: "a"}, {Slug: "a"}}}, skills.ErrInvalid},
		{"empty pin slug", &skills.Session{ID: "empty", Pins: []skills.Pin{{Version: "h"}}}, skills.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "CreateSession", db.CreateSession(ctx, tc.s), tc.want)
		})
	}
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "session after clash", got, testSession("s1", t0))
	for _, id := range []string{"dup", "empty"} {
		if _, err := db.Session(ctx, id); !errors.Is(err, skills.ErrNotFound) {
			t.Fatalf("invalid session %q stored: %v", id, err)
		}
	}
	_, err = db.Session(ctx, "missing")
	wantErr(t, "Session", err, skills.ErrNotFound)
}

func TestOpenSessions(t *testing.T) { forEachBackend(t, testOpenSessions) }

func testOpenSessions(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	list, err := db.OpenSessions(ctx)
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("OpenSessions on empty index = %#v, %v", list, err)
	}
	// Created out of order; one with no pins; one closed.
	late, early, mid := testSession("late", t0.Add(2*time.Hour)), testSession("early", t0), testSession("mid", t0.Add(time.Hour))
	mid.Pins = nil
	gone := testSession("gone", t0.Add(30*time.Minute))
	for _, s := range []*skills.Session{late, early, mid, gone} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	list, err = db.OpenSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mid.Pins = []skills.Pin{}
	mustEqual(t, "open sessions", list, []*skills.Session{early, mid, late})

	// By user: bob's one open session; alice's open ones oldest first.
	bobs := testSession("bobs", t0.Add(time.Minute))
	bobs.UID = "bob"
	if err := db.CreateSession(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string][]string{"alice": {"early", "mid", "late"}, "bob": {"bobs"}, "carol": {}} {
		ids, err := db.OpenSessionIDs(ctx, uid)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "open sessions of "+uid, ids, want)
	}
}

// TestOpenSessionsPage: pages follow the order of OpenSessions, whatever
// their size, and a cursor still works once its session is closed.
func TestOpenSessionsPage(t *testing.T) { forEachBackend(t, testOpenSessionsPage) }

func testOpenSessionsPage(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	var all []*skills.Session
	for i := range 7 {
		// Two sessions share each creation time: the id breaks the tie.
		s := testSession(fmt.Sprintf("s%d", 6-i), t0.Add(time.Duration(i/2)*time.Minute))
		s.Pins = s.Pins[:i%4]
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		if s.Pins == nil {
			s.Pins = []skills.Pin{}
		}
		all = append(all, s)
	}
	// One without a creation time sorts first.
	undated := testSession("undated", time.Time{})
	if err := db.CreateSession(ctx, undated); err != nil {
		t.Fatal(err)
	}
	want, err := db.OpenSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 8 || want[0].ID != "undated" {
		t.Fatalf("open sessions: %d, first %q", len(want), want[0].ID)
	}
	for _, limit := range []int{1, 2, 3, 8, 100} {
		var got []*skills.Session
		after := ""
		for {
			page, err := db.OpenSessionsPage(ctx, "", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(page))
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].ID
		}
		mustEqual(t, fmt.Sprintf("pages of %d", limit), got, want)
	}
	// Closing the cursor's session does not lose the place.
	if err := db.CloseSession(ctx, want[3].ID); err != nil {
		t.Fatal(err)
	}
	page, err := db.OpenSessionsPage(ctx, "", want[3].ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "after a closed session", page, want[4:6])
	_, err = db.OpenSessionsPage(ctx, "", "nope", 2)
	wantErr(t, "unknown cursor", err, skills.ErrInvalid)
}

// TestOpenBinds: the binds of open sessions in one query, all or some.
func TestOpenBinds(t *testing.T) { forEachBackend(t, testOpenBinds) }

func testOpenBinds(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	for _, id := range []string{"s1", "s2", "s3", "closed"} {
		if err := db.CreateSession(ctx, testSession(id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	b1 := []skills.Bind{{Target: "/a"}, {Target: "/b"}, {Target: "/a", PID: 7, NS: "mnt:[1]"}}
	for _, b := range b1 {
		if err := db.AddBind(ctx, "s1", "", b); err != nil {
			t.Fatal(err)
		}
	}
	for id, target := range map[string]string{"s2": "/c", "closed": "/d"} {
		if err := db.AddBind(ctx, id, "", skills.Bind{Target: target}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseSession(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	sorted := []skills.Bind{b1[0], b1[1], b1[2]}
	all, err := db.OpenBinds(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "all binds", all, map[string][]skills.Bind{"s1": sorted, "s2": {{Target: "/c"}}})
	some, err := db.OpenBinds(ctx, "", []string{"s2", "s3", "closed", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "binds of some", some, map[string][]skills.Bind{"s2": {{Target: "/c"}}})
	none, err := db.OpenBinds(ctx, "", []string{})
	if err != nil || len(none) != 0 {
		t.Fatalf("binds of no session: %v, %v", none, err)
	}
}

func TestSetPins(t *testing.T) { forEachBackend(t, testSetPins) }

func testSetPins(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, testSession("s1", t0)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pins []skills.Pin
		want []skills.Pin
	}{
		{"reordered and moved", []skills.Pin{{Slug: "docx", Version: "d2"}, {Slug: "pdf", Version: "h2"}}, nil},
		{"grown", []skills.Pin{{Slug: "a", Version: "1"}, {Slug: "b", Version: "2"}, {Slug: "c", Version: "3"}, {Slug: "d", Version: "4"}}, nil},
		{"emptied", nil, []skills.Pin{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.SetPins(ctx, "s1", tc.pins); err != nil {
				t.Fatal(err)
			}
			got, err := db.Session(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = tc.pins
			}
			mustEqual(t, "pins", got.Pins, want)
		})
	}
	wantErr(t, "SetPins missing", db.SetPins(ctx, "missing", nil), skills.ErrNotFound)
	wantErr(t, "SetPins duplicate", db.SetPins(ctx, "s1", []skills.Pin{{Slug: "a"}, {Slug: "a"}}), skills.ErrInvalid)
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetPins closed", db.SetPins(ctx, "s1", []skills.Pin{{Slug: "a"}}), skills.ErrInvalid)
}

func TestSetSkills(t *testing.T) { forEachBackend(t, testSetSkills) }

func testSetSkills(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, testSession("s1", t0)); err != nil {
		t.Fatal(err)
	}
	if err := db.AddBind(ctx, "s1", "", skills.Bind{Target: "/t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordActivation(ctx, "s1", "pdf", t0); err != nil {
		t.Fatal(err)
	}
	want := &skills.Session{ID: "s1", UID: "alice", All: true, Requested: []string{}, Preload: []string{"docx"},
		Pins: []skills.Pin{{Slug: "docx", Version: "d1"}, {Slug: "xlsx", Version: "x1"}}, CreatedAt: t0}
	revoked := &skills.Event{Type: "revoked", Session: "s1", Slug: "pdf", At: t0}
	// The user and creation time given are not the stored ones: they stay.
	in := *want
	in.UID, in.CreatedAt = "mallory", t0.Add(time.Hour)
	if err := db.SetSkills(ctx, &in, revoked); err != nil {
		t.Fatal(err)
	}
	if revoked.ID == 0 {
		t.Errorf("the event got no id")
	}
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "session", got, want)
	binds, err := db.Binds(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "binds", binds, []skills.Bind{{Target: "/t"}})
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Slug != "pdf" {
		t.Errorf("activations after a set: %+v, %v; want the history of pdf kept", acts, err)
	}

	wantErr(t, "SetSkills missing", db.SetSkills(ctx, &skills.Session{ID: "missing"}), skills.ErrNotFound)
	wantErr(t, "SetSkills no id", db.SetSkills(ctx, &skills.Session{}), skills.ErrInvalid)
	bad := *want
	bad.Pins = []skills.Pin{{Slug: "a"}, {Slug: "a"}}
	failed := &skills.Event{Type: "revoked", Session: "s1", Slug: "docx", At: t0}
	wantErr(t, "SetSkills duplicate", db.SetSkills(ctx, &bad, failed), skills.ErrInvalid)
	bad = *want
	bad.Preload = []string{"\xff"}
	wantErr(t, "SetSkills bad preload", db.SetSkills(ctx, &bad), skills.ErrInvalid)
	if got, err := db.Session(ctx, "s1"); err != nil {
		t.Fatal(err)
	} else {
		mustEqual(t, "session after refused sets", got, want)
	}
	if failed.ID != 0 {
		t.Errorf("the event of a refused set got id %d", failed.ID)
	}
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetSkills closed", db.SetSkills(ctx, want), skills.ErrInvalid)
}

func TestCloseSessionAndMounts(t *testing.T) { forEachBackend(t, testCloseSessionAndMounts) }

func testCloseSessionAndMounts(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, testSession("s1", t0)); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSession(ctx, testSession("s2", t0)); err != nil {
		t.Fatal(err)
	}
	ms, err := db.Binds(ctx, "s1")
	if err != nil || ms == nil || len(ms) != 0 {
		t.Fatalf("Mounts of new session = %#v, %v", ms, err)
	}
	for _, target := range []string{"/sandbox/b/skills", "/sandbox/a/skills", "/sandbox/b/skills"} {
		if err := db.AddBind(ctx, "s1", "", skills.Bind{Target: target}); err != nil {
			t.Fatalf("AddMount(%q): %v", target, err)
		}
	}
	if err := db.AddBind(ctx, "s2", "", skills.Bind{Target: "/sandbox/c/skills"}); err != nil {
		t.Fatal(err)
	}
	ms, err = db.Binds(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "mounts", ms, []skills.Bind{{Target: "/sandbox/a/skills"}, {Target: "/sandbox/b/skills"}})

	// The same target in a sandbox's namespace is another bind; re-adding
	// it updates the namespace identity.
	for _, ns := range []string{"mnt:[1]", "mnt:[2]"} {
		if err := db.AddBind(ctx, "s1", "", skills.Bind{Target: "/sandbox/a/skills", PID: 42, NS: ns}); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ = db.Binds(ctx, "s1")
	mustEqual(t, "binds with a namespace", ms, []skills.Bind{{Target: "/sandbox/a/skills"}, {Target: "/sandbox/b/skills"},
		{Target: "/sandbox/a/skills", PID: 42, NS: "mnt:[2]"}})
	// So does it the API socket, and a rebind's new socket file.
	for _, id := range []string{"1:2", "1:3"} {
		b := skills.Bind{Target: "/sandbox/a/skills", PID: 42, NS: "mnt:[2]", APISocket: "/sandbox/a/.skillfs.sock", SocketID: id}
		if err := db.AddBind(ctx, "s1", "", b); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ = db.Binds(ctx, "s1")
	mustEqual(t, "binds with an api socket", ms, []skills.Bind{{Target: "/sandbox/a/skills"}, {Target: "/sandbox/b/skills"},
		{Target: "/sandbox/a/skills", PID: 42, NS: "mnt:[2]", APISocket: "/sandbox/a/.skillfs.sock", SocketID: "1:3"}})
	open, _ := db.OpenBinds(ctx, "", []string{"s1"})
	mustEqual(t, "open binds with an api socket", open["s1"], ms)
	wantErr(t, "negative pid", db.AddBind(ctx, "s1", "", skills.Bind{Target: "/x", PID: -1}), skills.ErrInvalid)
	if err := db.RemoveBind(ctx, "s1", skills.Bind{Target: "/sandbox/a/skills", PID: 42}); err != nil {
		t.Fatal(err)
	}

	if err := db.RemoveBind(ctx, "s1", skills.Bind{Target: "/sandbox/a/skills"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "RemoveMount again", db.RemoveBind(ctx, "s1", skills.Bind{Target: "/sandbox/a/skills"}), skills.ErrNotFound)
	wantErr(t, "RemoveMount of another session's target", db.RemoveBind(ctx, "s1", skills.Bind{Target: "/sandbox/c/skills"}), skills.ErrNotFound)
	wantErr(t, "AddMount missing session", db.AddBind(ctx, "missing", "", skills.Bind{Target: "/x"}), skills.ErrNotFound)
	wantErr(t, "AddMount empty target", db.AddBind(ctx, "s1", "", skills.Bind{Target: ""}), skills.ErrInvalid)
	_, err = db.Binds(ctx, "missing")
	wantErr(t, "Mounts missing session", err, skills.ErrNotFound)

	now := t0.Add(time.Hour)
	db.now = func() time.Time { return now }
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.ClosedAt.Equal(now) {
		t.Fatalf("closed at %v, want %v", got.ClosedAt, now)
	}
	// Pins stay as history; mounts go.
	mustEqual(t, "pins of closed session", got.Pins, testSession("s1", t0).Pins)
	ms, err = db.Binds(ctx, "s1")
	if err != nil || len(ms) != 0 {
		t.Fatalf("mounts after close = %v, %v", ms, err)
	}
	ms, err = db.Binds(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "other session's mounts", ms, []skills.Bind{{Target: "/sandbox/c/skills"}})
	wantErr(t, "AddMount closed", db.AddBind(ctx, "s1", "", skills.Bind{Target: "/x"}), skills.ErrInvalid)

	// Closing again keeps the first close time.
	db.now = func() time.Time { return now.Add(time.Hour) }
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	got, err = db.Session(ctx, "s1")
	if err != nil || !got.ClosedAt.Equal(now) {
		t.Fatalf("second close moved closed_at to %v (%v)", got.ClosedAt, err)
	}
	wantErr(t, "CloseSession missing", db.CloseSession(ctx, "missing"), skills.ErrNotFound)
}

// FuzzPins: any readable set comes back from its stored form as it was.
func FuzzPins(f *testing.F) {
	f.Add("pdf", "0123abcd", "b\"\\\n\x00é", "")
	f.Fuzz(func(t *testing.T, s1, v1, s2, v2 string) {
		pins := []skills.Pin{{Slug: s1, Version: v1}, {Slug: s2, Version: v2}}
		stored, err := encodePins(pins)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodePins(stored)
		if err != nil {
			t.Fatalf("decode %q: %v", stored, err)
		}
		// JSON carries text: invalid UTF-8 comes back replaced, as
		// encoding/json does; everything else exactly.
		if utf8.ValidString(s1) && utf8.ValidString(v1) && utf8.ValidString(s2) && utf8.ValidString(v2) && !slices.Equal(back, pins) {
			t.Fatalf("pins %q came back as %q (stored %q)", pins, back, stored)
		}
	})
}

// A user is deleted only while they have no open session, checked in the
// deleting transaction, and a session is stored only for a user that
// exists, checked in the storing one: whichever commits first, the other
// fails, so no session is left open for a deleted user.
func TestDeleteUserAndCreateSessionExcludeEachOther(t *testing.T) {
	forEachBackend(t, testDeleteUserAndCreateSessionExcludeEachOther)
}

func testDeleteUserAndCreateSessionExcludeEachOther(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, testSession("s1", t0)); err != nil {
		t.Fatal(err)
	}
	err := deleteUser(ctx, db, "alice")
	wantErr(t, "DeleteUser with an open session", err, skills.ErrExists)
	if err == nil || !strings.Contains(err.Error(), "1 open session") {
		t.Errorf("DeleteUser = %v, want it to say how many sessions are open", err)
	}
	if _, err := db.User(ctx, "alice"); err != nil {
		t.Fatalf("a refused delete removed the user: %v", err)
	}
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := deleteUser(ctx, db, "alice"); err != nil {
		t.Fatalf("DeleteUser without open sessions: %v", err)
	}
	wantErr(t, "CreateSession for a deleted user", db.CreateSession(ctx, testSession("s2", t0)), skills.ErrNotFound)
	if ids, err := db.OpenSessionIDs(ctx, "alice"); err != nil || len(ids) != 0 {
		t.Fatalf("open sessions of the deleted user: %v %v", ids, err)
	}
	// Closed sessions stay, and do not keep a user.
	if _, err := db.Session(ctx, "s1"); err != nil {
		t.Fatalf("the closed session of a deleted user: %v", err)
	}
}

// BenchmarkSession reads a session that pins 100 skills, as a daemon does
// to serve or re-create its view.
func BenchmarkSession(b *testing.B) { benchEachBackend(b, benchSession) }

func benchSession(b *testing.B, be backend) {
	db := be.open(b)
	ctx := context.Background()
	s := testSession("s1", t0)
	s.Pins = nil
	for i := range 100 {
		s.Pins = append(s.Pins, skills.Pin{Slug: fmt.Sprintf("skill-%03d", i), Version: strings.Repeat("ab", 32)})
	}
	if err := db.CreateSession(ctx, s); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		got, err := db.Session(ctx, "s1")
		if err != nil || len(got.Pins) != 100 {
			b.Fatalf("%+v, %v", got, err)
		}
	}
}
