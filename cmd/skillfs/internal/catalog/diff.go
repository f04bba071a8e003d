package catalog

import (
	"context"

	"skillfs/skills/diff"
)

// DiffGate bounds the memory that comparisons of versions hold together:
// the daemon's, shared by every request; the command line, a process of
// its own for one comparison, has none.
type DiffGate interface {
	// Acquire waits until bytes more may be held, and returns the function
	// that gives them back; when they cannot be held soon, an error that
	// is skills.ErrBusy.
	Acquire(ctx context.Context, bytes int64) (release func(), err error)
}

// LimitDiffs has every comparison of versions from now on (a diff, a
// listing's diffstats, an update's) hold what it needs of g while it runs
// (diff.TreeDiff.Memory). Call it before the catalog is shared.
func (c *Catalog) LimitDiffs(g DiffGate) { c.gate = g }

// compare compares the trees a and b (either "" for the empty tree) within
// budget: listed first, it is granted what it will hold by the gate, then
// calls start (nil: none) and hands each file that changed to each.
func (c *Catalog) compare(ctx context.Context, a, b string, text bool, budget *diff.Budget,
	start func() error, each func(*diff.FileChange) error) error {
	td, err := diff.Open(a, b)
	if err != nil {
		return err
	}
	if c.gate != nil {
		release, err := c.gate.Acquire(ctx, td.Memory(text))
		if err != nil {
			return err
		}
		defer release()
	}
	if start != nil {
		if err := start(); err != nil {
			return err
		}
	}
	return td.Each(text, 0, budget, each)
}
