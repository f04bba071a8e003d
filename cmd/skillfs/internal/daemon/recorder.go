package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
)

// recorder is the filesystem's activation sink. The first open of a skill in
// a session is written durably before the open returns; later opens are
// counted in memory and flushed in batches (and at shutdown). What the index
// cannot take — it cannot be reached, or refuses the last flush at
// shutdown — goes to the activation journal (see journal.go) and is
// delivered, exactly once, when it can.
type recorder struct {
	db      activationIndex
	events  *events.Hub
	log     *slog.Logger
	metrics *metrics // counts what is recorded (nil: nothing)

	firstMu sync.Mutex // serialises durable first writes

	// closeMu is held shared by every Opened call and exclusively by close,
	// so that an open either is counted before the last flush or fails.
	closeMu sync.RWMutex
	closed  bool

	// flushMu is held by a flush from taking the batch until it is stored,
	// and shared by activations, so a query never sees a batch in neither
	// place (or in both). Deliveries from the journal hold it too.
	flushMu sync.RWMutex

	mu      sync.Mutex
	seen    map[actKey]bool
	pending map[actKey]*index.OpenDelta

	// journal keeps what the index cannot take; nil keeps nothing, and an
	// open the index cannot record fails.
	journal *journal
	// down says the index was unreachable at the last try: first
	// activations go to the journal without trying it, until a delivery
	// or a flush gets through.
	down atomic.Bool
	// set is the catalog as last read (at every flush while the index is
	// reachable): what a skill adds is looked up in it while it is not.
	set atomic.Pointer[index.SkillSet]
	// retryAt and backoff pace the deliveries that fail. Guarded by
	// flushMu, as are failing and stuck.
	retryAt time.Time
	backoff time.Duration
	failing bool // the last flush failed (logged once until it works again)
	stuck   bool // the last delivery failed (likewise)
}

// activationIndex is what the recorder asks of the index: *index.DB, or in
// tests one that fails as an index that cannot be reached does.
type activationIndex interface {
	Skill(ctx context.Context, slug string) (*skills.Skill, error)
	SkillSet(ctx context.Context) (*index.SkillSet, error)
	RecordActivation(ctx context.Context, session, slug string, at time.Time, evs ...*skills.Event) (bool, error)
	ApplySpill(ctx context.Context, id string, deltas []index.OpenDelta, evs ...*skills.Event) (bool, error)
	Activations(ctx context.Context, session string) ([]skills.Activation, error)
}

type actKey struct{ session, slug string }

func newRecorder(db activationIndex, hub *events.Hub, log *slog.Logger) *recorder {
	return &recorder{db: db, events: hub, log: log,
		seen: map[actKey]bool{}, pending: map[actKey]*index.OpenDelta{}}
}

// indexTimeout bounds each call the recorder makes to the index: an index
// that does not answer within it counts as unreachable, so an open waits
// for it at most this long, once, before the journal takes over.
var indexTimeout = 5 * time.Second

// Delivery from the journal is retried after a failure, waiting twice as
// long each time within these bounds.
const (
	minRetry = 250 * time.Millisecond
	maxRetry = 2 * time.Second
)

// unreachable reports whether err says the index cannot be reached (or did
// not answer in time), as opposed to refusing what was asked.
func unreachable(err error) bool {
	return errors.Is(err, skills.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// asUnavailable has an index that did not answer in time reported as one
// that cannot be reached.
func asUnavailable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, skills.ErrUnavailable) {
		return fmt.Errorf("%w: %w", err, skills.ErrUnavailable)
	}
	return err
}

// indexCtx bounds a call to the index (indexTimeout).
func indexCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, indexTimeout)
}

// markDown notes that the index cannot be reached.
func (r *recorder) markDown(err error) {
	if r.journal != nil && !r.down.Swap(true) {
		r.log.Warn("the index cannot be reached: activations are kept in the journal until it is back", "err", err)
	}
}

// markUp notes that the index answered.
func (r *recorder) markUp() {
	if r.down.Swap(false) {
		r.log.Info("the index is reachable again")
	}
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
func (r *recorder) activatedEvent(session, slug string, now time.Time) (api.Event, error) {
	ev := api.Event{Type: skills.EventActivated, Session: session, Slug: slug, At: now}
	sk, err := r.skill(slug)
	switch {
	case err == nil:
		ev.Tools, ev.MCPs, _ = policy.ToolsToLoad([]*skills.Skill{sk})
	case !errors.Is(err, skills.ErrNotFound): // deleted meanwhile: it adds nothing
		return ev, err // a failed query is not "no tools"
	}
	return ev, nil
}

// skill looks slug up in the index or, while it cannot be reached, in the
// catalog as last read.
func (r *recorder) skill(slug string) (*skills.Skill, error) {
	if !r.down.Load() || r.journal == nil {
		ctx, cancel := indexCtx(context.Background())
		defer cancel()
		sk, err := r.db.Skill(ctx, slug)
		if !unreachable(err) || r.journal == nil {
			return sk, asUnavailable(err)
		}
		r.markDown(err)
	}
	set := r.set.Load()
	if set == nil {
		return nil, fmt.Errorf("look up skill %q: the index cannot be reached and no catalog was read before: %w", slug, skills.ErrUnavailable)
	}
	if sk := set.Get(slug); sk != nil {
		return sk, nil
	}
	return nil, skills.ErrNotFound
}

// recordFirst stores an open that is not known to be a later one; if it is
// the session's first of the skill, ev (its activated event) is stored with
// it and published. While the index cannot be reached the open goes to the
// journal instead (first is then true: the recorder had not seen it), and
// its event is stored and published when it is delivered.
func (r *recorder) recordFirst(ev api.Event) (first bool, err error) {
	if !r.down.Load() || r.journal == nil {
		ctx, cancel := indexCtx(context.Background())
		defer cancel()
		err = r.events.Record(func(evs ...*skills.Event) error {
			first, err = r.db.RecordActivation(ctx, ev.Session, ev.Slug, ev.At, evs...)
			return err
		}, ev)
		if !unreachable(err) || r.journal == nil {
			return first, asUnavailable(err)
		}
		// The write may have been stored with its answer lost: the
		// journal's copy, of the same time, is then skipped.
		r.markDown(err)
	}
	e := journalEntry{ID: newEntryID(), First: &ev,
		Deltas: []index.OpenDelta{{Session: ev.Session, Slug: ev.Slug, Opens: 1, LastAt: ev.At}}}
	if err := r.journal.append(e); err != nil {
		return false, fmt.Errorf("record activation of skill %q in session %q: the index cannot be reached, and %w: %w",
			ev.Slug, ev.Session, err, skills.ErrUnavailable)
	}
	return true, nil
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
// yet stored — kept in the journal or in memory — added in. While the
// index cannot be reached it fails with skills.ErrUnavailable rather than
// answer from this host's part alone.
func (r *recorder) activations(ctx context.Context, session string) ([]skills.Activation, error) {
	r.flushMu.RLock()
	defer r.flushMu.RUnlock()
	ctx, cancel := indexCtx(ctx)
	defer cancel()
	stored, err := r.db.Activations(ctx, session)
	if err != nil {
		return nil, asUnavailable(err)
	}
	var kept map[string]skills.Activation
	if r.journal != nil {
		kept = r.journal.pendingFor(session)
	}
	return merge(stored, kept, r.pendingFor(session)), nil
}

// pendingFor returns the not yet flushed opens of a session, by slug.
func (r *recorder) pendingFor(session string) map[string]index.OpenDelta {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ofSession(r.pending, session)
}

// ofSession returns copies of the values of m that concern session, by
// slug.
func ofSession[V any](m map[actKey]*V, session string) map[string]V {
	out := map[string]V{}
	for k, v := range m {
		if k.session == session {
			out[k.slug] = *v
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

// useJournal gives the recorder its journal, as read at start: the first
// activations it holds count as seen, and it is delivered now and, if the
// index cannot take it yet, at every flush until it can.
func (r *recorder) useJournal(ctx context.Context, j *journal) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.journal = j
	r.mu.Lock()
	for _, k := range j.firsts() {
		r.seen[k] = true
	}
	r.mu.Unlock()
	r.readCatalog(ctx)
	r.deliver(ctx)
}

// readCatalog keeps the catalog as it is now, for lookups while the index
// cannot be reached. The caller holds flushMu.
func (r *recorder) readCatalog(ctx context.Context) {
	if r.journal == nil || r.down.Load() {
		return
	}
	ctx, cancel := indexCtx(ctx)
	defer cancel()
	if set, err := r.db.SkillSet(ctx); err == nil {
		r.set.Store(set)
	}
}

// deliver hands the journal's records to the index, oldest first, each
// exactly once, unless the last failure asks to wait longer. The caller
// holds flushMu.
func (r *recorder) deliver(ctx context.Context) {
	if r.journal == nil || r.journal.pending() == 0 || time.Now().Before(r.retryAt) {
		return
	}
	n := 0
	err := r.journal.deliver(func(e journalEntry) error {
		ctx, cancel := indexCtx(ctx)
		defer cancel()
		_, err := r.store(ctx, e)
		if errors.Is(err, skills.ErrInvalid) {
			r.log.Error("the index refuses a record of the activation journal: dropped", "record", e.ID, "err", err)
			return nil
		}
		if err == nil {
			n++
		}
		return err
	})
	if err != nil {
		if unreachable(err) {
			r.markDown(err)
		} else if !r.stuck {
			r.log.Error("deliver the activation journal: kept and retried", "records", r.journal.pending(), "err", err)
		}
		r.stuck = true
		r.backoff = min(max(2*r.backoff, minRetry), maxRetry)
		r.retryAt = time.Now().Add(r.backoff)
		return
	}
	r.markUp()
	r.stuck, r.backoff, r.retryAt = false, 0, time.Time{}
	r.log.Info("activations kept in the journal delivered", "records", n)
}

// store applies one batch of opens exactly once (by its id), with the
// activated event of a first activation, published if it is stored.
func (r *recorder) store(ctx context.Context, e journalEntry) (applied bool, err error) {
	var evs []api.Event
	if e.First != nil {
		evs = append(evs, *e.First)
	}
	err = r.events.Record(func(st ...*skills.Event) error {
		applied, err = r.db.ApplySpill(ctx, e.ID, e.Deltas, st...)
		return err
	}, evs...)
	return applied, err
}

// flush stores the batched opens in one transaction. While the journal
// holds records not yet delivered, or the index cannot be reached, the
// batch goes to the journal, after them; when the index refuses it, or
// the journal cannot take it, it is kept in memory for the next try.
func (r *recorder) flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.deliver(ctx)
	r.readCatalog(ctx)
	r.mu.Lock()
	if len(r.pending) == 0 {
		r.mu.Unlock()
		return nil
	}
	batch := r.pending
	r.pending = map[actKey]*index.OpenDelta{}
	r.mu.Unlock()
	e := journalEntry{ID: newEntryID(), Deltas: make([]index.OpenDelta, 0, len(batch))}
	for _, p := range batch {
		e.Deltas = append(e.Deltas, *p)
	}
	var err error
	if r.journal == nil || (!r.down.Load() && r.journal.pending() == 0) {
		ictx, cancel := indexCtx(ctx)
		start := time.Now()
		_, err = r.store(ictx, e)
		cancel()
		r.metrics.flushed(time.Since(start), err)
		if err == nil {
			r.markUp()
			if r.failing {
				r.log.Info("activations flushed again", "skills", len(e.Deltas))
				r.failing = false
			}
			return nil
		}
		if !unreachable(err) || r.journal == nil {
			r.keep(batch, err)
			return asUnavailable(err)
		}
		// Stored perhaps, its answer lost: the journal's copy has the
		// same id, so it is applied at most once.
		r.markDown(err)
	}
	if jerr := r.journal.append(e); jerr != nil {
		r.keep(batch, jerr)
		return jerr
	}
	return nil
}

// keep puts a batch that could not be stored back into pending, adding it
// to what was counted meanwhile. The caller holds flushMu.
func (r *recorder) keep(batch map[actKey]*index.OpenDelta, err error) {
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
}

// journalPending moves what is pending into the journal, for the next
// start to deliver. When it does not all fit, the counts of the most
// opened skills go first and the rest are reported lost. The caller holds
// flushMu.
func (r *recorder) journalPending() (kept, lost int64, err error) {
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
	if r.journal == nil {
		return 0, sum(all), errors.New("no activation journal")
	}
	for n := len(all); n > 0; n = n * 3 / 4 {
		if err = r.journal.append(journalEntry{ID: newEntryID(), Deltas: all[:n]}); err != nil {
			continue
		}
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
// it journals them.
var closeRetries = []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// close waits for opens in progress, refuses later ones and flushes. When
// the index cannot take the last opens (a full disk), it retries for a few
// seconds, then keeps them in the journal for the next start; only when
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
	kept, lost, jerr := r.journalPending()
	if kept > 0 {
		r.log.Warn("the index could not take the last activations: kept in the journal, delivered at the next start",
			"opens", kept, "err", err)
	}
	if jerr == nil && lost > 0 {
		jerr = errors.New("the activation journal cannot take them all")
	}
	if jerr != nil {
		return fmt.Errorf("%d opens could not be stored (%v) nor kept in the journal: %w", lost, err, jerr)
	}
	return nil
}

// merge adds to stored activations the opens kept in the journal and those
// pending in memory. A first activation only the journal holds is listed
// after the stored ones, in order of its time.
func merge(stored []skills.Activation, kept map[string]skills.Activation, pending map[string]index.OpenDelta) []skills.Activation {
	add := func(a *skills.Activation, opens int64, last time.Time) {
		a.Opens += opens
		if last.After(a.LastAt) {
			a.LastAt = last
		}
	}
	have := map[string]bool{}
	for i := range stored {
		have[stored[i].Slug] = true
	}
	var fresh []skills.Activation
	for slug, k := range kept {
		if !have[slug] && !k.FirstAt.IsZero() {
			fresh = append(fresh, skills.Activation{Session: k.Session, Slug: slug, FirstAt: k.FirstAt})
		}
	}
	slices.SortFunc(fresh, func(a, b skills.Activation) int { return a.FirstAt.Compare(b.FirstAt) })
	out := append(stored, fresh...)
	for i := range out {
		if k, ok := kept[out[i].Slug]; ok {
			add(&out[i], k.Opens, k.LastAt)
		}
		if p, ok := pending[out[i].Slug]; ok {
			add(&out[i], p.Opens, p.LastAt)
		}
	}
	return out
}
