package daemon

import (
	"context"
	"time"

	"skillfs/skills"
)

// readAudit is what the daemon asks of its read audit
// (activation.ReadAudit): it is flushed every flush interval and at
// shutdown (Close), and answers what a session read.
type readAudit interface {
	Flush(ctx context.Context) error
	Audit(ctx context.Context, session string) ([]skills.FileRead, error)
	Close() error
}

// Audit returns the files of skills a session read, ordered by slug and
// path: when it first read each and how many reads reached skillfs. A
// closed session keeps its audit; an unknown one is skills.ErrNotFound.
func (d *Daemon) Audit(ctx context.Context, id string) ([]skills.FileRead, error) {
	return d.audit.Audit(ctx, id)
}

// flushReads flushes the read audit every interval until ctx ends; its
// Close does the last flush.
func (d *Daemon) flushReads(ctx context.Context, every time.Duration) {
	periodically(ctx, every, func() { d.audit.Flush(ctx) })
}
