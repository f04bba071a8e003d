package activation

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// ReadAudit moves the filesystem's read counts (fs.Server.TakeReads) to the
// index in batches, off the reads' path: at every Flush (the daemon's flush
// interval), when the audit is asked for, and at shutdown.
type ReadAudit struct {
	db   *index.DB
	take func() []skills.FileRead
	log  *slog.Logger

	mu      sync.Mutex
	pending map[auditKey]skills.FileRead // taken, not yet stored
	failing bool
}

type auditKey struct{ session, slug, path string }

// NewReadAudit is the read audit of the reads take hands over, stored in
// db.
func NewReadAudit(db *index.DB, take func() []skills.FileRead, log *slog.Logger) *ReadAudit {
	return &ReadAudit{db: db, take: take, log: log, pending: map[auditKey]skills.FileRead{}}
}

// add merges reads into pending. The caller holds mu.
func (a *ReadAudit) add(reads []skills.FileRead) {
	for _, r := range reads {
		k := auditKey{r.Session, r.Slug, r.Path}
		if p, ok := a.pending[k]; ok {
			addRead(&r, p)
		}
		a.pending[k] = r
	}
}

// addRead adds the reads of r to dst, keeping the earlier first time.
func addRead(dst *skills.FileRead, r skills.FileRead) {
	dst.Reads += r.Reads
	if r.FirstAt.Before(dst.FirstAt) {
		dst.FirstAt = r.FirstAt
	}
}

// Flush stores what the filesystem counted since the last flush, and what
// a failed flush kept, in one transaction; on failure it keeps it all.
func (a *ReadAudit) Flush(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.add(a.take())
	if len(a.pending) == 0 {
		return nil
	}
	batch := slices.Collect(maps.Values(a.pending))
	// Bounded, so that an index that does not answer keeps the counts in
	// memory, retried, rather than hang the flush and the queries behind it.
	ctx, cancel := indexCtx(ctx)
	defer cancel()
	if err := a.db.AddReads(ctx, batch); err != nil {
		if !a.failing {
			a.log.Error("flush the read audit: the counts are kept in memory and retried", "files", len(batch), "err", err)
		}
		a.failing = true
		return err
	}
	if a.failing {
		a.log.Info("read audit flushed again", "files", len(batch))
		a.failing = false
	}
	clear(a.pending)
	return nil
}

// Close stores the last counts once the filesystem no longer serves,
// retrying for a few seconds; what the index cannot take then is lost, and
// the error says how much.
func (a *ReadAudit) Close() error {
	var err error
	for _, wait := range closeRetries {
		time.Sleep(wait)
		if err = a.Flush(context.Background()); err == nil {
			return nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var reads int64
	for _, r := range a.pending {
		reads += r.Reads
	}
	a.log.Error("the read audit's last counts are lost", "files", len(a.pending), "reads", reads, "err", err)
	return err
}

// Audit returns the files of skills a session read, ordered by slug and
// path: when it first read each and how many reads reached skillfs, with
// the counts not stored yet added in. A closed session keeps its audit; an
// unknown one is skills.ErrNotFound.
func (a *ReadAudit) Audit(ctx context.Context, session string) ([]skills.FileRead, error) {
	if err := a.Flush(ctx); err != nil {
		a.log.Warn("read audit asked for while its flush fails: counts not stored yet are added from memory", "err", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	stored, err := a.db.ReadAudit(ctx, session)
	if err != nil {
		return nil, err
	}
	byKey := make(map[auditKey]int, len(stored))
	for i, r := range stored {
		byKey[auditKey{session, r.Slug, r.Path}] = i
	}
	for k, p := range a.pending {
		if k.session != session {
			continue
		}
		if i, ok := byKey[k]; ok {
			addRead(&stored[i], p)
		} else {
			stored = append(stored, p)
		}
	}
	slices.SortFunc(stored, func(x, y skills.FileRead) int {
		return cmp.Or(cmp.Compare(x.Slug, y.Slug), cmp.Compare(x.Path, y.Path))
	})
	return stored, nil
}
