package catalog

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"skillfs/skills"
)

// Two data directories on one shared index are two hosts of one catalog:
// each has its own identity, and a user added through one is known to the
// other. Neither writes an index of its own.
func TestSharedIndexNamesHosts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	shared := filepath.Join(dir, "fleet.db")
	open := func(name string) *Catalog {
		c, err := Open(ctx, filepath.Join(dir, name), Options{Index: shared})
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := open("a"), open("b")
	if !a.Shared() || !b.Shared() {
		t.Fatal("a catalog on a shared index does not say so")
	}
	if a.HostID() == "" || a.HostID() == b.HostID() {
		t.Fatalf("host ids %q and %q: want two different ones", a.HostID(), b.HostID())
	}
	if err := a.DB().PutUser(ctx, skills.User{UID: "ann", Role: skills.RoleUser}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB().User(ctx, "ann"); err != nil {
		t.Fatalf("a user added on host a is unknown on host b: %v", err)
	}
	for _, h := range []string{"a", "b"} {
		if _, err := os.Lstat(filepath.Join(dir, h, indexFile)); err == nil {
			t.Errorf("host %s made an index of its own beside the shared one", h)
		}
	}
	// The identity is the host's: it survives a reopen.
	id := a.HostID()
	a.Close()
	if again := open("a"); again.HostID() != id {
		t.Errorf("host id changed across a reopen: %q, then %q", id, again.HostID())
	}
}

// A data directory with its own index is a host too: the only one of its
// catalog, named by the identity its index and store share.
func TestOwnIndexIsAHost(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	c, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.DB().DataDirID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shared() || c.HostID() == "" || c.HostID() != id {
		t.Fatalf("shared %v, host %q: want an unshared host named %q", c.Shared(), c.HostID(), id)
	}
	c.Close()
	again, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.HostID() != id {
		t.Fatalf("host id changed across a reopen: %q, then %q", id, again.HostID())
	}
}

// A user deleted with --force on one host: the closer (the daemon) gets
// the sessions this host serves; those another host serves are closed in
// the index with their closed event, for that host to follow.
func TestDeleteUserClosesOtherHostsSessionsInTheIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	shared := filepath.Join(dir, "fleet.db")
	var hosts []*Catalog
	for _, name := range []string{"a", "b"} {
		c, err := Open(ctx, filepath.Join(dir, name), Options{Index: shared})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		hosts = append(hosts, c)
	}
	a, b := hosts[0], hosts[1]
	if err := a.DB().PutUser(ctx, skills.User{UID: "ann", Role: skills.RoleUser}); err != nil {
		t.Fatal(err)
	}
	for id, host := range map[string]string{"on-a": a.HostID(), "on-b": b.HostID()} {
		if err := a.DB().CreateSession(ctx, &skills.Session{ID: id, UID: "ann", CreatedAt: time.Now(), Host: host}); err != nil {
			t.Fatal(err)
		}
	}
	var given []string
	res, err := a.DeleteUser(ctx, "", "ann", "", true, func(ctx context.Context, ids []string) error {
		given = append(given, ids...)
		return a.closeInIndex(ctx, ids)
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := res.Closed
	slices.Sort(closed)
	if !slices.Equal(given, []string{"on-a"}) || !slices.Equal(closed, []string{"on-a", "on-b"}) {
		t.Fatalf("the closer got %v, %v closed; want on-a given, both closed", given, closed)
	}
	s, err := b.DB().Session(ctx, "on-b")
	if err != nil || s.ClosedAt.IsZero() {
		t.Fatalf("b's session after the delete: %+v, %v", s, err)
	}
	page, err := b.DB().Events(ctx, "on-b", 0, 10)
	if err != nil || len(page.Events) != 1 || page.Events[0].Type != "closed" {
		t.Fatalf("events of b's session: %+v, %v; want its close", page, err)
	}
}
