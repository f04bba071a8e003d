package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"skillfs/skills"
)

func TestCreateSessionCaps(t *testing.T) { forEachBackend(t, testCreateSessionCaps) }

// testCreateSessionCaps fills a parent's children and a user's sessions to
// their caps: the next is refused naming the cap, nothing of it stored; a
// close makes room again; another user, and a create without caps, are
// not counted against them.
func testCreateSessionCaps(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	caps := SessionCaps{Children: 2, PerUser: 4}
	create := func(id, uid, parent string) error {
		s := testSession(id, t0)
		s.UID, s.Parent = uid, parent
		return db.CreateSessionCapped(ctx, s, caps)
	}
	refused := func(err error, want CapError) {
		t.Helper()
		var ce *CapError
		if !errors.As(err, &ce) || *ce != want || !errors.Is(err, skills.ErrLimit) {
			t.Fatalf("create over a cap: %v, want %+v", err, want)
		}
	}
	for _, s := range [][2]string{{"p", ""}, {"k1", "p"}, {"k2", "p"}} {
		if err := create(s[0], "alice", s[1]); err != nil {
			t.Fatal(err)
		}
	}
	refused(create("k3", "alice", "p"), CapError{Cap: CapChildren, Of: "p", Open: 2, Max: 2})
	k3 := testSession("k3", t0)
	k3.Parent = "p"
	refused(db.CheckSessionCaps(ctx, k3, caps), CapError{Cap: CapChildren, Of: "p", Open: 2, Max: 2})
	if _, err := db.Session(ctx, "k3"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("a refused session was stored: %v", err)
	}
	if err := create("q", "alice", ""); err != nil {
		t.Fatal(err)
	}
	refused(create("r", "alice", ""), CapError{Cap: CapPerUser, Of: "alice", Open: 4, Max: 4})
	if err := create("b1", "bob", ""); err != nil {
		t.Fatalf("another user's session: %v", err)
	}
	if err := db.CreateSession(ctx, testSession("uncapped", t0)); err != nil {
		t.Fatalf("a create without caps: %v", err)
	}
	if err := db.CloseSession(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseSession(ctx, "uncapped"); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckSessionCaps(ctx, k3, caps); err != nil {
		t.Fatalf("the look before a child, after another closed: %v", err)
	}
	if err := create("k3", "alice", "p"); err != nil {
		t.Fatalf("a child after another closed: %v", err)
	}
}

func TestCreateSessionCapsConcurrent(t *testing.T) {
	forEachBackend(t, testCreateSessionCapsConcurrent)
}

// testCreateSessionCapsConcurrent has 20 children of one parent created at
// once under a cap of 5: exactly 5 are stored, every other refused.
func testCreateSessionCapsConcurrent(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, testSession("p", t0)); err != nil {
		t.Fatal(err)
	}
	const n, max = 20, 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := testSession(fmt.Sprintf("k%02d", i), t0.Add(time.Duration(i)*time.Millisecond))
			s.Parent = "p"
			errs[i] = db.CreateSessionCapped(ctx, s, SessionCaps{Children: max})
		})
	}
	wg.Wait()
	made := 0
	for i, err := range errs {
		switch {
		case err == nil:
			made++
		case !errors.Is(err, skills.ErrLimit):
			t.Errorf("create k%02d: %v", i, err)
		}
	}
	kids, err := db.OpenChildren(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if made != max || len(kids) != max {
		t.Fatalf("%d creates succeeded, %d children open, want %d", made, len(kids), max)
	}
}
