package index

import (
	"context"
	"testing"
	"time"
)

// The catalog lock excludes a second holder, through another handle on
// the same index (another process, another host), until it is released.
func TestCatalogLockExcludes(t *testing.T) { forEachBackend(t, testCatalogLockExcludes) }

func testCatalogLockExcludes(t *testing.T, b backend) {
	target := b.target(t)
	a, other := openBare(t, target), openBare(t, target)
	ctx := context.Background()
	unlock, err := a.CatalogLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := other.CatalogLock(ctx)
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		got <- u
	}()
	select {
	case u := <-got:
		u()
		t.Fatal("a second handle took the catalog lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(10 * time.Second):
		t.Fatal("the second handle did not get the catalog lock once it was released")
	}
	// Released: taken again at once.
	u, err := a.CatalogLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u()
}
