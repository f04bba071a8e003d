package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
)

// recorder is the filesystem's activation sink. The first open of a skill in
// a session is written durably before the open returns; later opens are
// counted in memory and flushed in batches (and at shutdown).
type recorder struct {
	db      *index.DB
	events  *hub
	log     *slog.Logger
	metrics *metrics // counts what is recorded (nil: nothing)

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

	// spill keeps what the last flush at shutdown could not store; spilled
	// holds batches found in it at start and not yet applied. Both are
	// guarded by flushMu.
	spill   *spillFile
	spilled []spillBatch
	failing bool // the last flush failed (logged once until it works again)
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
		r.metrics.opened(slug, false)
		return nil
	}
	// What the skill adds is read before the section that serialises
	// first opens, so those of different skills do not wait on each
	// other's lookups.
	ev, err := r.activatedEvent(session, slug, now)
	if err != nil {
		r.log.Error("record activation", "session", session, "slug", slug, "err", err)
		return err
	}
	r.firstMu.Lock()
	defer r.firstMu.Unlock()
	if r.countIfSeen(k, now) {
		r.metrics.opened(slug, false)
		return nil
	}
	first, err := r.recordFirst(ev)
	if err != nil {
		r.log.Error("record activation", "session", session, "slug", slug, "err", err)
		return err
	}
	r.mu.Lock()
	r.seen[k] = true
	r.mu.Unlock()
	r.metrics.opened(slug, first)
	r.log.Debug("activation", "session", session, "slug", slug, "first", first)
	return nil
}

// activatedEvent is the event of a session's first open of slug at now,
// naming the tools and MCP servers the skill adds.
func (r *recorder) activatedEvent(session, slug string, now time.Time) (Event, error) {
	ev := Event{Type: "activated", Session: session, Slug: slug, At: now}
	sk, err := r.db.Skill(context.Background(), slug)
	switch {
	case err == nil:
		ev.Tools, ev.MCPs, _ = policy.ToolsToLoad([]*skills.Skill{sk})
	case !errors.Is(err, skills.ErrNotFound): // deleted meanwhile: it adds nothing
		return ev, err // a failed query is not "no tools"
	}
	return ev, nil
}

// recordFirst stores an open that is not known to be a later one; if it is
// the session's first of the skill, ev (its activated event) is stored with
// it and published.
func (r *recorder) recordFirst(ev Event) (first bool, err error) {
	err = r.events.record(func(evs ...*skills.Event) error {
		first, err = r.db.RecordActivation(context.Background(), ev.Session, ev.Slug, ev.At, evs...)
		return err
	}, ev)
	return first, err
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
	pending := r.pendingFor(session)
	for _, b := range r.spilled { // kept from a previous run, not yet stored
		for _, d := range b.Deltas {
			if d.Session == session {
				pending[d.Slug] = addDelta(pending[d.Slug], d)
			}
		}
	}
	return merge(stored, pending), nil
}

func addDelta(a, b index.OpenDelta) index.OpenDelta {
	a.Session, a.Slug = b.Session, b.Slug
	a.Opens += b.Opens
	if b.LastAt.After(a.LastAt) {
		a.LastAt = b.LastAt
	}
	return a
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

// useSpill gives the recorder a spill file and the batches found in it,
// which it applies now and, if the index cannot take them yet, at every
// flush until it can.
func (r *recorder) useSpill(ctx context.Context, sp *spillFile, batches []spillBatch) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.spill, r.spilled = sp, batches
	r.applySpilled(ctx)
}

// applySpilled applies the batches of the spill file, each exactly once,
// and clears the file of those applied. The caller holds flushMu.
func (r *recorder) applySpilled(ctx context.Context) {
	if len(r.spilled) == 0 {
		return
	}
	var left []spillBatch
	var opens int64
	for _, b := range r.spilled {
		applied, err := r.db.ApplySpill(ctx, b.ID, b.Deltas)
		if err != nil {
			left = append(left, b)
			continue
		}
		for _, d := range b.Deltas {
			opens += d.Opens
		}
		if applied {
			r.log.Info("activations kept in the spill file applied", "batch", b.ID, "skills", len(b.Deltas))
		}
	}
	if len(left) == len(r.spilled) {
		return
	}
	if err := r.spill.write(left); err != nil {
		// Applied batches stay in the file; their ids make a second
		// application a no-op.
		r.log.Warn("clear the activation spill file", "err", err)
	}
	r.spilled = left
}

// flush writes the batched opens in one transaction; on failure they are
// kept for the next try.
func (r *recorder) flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.applySpilled(ctx)
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
	start := time.Now()
	err := r.db.AddOpens(ctx, deltas)
	r.metrics.flushed(time.Since(start), err)
	if err != nil {
		r.mu.Lock()
		var kept int64
		for k, p := range batch {
			if q := r.pending[k]; q != nil {
				p.Opens += q.Opens
				if q.LastAt.After(p.LastAt) {
					p.LastAt = q.LastAt
				}
			}
			r.pending[k] = p
			kept += p.Opens
		}
		r.mu.Unlock()
		if !r.failing {
			r.log.Error("flush activations: the opens are kept in memory and retried", "opens", kept, "err", err)
		}
		r.failing = true
		return err
	}
	if r.failing {
		r.log.Info("activations flushed again", "skills", len(deltas))
		r.failing = false
	}
	return nil
}

// spillPending moves what is pending into the spill file, for the next
// start to apply. When it does not all fit, the counts of the most opened
// skills go first and the rest are reported lost. The caller holds flushMu.
func (r *recorder) spillPending() (kept, lost int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := make([]index.OpenDelta, 0, len(r.pending))
	for _, p := range r.pending {
		all = append(all, *p)
	}
	slices.SortFunc(all, func(a, b index.OpenDelta) int { return cmp.Compare(b.Opens, a.Opens) })
	sum := func(ds []index.OpenDelta) (n int64) {
		for _, d := range ds {
			n += d.Opens
		}
		return n
	}
	if len(all) == 0 {
		return 0, 0, nil
	}
	if r.spill == nil {
		return 0, sum(all), errors.New("no spill file")
	}
	for n := len(all); n > 0; n = n * 3 / 4 {
		b := spillBatch{ID: newSpillID(), Deltas: all[:n]}
		err = r.spill.write(append(slices.Clone(r.spilled), b))
		if errors.Is(err, errSpillFull) {
			continue
		}
		if err != nil {
			return 0, sum(all), err
		}
		r.spilled = append(r.spilled, b)
		r.pending = map[actKey]*index.OpenDelta{}
		return sum(all[:n]), sum(all[n:]), nil
	}
	return 0, sum(all), err
}

// run flushes periodically until ctx ends; close does the last flush.
func (r *recorder) run(ctx context.Context, every time.Duration) {
	periodically(ctx, every, func() { r.flush(ctx) })
}

// closeRetries bounds how long close tries to store the last opens before
// it spills them.
var closeRetries = []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// close waits for opens in progress, refuses later ones and flushes. When
// the index cannot take the last opens (a full disk), it retries for a few
// seconds, then keeps them in the spill file for the next start; only when
// that fails too are they lost, and the error says how many.
func (r *recorder) close() error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	r.closed = true
	var err error
	for _, wait := range closeRetries {
		time.Sleep(wait)
		if err = r.flush(context.Background()); err == nil {
			break
		}
	}
	if err == nil {
		return nil
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	kept, lost, serr := r.spillPending()
	if kept > 0 {
		r.log.Warn("the index could not take the last activations: kept in the spill file, applied at the next start",
			"opens", kept, "err", err)
	}
	if serr == nil && lost > 0 {
		serr = errSpillFull
	}
	if serr != nil {
		return fmt.Errorf("%d opens could not be stored (%v) nor kept in the spill file: %w", lost, err, serr)
	}
	return nil
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
