package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// Event is what tool loaders receive on the event stream.
type Event struct {
	// ID orders events; it keeps growing across restarts (the index gives
	// it) and is the stream's "id:", to resume from with Last-Event-ID.
	ID      int64     `json:"id"`
	Type    string    `json:"type"` // "activated", "revoked", "refreshed", "changed", "moved", "closed"; "resync"
	Session string    `json:"session"`
	Slug    string    `json:"slug,omitempty"`
	At      time.Time `json:"at"`
	// Tools and MCPs are, on an activated event (and only there), the tools
	// and MCP servers the skill adds: its own dependencies, as the
	// activations query reports them.
	Tools []string `json:"tools,omitzero"`
	MCPs  []string `json:"mcps,omitzero"`
	// Host is, on a moved event (and only there), the id of the host that
	// serves the session from then on.
	Host string `json:"host,omitempty"`
	// Reason says, on a resync event, why the stream cannot go on.
	Reason string `json:"reason,omitempty"`
}

// adds is the stored payload of an activated event.
type adds struct {
	Tools []string `json:"tools"`
	MCPs  []string `json:"mcps"`
}

// movedTo is the stored payload of a moved event.
type movedTo struct {
	Host string `json:"host"`
}

// stored is e as the event log keeps it.
func (e Event) stored() *skills.Event {
	s := &skills.Event{Type: e.Type, Session: e.Session, Slug: e.Slug, At: e.At}
	switch e.Type {
	case "activated":
		s.Payload, _ = json.Marshal(adds{Tools: nonNil(e.Tools), MCPs: nonNil(e.MCPs)}) // lists of strings always encode
	case "moved":
		s.Payload, _ = json.Marshal(movedTo{Host: e.Host}) // a string always encodes
	}
	return s
}

// fromStored is the event an entry of the log reports.
func fromStored(s skills.Event) Event {
	e := Event{ID: s.ID, Type: s.Type, Session: s.Session, Slug: s.Slug, At: s.At}
	switch e.Type {
	case "activated":
		var a adds
		json.Unmarshal(s.Payload, &a) // checked when stored; an empty payload adds nothing
		e.Tools, e.MCPs = nonNil(a.Tools), nonNil(a.MCPs)
	case "moved":
		var m movedTo
		json.Unmarshal(s.Payload, &m) // checked when stored
		e.Host = m.Host
	}
	return e
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// subscriberBuffer is how many events a stream may fall behind the live
// ones before it catches up from the log instead.
const subscriberBuffer = 256

// hub fans events out to subscribers. Every event is in the index before it
// is published, and events are published in the order of their ids, so a
// subscriber that misses some (its queue was full) finds them in the log.
type hub struct {
	db  *index.DB
	seq sync.Mutex // held from an event's write to its publication

	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

// subscriber is one event stream's queue. It holds no buffer while the
// stream keeps up: its queue grows as events wait to be taken, up to
// subscriberBuffer, and is let go of each time they are taken, so an idle
// stream costs a few words.
type subscriber struct {
	session string        // "" for every session
	ready   chan struct{} // something to take: events, a lag, or the end

	mu     sync.Mutex
	queue  []Event // published and not yet taken, oldest first
	lagged bool    // events were dropped: catch up from the log
	closed bool    // unsubscribed, or the daemon stops
}

func newHub(db *index.DB) *hub { return &hub{db: db, subs: map[*subscriber]struct{}{}} }

func (h *hub) subscribe(session string) *subscriber {
	s := &subscriber{session: session, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		s.end()
	}
}

// offer queues e without ever blocking: with subscriberBuffer events
// waiting, the queue is dropped and the stream told that it lagged (it
// catches up from the log, where those events are).
func (s *subscriber) offer(e Event) {
	s.mu.Lock()
	switch {
	case s.closed || s.lagged:
	case len(s.queue) >= subscriberBuffer:
		s.queue, s.lagged = nil, true
	default:
		s.queue = append(s.queue, e)
	}
	s.mu.Unlock()
	s.wake()
}

// lag tells the stream to catch up from the log.
func (s *subscriber) lag() {
	s.mu.Lock()
	s.queue, s.lagged = nil, true
	s.mu.Unlock()
	s.wake()
}

// end tells the stream that nothing more comes.
func (s *subscriber) end() {
	s.mu.Lock()
	s.queue, s.closed = nil, true
	s.mu.Unlock()
	s.wake()
}

func (s *subscriber) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns what waits for the stream: the events queued (unless it
// lagged, when it is to catch up from the log instead), and whether
// nothing more comes.
func (s *subscriber) take() (evs []Event, lagged, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs, lagged, closed = s.queue, s.lagged, s.closed
	s.queue, s.lagged = nil, false
	return evs, lagged, closed
}

// record has store write evs to the index together with the change they
// report (store passes them on to the index, which sets their ids), then
// publishes those stored, in the order of their ids, exactly as a replay
// from the log would send them.
func (h *hub) record(store func(evs ...*skills.Event) error, evs ...Event) error {
	st := make([]*skills.Event, len(evs))
	for i, e := range evs {
		st[i] = e.stored()
	}
	h.seq.Lock()
	defer h.seq.Unlock()
	if err := store(st...); err != nil {
		return err
	}
	for _, s := range st {
		if s.ID > 0 {
			h.publish(fromStored(*s))
		}
	}
	return nil
}

// publish hands e to every subscriber it concerns without ever blocking:
// one whose buffer is full is told that it lagged, and catches up from the
// log.
func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.session != "" && s.session != e.Session {
			continue
		}
		s.offer(e)
	}
}

// nudge has every stream catch up from the log, for events another host
// recorded (the close or move of a session this host served).
func (h *hub) nudge() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.lag()
	}
}

// closeAll ends every stream (shutdown).
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		delete(h.subs, s)
		s.end()
	}
}

// Event retention (daemon.Options): the log keeps events for
// DefaultEventRetention and at most DefaultEventRetainCount of them,
// pruning every eventPruneEvery.
const (
	DefaultEventRetention   = 7 * 24 * time.Hour
	DefaultEventRetainCount = 100_000
	eventPruneEvery         = time.Minute
)

// appliedRetention is how long the index keeps the id of an activation
// batch it applied (index.DB.PruneApplied): a host stopped longer than this
// between delivering its journal and clearing it would count the batch
// again at its next start.
const appliedRetention = 90 * 24 * time.Hour

// pruneEvents keeps the event log within its retention until ctx ends, and
// forgets the ids of activation batches applied long ago.
func (d *Daemon) pruneEvents(ctx context.Context, keepFor time.Duration, keep int64) {
	prune := func() {
		n, err := d.events.db.PruneEvents(ctx, time.Now().Add(-keepFor), keep)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("prune the event log", "err", err)
		case n > 0:
			d.log.Debug("event log pruned", "events", n)
		}
		n, err = d.events.db.PruneApplied(ctx, time.Now().Add(-appliedRetention))
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("prune the ids of applied activation batches", "err", err)
		case n > 0:
			d.log.Debug("ids of applied activation batches pruned", "ids", n)
		}
	}
	prune()
	periodically(ctx, eventPruneEvery, prune)
}

// parseEventID reads an event id a client sent back (Last-Event-ID or
// ?after=): a non-negative decimal number.
func parseEventID(s string) (int64, error) {
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("event id %q: want a non-negative decimal number: %w", s, skills.ErrInvalid)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("event id %q: want a non-negative decimal number: %w", s, skills.ErrInvalid)
	}
	return n, nil
}

// resumeFrom returns the id a client asks to resume after: its
// Last-Event-ID header, else the ?after= query (the header wins: a browser
// reconnecting sends it with the URL it first used).
func resumeFrom(r *http.Request) (after int64, resume bool, err error) {
	v, where := r.Header.Get("Last-Event-ID"), "Last-Event-ID header"
	if v == "" {
		if !r.URL.Query().Has("after") {
			return 0, false, nil
		}
		v, where = r.URL.Query().Get("after"), "query parameter after"
	}
	n, err := parseEventID(v)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", where, err)
	}
	return n, true, nil
}

// replayPage is how many events a stream reads from the log at a time.
const replayPage = 500

// eventStream is one client's stream: what it was sent up to, and where.
type eventStream struct {
	w       http.ResponseWriter
	fl      http.Flusher
	log     *index.DB
	session string // "" for every session
	last    int64  // the id of the last event sent, or where the client stands
	// fromLog has every event read from the log, a live one only saying
	// that there is more to read: with a shared index other hosts write
	// events too, and an event published here may overtake one another
	// host committed before it (ids follow commit order, writes taking
	// turns), which sending it first would skip for good.
	fromLog bool
}

// send writes one event. It reports done when the stream has nothing more
// to say (its session closed) or cannot go on.
func (s *eventStream) send(e Event) (done bool) {
	b, _ := json.Marshal(e) // an Event always encodes
	if _, err := fmt.Fprintf(s.w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, b); err != nil {
		return true
	}
	s.fl.Flush()
	if e.ID > s.last {
		s.last = e.ID
	}
	return s.session != "" && e.Type == "closed"
}

// catchUp sends from the log every event after the last sent. When the log
// no longer holds them all, or the client stands at an id this log never
// gave (resuming, another data directory), it sends a resync event and
// reports done.
func (s *eventStream) catchUp(ctx context.Context, resuming bool) (done bool) {
	for {
		page, err := s.log.Events(ctx, s.session, s.last, replayPage)
		if err != nil {
			// The client is gone, or the index failed: end the stream, and
			// a client that reconnects resumes where it stood.
			return true
		}
		switch {
		case page.Pruned > s.last:
			return s.resync(page, fmt.Sprintf("events after id %d are no longer kept (retention)", s.last))
		case resuming && s.last > page.Last:
			return s.resync(page, fmt.Sprintf("id %d was never given by this daemon's event log (the newest is %d)", s.last, page.Last))
		}
		resuming = false
		for _, e := range page.Events {
			if s.send(fromStored(e)) {
				return true
			}
		}
		if len(page.Events) < replayPage {
			return false
		}
	}
}

// resync tells the client that it missed events it cannot be sent: it is
// to read the activations again and reconnect, with Last-Event-ID set to
// this event's id (the newest the log had given).
func (s *eventStream) resync(page *index.EventPage, reason string) bool {
	s.send(Event{ID: page.Last, Type: "resync", Session: s.session, At: time.Now().UTC(), Reason: reason})
	return true
}

// stream sends events as server-sent events, one JSON object per event with
// its id, and a comment line every 15 s to keep idle connections alive. A
// client that resumes (Last-Event-ID, or ?after=ID) first gets every event
// after that id from the log, then the live ones, with no gap and none
// twice: the stream subscribes before it reads the log and sends only ids
// above the last it sent. A stream that falls behind catches up from the
// log. For a session's stream, closed says whether the session is closed:
// asked after the stream subscribed and read the newest id, so a closed
// event still to come is one the stream gets. A closed session's stream
// ends after the replay; a new client of one is told it does not exist.
//
// It lives as long as its client reads: the API's read deadline covers
// request bodies only, and its write deadline each write (withDeadlines).
func (d *Daemon) stream(w http.ResponseWriter, r *http.Request, session string, closedNow func(context.Context) (bool, error)) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, errors.New("streaming unsupported"))
		return
	}
	after, resume, err := resumeFrom(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if lim := limitsOf(r); lim != nil {
		if !lim.streams.enter() {
			d.metrics.refused(limitStreams)
			writeErr(w, lim.streams.full(lim.name))
			return
		}
		defer lim.streams.leave()
	}
	sub := d.events.subscribe(session)
	defer d.events.unsubscribe(sub)
	s := &eventStream{w: w, fl: fl, log: d.events.db, session: session, last: after, fromLog: d.cat != nil && d.cat.Shared()}
	if !resume {
		// A new client starts with what happens from now on.
		if s.last, err = s.log.LastEventID(r.Context()); err != nil {
			writeErr(w, err)
			return
		}
	}
	closed := false
	if closedNow != nil {
		if closed, err = closedNow(r.Context()); err != nil {
			writeErr(w, err)
			return
		}
	}
	if closed && !resume {
		writeErr(w, fmt.Errorf("session %q is closed: %w", session, skills.ErrNotFound))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": subscribed\n\n")
	fl.Flush()
	if resume && (s.catchUp(r.Context(), true) || closed) {
		return
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return // the client is gone, or stopped reading past the write deadline
			}
			fl.Flush()
		case <-sub.ready:
			if s.deliver(r.Context(), sub) {
				return
			}
		}
	}
}

// deliver sends what waits in sub: from the log when it lagged (or every
// event comes from the log, fromLog), else the events queued that were not
// sent from the log already. It reports done as send does, or when sub
// ended.
func (s *eventStream) deliver(ctx context.Context, sub *subscriber) (done bool) {
	evs, lagged, closed := sub.take()
	if closed {
		return true
	}
	if lagged || (s.fromLog && len(evs) > 0) {
		return s.catchUp(ctx, false)
	}
	for _, e := range evs {
		if e.ID <= s.last {
			continue // sent from the log already
		}
		if s.send(e) {
			return true
		}
	}
	return false
}
