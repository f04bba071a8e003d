package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"skillfs/skills"
)

func TestSessionKeyLabelsParentRoundTrip(t *testing.T) {
	forEachBackend(t, testSessionKeyLabelsParentRoundTrip)
}

func testSessionKeyLabelsParentRoundTrip(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	top := testSession("top", t0)
	top.Key, top.Labels = "thread-1", map[string]string{"team": "search", "app.example/run": "r=1"}
	if err := db.CreateSession(ctx, top); err != nil {
		t.Fatal(err)
	}
	child := testSession("child", t0.Add(time.Second))
	child.Parent, child.Key = "top", "thread-1" // children have a key space of their own
	if err := db.CreateSession(ctx, child); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*skills.Session{top, child} {
		got, err := db.Session(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "session "+want.ID, got, want)
	}
	got, err := db.SessionByKey(ctx, "alice", "", "thread-1")
	if err != nil || got.ID != "top" {
		t.Fatalf("SessionByKey top-level = %v, %v", got, err)
	}
	if got, err = db.SessionByKey(ctx, "alice", "top", "thread-1"); err != nil || got.ID != "child" {
		t.Fatalf("SessionByKey child = %v, %v", got, err)
	}
	if _, err := db.SessionByKey(ctx, "bob", "", "thread-1"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("another user's key: %v", err)
	}
	kids, err := db.OpenChildren(ctx, "top")
	if err != nil || len(kids) != 1 || kids[0].ID != "child" {
		t.Fatalf("OpenChildren = %v, %v", kids, err)
	}
}

func TestSessionKeyUniqueAmongOpen(t *testing.T) { forEachBackend(t, testSessionKeyUniqueAmongOpen) }

func testSessionKeyUniqueAmongOpen(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	first := testSession("first", t0)
	first.Key = "k"
	if err := db.CreateSession(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := testSession("again", t0.Add(time.Second))
	again.Key = "k"
	err := db.CreateSession(ctx, again)
	var taken *KeyTakenError
	if !errors.As(err, &taken) || taken.Session != "first" || !errors.Is(err, skills.ErrExists) {
		t.Fatalf("second open session with the key: %v", err)
	}
	if _, err := db.Session(ctx, "again"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("the refused session was stored: %v", err)
	}
	other := testSession("bobs", t0.Add(time.Second))
	other.UID, other.Key = "bob", "k"
	if err := db.CreateSession(ctx, other); err != nil {
		t.Errorf("another user's session with the same key: %v", err)
	}
	if err := db.CloseSession(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSession(ctx, again); err != nil {
		t.Fatalf("the key of a closed session is free again: %v", err)
	}
	// The schema's guard: a row written past the look (as a write that
	// did not take its turn would) is refused by the unique index.
	err = db.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO sessions (id, uid, all_skills, client_key) VALUES ('raw', 'alice', ?, 'k')", false)
		return err
	})
	if !isKeyViolation(err) {
		t.Errorf("an open session with a taken key written past the look: %v, want the unique index's violation", err)
	}
}

func TestSessionKeyConcurrentCreates(t *testing.T) {
	forEachBackend(t, testSessionKeyConcurrentCreates)
}

// testSessionKeyConcurrentCreates has 20 creates of one key race: one
// session is stored, each other create is told its id.
func testSessionKeyConcurrentCreates(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := testSession(fmt.Sprintf("s%02d", i), t0.Add(time.Duration(i)*time.Millisecond))
			s.Key = "thread"
			errs[i] = db.CreateSession(ctx, s)
		}()
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two sessions with one key: %s and s%02d", winner, i)
			}
			winner = fmt.Sprintf("s%02d", i)
		}
	}
	if winner == "" {
		t.Fatalf("no create succeeded: %v", errs)
	}
	for i, err := range errs {
		var taken *KeyTakenError
		if err != nil && (!errors.As(err, &taken) || taken.Session != winner) {
			t.Errorf("create s%02d: %v, want the key taken by %s", i, err, winner)
		}
	}
	open, err := db.FindOpenSessions(ctx, SessionFilter{Key: "thread"}, "", -1)
	if err != nil || len(open) != 1 || open[0].ID != winner {
		t.Fatalf("open sessions with the key: %v, %v", open, err)
	}
}

func TestCreateSessionParentChecks(t *testing.T) { forEachBackend(t, testCreateSessionParentChecks) }

func testCreateSessionParentChecks(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	for _, s := range []*skills.Session{testSession("p", t0), testSession("gone", t0)} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	kid := testSession("kid", t0)
	kid.Parent = "p"
	if err := db.CreateSession(ctx, kid); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, uid, parent string
		want              error
		says              string
	}{
		{"unknown parent", "alice", "nope", skills.ErrNotFound, "parent session"},
		{"closed parent", "alice", "gone", skills.ErrNotFound, "is closed"},
		{"another user", "bob", "p", skills.ErrInvalid, "another user"},
		{"grandchild", "alice", "kid", skills.ErrPermission, "may not have sub-agents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSession("x-"+strings.ReplaceAll(tc.name, " ", "-"), t0)
			s.UID, s.Parent = tc.uid, tc.parent
			err := db.CreateSession(ctx, s)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CreateSession = %v, want %v saying %q", err, tc.want, tc.says)
			}
			if _, err := db.Session(ctx, s.ID); !errors.Is(err, skills.ErrNotFound) {
				t.Errorf("refused session stored: %v", err)
			}
		})
	}
	bad := testSession("badkey", t0)
	bad.Key = "a b"
	if err := db.CreateSession(ctx, bad); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("a key with a space: %v", err)
	}
	bad = testSession("badlabel", t0)
	bad.Labels = map[string]string{"-x": "y"}
	if err := db.CreateSession(ctx, bad); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("a bad label: %v", err)
	}
}

func TestFindOpenSessions(t *testing.T) { forEachBackend(t, testFindOpenSessions) }

func testFindOpenSessions(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	mk := func(id, uid, key string, labels map[string]string, at int) {
		s := testSession(id, t0.Add(time.Duration(at)*time.Second))
		s.UID, s.Key, s.Labels = uid, key, labels
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mk("a1", "alice", "t1", map[string]string{"team": "x", "env": "prod"}, 1)
	mk("a2", "alice", "t2", map[string]string{"team": "x", "env": "dev"}, 2)
	mk("a3", "alice", "", map[string]string{"team": "y"}, 3)
	mk("b1", "bob", "t1", map[string]string{"team": "x", "env": "prod"}, 4)
	mk("c1", "alice", "", map[string]string{"team": "x"}, 5)
	if err := db.CloseSession(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	ids := func(f SessionFilter, after string, limit int) string {
		t.Helper()
		list, err := db.FindOpenSessions(ctx, f, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			out = append(out, s.ID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name  string
		f     SessionFilter
		after string
		limit int
		want  string
	}{
		{"key", SessionFilter{Key: "t1"}, "", -1, "a1,b1"},
		{"key and user", SessionFilter{Key: "t1", User: "bob"}, "", -1, "b1"},
		{"label", SessionFilter{Labels: map[string]string{"team": "x"}}, "", -1, "a1,a2,b1"},
		{"labels and", SessionFilter{Labels: map[string]string{"team": "x", "env": "prod"}}, "", -1, "a1,b1"},
		{"label and user", SessionFilter{User: "alice", Labels: map[string]string{"env": "dev"}}, "", -1, "a2"},
		{"label no match", SessionFilter{Labels: map[string]string{"team": "z"}}, "", -1, ""},
		{"label value is not a key", SessionFilter{Labels: map[string]string{"x": "team"}}, "", -1, ""},
		{"paged", SessionFilter{Labels: map[string]string{"team": "x"}}, "", 2, "a1,a2"},
		{"next page", SessionFilter{Labels: map[string]string{"team": "x"}}, "a2", 2, "b1"},
		{"top-level", SessionFilter{TopLevel: true, User: "alice"}, "", -1, "a1,a2,a3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(tc.f, tc.after, tc.limit); got != tc.want {
				t.Errorf("FindOpenSessions = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestChildEventsInParentLog(t *testing.T) { forEachBackend(t, testChildEventsInParentLog) }

func testChildEventsInParentLog(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	for _, s := range []*skills.Session{testSession("p", t0), testSession("other", t0)} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	kid := testSession("kid", t0)
	kid.Parent = "p"
	if err := db.CreateSession(ctx, kid); err != nil {
		t.Fatal(err)
	}
	evs := []*skills.Event{
		{Type: skills.EventActivated, Session: "p", Slug: "pdf", At: t0},
		{Type: skills.EventActivated, Session: "kid", Slug: "docx", At: t0},
		{Type: skills.EventActivated, Session: "other", Slug: "pdf", At: t0},
	}
	if err := db.AddEvents(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if evs[1].Parent != "p" || evs[0].Parent != "" {
		t.Errorf("parents set on store: %q, %q", evs[0].Parent, evs[1].Parent)
	}
	page := func(session string) string {
		t.Helper()
		p, err := db.Events(ctx, session, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range p.Events {
			out = append(out, e.Session+"/"+e.Parent+"/"+e.Slug)
		}
		return strings.Join(out, ",")
	}
	if got, want := page("p"), "p//pdf,kid/p/docx"; got != want {
		t.Errorf("parent's log = %q, want %q", got, want)
	}
	if got, want := page("kid"), "kid/p/docx"; got != want {
		t.Errorf("child's log = %q, want %q", got, want)
	}
	if got, want := page("other"), "other//pdf"; got != want {
		t.Errorf("another session's log = %q, want %q", got, want)
	}
}
