package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/index"
	"skillfs/skills"
)

// sessionEvents is the event stream of one session.
func (a *API) sessionEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a.stream(w, r, id, func(ctx context.Context) (bool, error) { return a.Sessions.SessionClosed(ctx, id) })
}

// allEvents is the event stream of every session.
func (a *API) allEvents(w http.ResponseWriter, r *http.Request) { a.stream(w, r, "", nil) }

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
	log     Events
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
func (s *eventStream) send(e api.Event) (done bool) {
	b, _ := json.Marshal(e) // an Event always encodes
	if _, err := fmt.Fprintf(s.w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, b); err != nil {
		return true
	}
	s.fl.Flush()
	if e.ID > s.last {
		s.last = e.ID
	}
	// A sub-agent's close is not its parent's: the parent's stream goes on.
	return s.session != "" && e.Type == skills.EventClosed && e.Session == s.session
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
			if s.send(events.FromStored(e)) {
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
	s.send(api.Event{ID: page.Last, Type: skills.EventResync, Session: s.session, At: time.Now().UTC(), Reason: reason})
	return true
}

// stream sends events as server-sent events, one JSON object per event with
// its id, and a comment line every 15 s to keep idle connections alive. A
// client that resumes (Last-Event-ID, or ?after=ID) first gets every event
// after that id from the log, then the live ones, with no gap and none
// twice: the stream subscribes before it reads the log and sends only ids
// above the last it sent. A stream that falls behind catches up from the
// log. For a session's stream, closedNow says whether the session is
// closed: asked after the stream subscribed and read the newest id, so a
// closed event still to come is one the stream gets. A closed session's
// stream ends after the replay; a new client of one is told it does not
// exist.
//
// It lives as long as its client reads: the API's read deadline covers
// request bodies only, and its write deadline each write (withDeadlines).
func (a *API) stream(w http.ResponseWriter, r *http.Request, session string, closedNow func(context.Context) (bool, error)) {
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
			a.Metrics.Refused(LimitStreams)
			writeErr(w, lim.streams.full(lim.name))
			return
		}
		defer lim.streams.leave()
	}
	sub := a.Events.Subscribe(session)
	defer a.Events.Unsubscribe(sub)
	s := &eventStream{w: w, fl: fl, log: a.Events, session: session, last: after, fromLog: a.SharedIndex}
	closed, err := s.start(r.Context(), resume, closedNow)
	if err != nil {
		writeErr(w, err)
		return
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
	s.serve(r.Context(), sub)
}

// start sets where a new client stands (the newest event: it starts with
// what happens from now on) and asks closedNow, if any, whether the
// session is closed.
func (s *eventStream) start(ctx context.Context, resume bool, closedNow func(context.Context) (bool, error)) (closed bool, err error) {
	if !resume {
		if s.last, err = s.log.LastEventID(ctx); err != nil {
			return false, err
		}
	}
	if closedNow == nil {
		return false, nil
	}
	return closedNow(ctx)
}

// serve sends the live events of sub, and the keep-alives, until the
// client goes or the stream is done.
func (s *eventStream) serve(ctx context.Context, sub *events.Subscriber) {
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
				return // the client is gone, or stopped reading past the write deadline
			}
			s.fl.Flush()
		case <-sub.Ready():
			if s.deliver(ctx, sub) {
				return
			}
		}
	}
}

// deliver sends what waits in sub: from the log when it lagged (or every
// event comes from the log, fromLog), else the events queued that were not
// sent from the log already. It reports done as send does, or when sub
// ended.
func (s *eventStream) deliver(ctx context.Context, sub *events.Subscriber) (done bool) {
	evs, lagged, closed := sub.Take()
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
