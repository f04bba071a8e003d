package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// recorder is the filesystem's activation sink. The first open of a skill in
// a session is written durably before the open returns; later opens are
// counted in memory and flushed in batches (and at shutdown).
type recorder struct {
	db     *index.DB
	events *hub
	log    *slog.Logger

	firstMu sync.Mutex // serialises durable first writes

	// closeMu is held shared by every Opened call and exclusively by close,
	// so that an open either is counted before the last flush or fails.
	closeMu sync.RWMutex
	closed  bool

	// flushMu is held by a flush from taking the batch until it is stored,
	// and shared by activations, so a query never sees a batch in neither
	// place (or in both).
	flushMu sync.RWMutex

	mu      sync.Mutex
	seen    map[actKey]bool
	pending map[actKey]*index.OpenDelta
}

type actKey struct{ session, slug string }

func newRecorder(db *index.DB, events *hub, log *slog.Logger) *recorder {
	return &recorder{db: db, events: events, log: log,
		seen: map[actKey]bool{}, pending: map[actKey]*index.OpenDelta{}}
}

// errShuttingDown fails opens that arrive after the last flush.
var errShuttingDown = errors.New("skillfs is shutting down")

// Opened implements fs.Sink.
func (r *recorder) Opened(session, slug string) error {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		return errShuttingDown
	}
	k := actKey{session, slug}
	now := time.Now().UTC()
	if r.countIfSeen(k, now) {
		return nil
	}
	r.firstMu.Lock()
	defer r.firstMu.Unlock()
	if r.countIfSeen(k, now) {
		return nil
	}
	first, err := r.db.RecordActivation(context.Background(), session, slug, now)
	if err != nil {
		r.log.Error("record activation", "session", session, "slug", slug, "err", err)
		return err
	}
	r.mu.Lock()
	r.seen[k] = true
	r.mu.Unlock()
	r.log.Debug("activation", "session", session, "slug", slug, "first", first)
	if first {
		r.events.publish(Event{Type: "activated", Session: session, Slug: slug, At: now})
	}
	return nil
}

func (r *recorder) countIfSeen(k actKey, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen[k] {
		return false
	}
	p := r.pending[k]
	if p == nil {
		p = &index.OpenDelta{Session: k.session, Slug: k.slug}
		r.pending[k] = p
	}
	p.Opens++
	p.LastAt = now
	return true
}

// activations returns a session's stored activations with the opens not
// yet flushed added in.
func (r *recorder) activations(ctx context.Context, session string) ([]skills.Activation, error) {
	r.flushMu.RLock()
	defer r.flushMu.RUnlock()
	stored, err := r.db.Activations(ctx, session)
	if err != nil {
		return nil, err
	}
	return merge(stored, r.pendingFor(session)), nil
}

// pendingFor returns the not yet flushed opens of a session, by slug.
func (r *recorder) pendingFor(session string) map[string]index.OpenDelta {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]index.OpenDelta{}
	for k, p := range r.pending {
		if k.session == session {
			out[k.slug] = *p
		}
	}
	return out
}

// forget drops a closed session's state.
func (r *recorder) forget(session string) {
	r.flush(context.Background())
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.seen {
		if k.session == session {
			delete(r.seen, k)
		}
	}
}

// flush writes the batched opens in one transaction; on failure they are
// kept for the next try.
func (r *recorder) flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	if len(r.pending) == 0 {
		r.mu.Unlock()
		return nil
	}
	batch := r.pending
	r.pending = map[actKey]*index.OpenDelta{}
	r.mu.Unlock()
	deltas := make([]index.OpenDelta, 0, len(batch))
	for _, p := range batch {
		deltas = append(deltas, *p)
	}
	if err := r.db.AddOpens(ctx, deltas); err != nil {
		r.mu.Lock()
		for k, p := range batch {
			if q := r.pending[k]; q != nil {
				p.Opens += q.Opens
				if q.LastAt.After(p.LastAt) {
					p.LastAt = q.LastAt
				}
			}
			r.pending[k] = p
		}
		r.mu.Unlock()
		r.log.Error("flush activations", "err", err)
		return err
	}
	return nil
}

// run flushes periodically until ctx ends; close does the last flush.
func (r *recorder) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.flush(ctx)
		}
	}
}

// close waits for opens in progress, refuses later ones and flushes.
func (r *recorder) close() error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	r.closed = true
	return r.flush(context.Background())
}

// merge adds pending opens to stored activations.
func merge(stored []skills.Activation, pending map[string]index.OpenDelta) []skills.Activation {
	for i := range stored {
		if p, ok := pending[stored[i].Slug]; ok {
			stored[i].Opens += p.Opens
			if p.LastAt.After(stored[i].LastAt) {
				stored[i].LastAt = p.LastAt
			}
		}
	}
	return stored
}
