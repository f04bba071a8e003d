// Package events is the live half of the event log: it records events with
// the change they report and fans them out to the streams subscribed, in
// the order of their ids. The log itself is the index's (index.DB.Events);
// the streams, which read both, are the server's.
package events

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/index"
	"skillfs/skills"
)

// Adds is the stored payload of an activated event: the tools and MCP
// servers the skill adds (never nil lists: they encode as []).
type Adds struct {
	Tools []string `json:"tools"`
	MCPs  []string `json:"mcps"`
}

// addsOf is the payload of activated event e.
func addsOf(e api.Event) Adds { return Adds{Tools: api.NonNil(e.Tools), MCPs: api.NonNil(e.MCPs)} }

// Activated is the activated event of session's first open of slug at at,
// adding what a holds.
func (a Adds) Activated(session, slug string, at time.Time) api.Event {
	return api.Event{Type: skills.EventActivated, Session: session, Slug: slug, At: at, Tools: api.NonNil(a.Tools), MCPs: api.NonNil(a.MCPs)}
}

// movedTo is the stored payload of a moved event.
type movedTo struct {
	Host string `json:"host"`
}

// Stored is e as the event log keeps it.
func Stored(e api.Event) *skills.Event {
	s := &skills.Event{Type: e.Type, Session: e.Session, Slug: e.Slug, At: e.At}
	switch e.Type {
	case skills.EventActivated:
		s.Payload, _ = json.Marshal(addsOf(e)) // lists of strings always encode
	case skills.EventMoved:
		s.Payload, _ = json.Marshal(movedTo{Host: e.Host}) // a string always encodes
	}
	return s
}

// FromStored is the event an entry of the log reports.
func FromStored(s skills.Event) api.Event {
	e := api.Event{ID: s.ID, Type: s.Type, Session: s.Session, Parent: s.Parent, Slug: s.Slug, At: s.At}
	switch e.Type {
	case skills.EventActivated:
		var a Adds
		json.Unmarshal(s.Payload, &a) // checked when stored; an empty payload adds nothing
		e.Tools, e.MCPs = api.NonNil(a.Tools), api.NonNil(a.MCPs)
	case skills.EventMoved:
		var m movedTo
		json.Unmarshal(s.Payload, &m) // checked when stored
		e.Host = m.Host
	}
	return e
}

// SubscriberBuffer is how many events a stream may fall behind the live
// ones before it catches up from the log instead.
const SubscriberBuffer = 256

// Hub fans events out to subscribers. Every event is in the index before it
// is published, and events are published in the order of their ids, so a
// subscriber that misses some (its queue was full) finds them in the log.
type Hub struct {
	db  *index.DB
	seq sync.Mutex // held from an event's write to its publication

	mu   sync.Mutex
	subs map[*Subscriber]struct{}
}

// Subscriber is one event stream's queue. It holds no buffer while the
// stream keeps up: its queue grows as events wait to be taken, up to
// SubscriberBuffer, and is let go of each time they are taken, so an idle
// stream costs a few words.
type Subscriber struct {
	session string        // "" for every session
	ready   chan struct{} // something to take: events, a lag, or the end

	mu     sync.Mutex
	queue  []api.Event // published and not yet taken, oldest first
	lagged bool        // events were dropped: catch up from the log
	closed bool        // unsubscribed, or the daemon stops
}

// NewHub is the hub of the event log of db (nil: a hub no stream reads a
// log through).
func NewHub(db *index.DB) *Hub { return &Hub{db: db, subs: map[*Subscriber]struct{}{}} }

// Subscribe starts a queue of the events of session and its sub-agent
// sessions ("" for every session).
func (h *Hub) Subscribe(session string) *Subscriber {
	s := &Subscriber{session: session, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Unsubscribe ends s.
func (h *Hub) Unsubscribe(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		s.end()
	}
}

// offer queues e without ever blocking: with SubscriberBuffer events
// waiting, the queue is dropped and the stream told that it lagged (it
// catches up from the log, where those events are).
func (s *Subscriber) offer(e api.Event) {
	s.mu.Lock()
	switch {
	case s.closed || s.lagged:
	case len(s.queue) >= SubscriberBuffer:
		s.queue, s.lagged = nil, true
	default:
		s.queue = append(s.queue, e)
	}
	s.mu.Unlock()
	s.wake()
}

// lag tells the stream to catch up from the log.
func (s *Subscriber) lag() {
	s.mu.Lock()
	s.queue, s.lagged = nil, true
	s.mu.Unlock()
	s.wake()
}

// end tells the stream that nothing more comes.
func (s *Subscriber) end() {
	s.mu.Lock()
	s.queue, s.closed = nil, true
	s.mu.Unlock()
	s.wake()
}

func (s *Subscriber) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready fires when something waits to be taken.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Take returns what waits for the stream: the events queued (unless it
// lagged, when it is to catch up from the log instead), and whether
// nothing more comes.
func (s *Subscriber) Take() (evs []api.Event, lagged, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs, lagged, closed = s.queue, s.lagged, s.closed
	s.queue, s.lagged = nil, false
	return evs, lagged, closed
}

// Record has store write evs to the index together with the change they
// report (store passes them on to the index, which sets their ids), then
// publishes those stored, in the order of their ids, exactly as a replay
// from the log would send them.
func (h *Hub) Record(store func(evs ...*skills.Event) error, evs ...api.Event) error {
	st := make([]*skills.Event, len(evs))
	for i, e := range evs {
		st[i] = Stored(e)
	}
	h.seq.Lock()
	defer h.seq.Unlock()
	if err := store(st...); err != nil {
		return err
	}
	for _, s := range st {
		if s.ID > 0 {
			h.Publish(FromStored(*s))
		}
	}
	return nil
}

// Publish hands e to every subscriber it concerns (those of every session,
// of its session, and of its session's parent) without ever blocking:
// one whose buffer is full is told that it lagged, and catches up from the
// log.
func (h *Hub) Publish(e api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.session != "" && s.session != e.Session && s.session != e.Parent {
			continue
		}
		s.offer(e)
	}
}

// Nudge has every stream catch up from the log, for events another host
// recorded (the close or move of a session this host served).
func (h *Hub) Nudge() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.lag()
	}
}

// CloseAll ends every stream (shutdown).
func (h *Hub) CloseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		delete(h.subs, s)
		s.end()
	}
}

// Events reads a page of the log: at most limit events of session ("" for
// every session) after the id after (see index.DB.Events).
func (h *Hub) Events(ctx context.Context, session string, after int64, limit int) (*index.EventPage, error) {
	return h.db.Events(ctx, session, after, limit)
}

// LastEventID is the id of the newest event of the log.
func (h *Hub) LastEventID(ctx context.Context) (int64, error) { return h.db.LastEventID(ctx) }

// Subscribers is how many streams are subscribed.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
