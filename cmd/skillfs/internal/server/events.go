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
	// keepEvery is the time between keep-alives (DefaultKeepAlive).
	keepEvery time.Duration
	// cred is the principal the stream was opened by; when a token
	// proved it (watch is set) creds are asked again whether it still
	// does (proven).
	cred  Principal
	creds Credentials
	watch *streamWatch
}

// DefaultKeepAlive is how often an idle stream gets a comment line.
const DefaultKeepAlive = 15 * time.Second

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
		if len(page.Events) > 0 && !s.proven(ctx) {
			return true
		}
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
// its id, and a comment line every 15 s (KeepAlive) to keep idle
// connections alive. A
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
// A stream opened with a session or platform token ends once the token no
// longer proves its principal (proven), the change told at once by the
// daemon (openStreams) or found before the next events or keep-alive.
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
	s := &eventStream{w: w, fl: fl, log: a.Events, session: session, last: after, fromLog: a.SharedIndex, keepEvery: a.KeepAlive}
	if s.keepEvery <= 0 {
		s.keepEvery = DefaultKeepAlive
	}
	if s.cred, _ = PrincipalOf(r.Context()); a.Credentials != nil {
		// Watched first, then asked: a change made since the request's
		// lookup is seen now, one made after is told.
		s.creds, s.watch = a.Credentials, a.streams.add(s.cred)
		defer a.streams.remove(s.watch)
		if err := s.recheck(r.Context()); err != nil {
			refuse(w, credentialErr(err))
			return
		}
	}
	sub := a.Events.Subscribe(session)
	defer a.Events.Unsubscribe(sub)
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
	keep := time.NewTicker(s.keepEvery)
	defer keep.Stop()
	var changed <-chan struct{} // nil, never ready, without a token
	if s.watch != nil {
		changed = s.watch.changed
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			if !s.proven(ctx) {
				return
			}
		case <-keep.C:
			if !s.proven(ctx) {
				return
			}
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
	if len(evs) > 0 && !s.proven(ctx) {
		return true
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

// recheck asks the stream's credentials whether its token still proves
// its principal: nil for a stream opened without a token.
func (s *eventStream) recheck(ctx context.Context) error {
	if s.watch == nil {
		return nil
	}
	return s.creds.Recheck(ctx, s.cred)
}

// proven says whether the stream may go on: its token, if one opened it,
// still proves its principal. A token that no longer does has the stream
// send its last words, then an unauthorized event whose id is the last
// event sent (where a client with a working credential resumes, missing
// nothing); a lookup that fails ends the stream too, as a failed read of
// the log does (the client reconnects and is looked up again).
func (s *eventStream) proven(ctx context.Context) bool {
	err := s.recheck(ctx)
	if err == nil {
		return true
	}
	if errors.Is(err, skills.ErrNotFound) && !s.lastWords(ctx) {
		s.send(api.Event{ID: s.last, Type: skills.EventUnauthorized, Session: s.session, At: time.Now().UTC(),
			Reason: "the credential this stream was opened with no longer proves its principal " +
				"(revoked, expired or replaced, or its session closed or moved): reconnect with one that does"})
	}
	return false
}

// lastWords sends a stream whose session token died with its session's
// close or move the events committed while the token still worked: those
// up to that closed or moved event (the transaction that recorded it
// dropped the token), that event included. It reports done when the
// stream ended with it (its own session's close). A token that died
// without an event — replaced, a platform token revoked or expired — gets
// nothing more: no event after the check can be told to have come before
// the change.
func (s *eventStream) lastWords(ctx context.Context) (done bool) {
	if s.cred.Role != RoleSession {
		return false
	}
	ends := func(e skills.Event) bool {
		return (e.Session == s.cred.Session || e.Session == s.session) &&
			(e.Type == skills.EventClosed || e.Type == skills.EventMoved)
	}
	var cut int64
	s.eachLogged(ctx, func(e skills.Event) bool {
		if ends(e) {
			cut = e.ID
		}
		return cut == 0
	})
	if cut == 0 {
		return false
	}
	s.eachLogged(ctx, func(e skills.Event) bool {
		if e.ID > cut {
			return false
		}
		done = s.send(events.FromStored(e))
		return !done && e.ID < cut
	})
	return done
}

// eachLogged hands each event of the stream's log after the last sent to
// f, in order, while f says go on; a failed read ends it.
func (s *eventStream) eachLogged(ctx context.Context, f func(skills.Event) bool) {
	for after := s.last; ; {
		page, err := s.log.Events(ctx, s.session, after, replayPage)
		if err != nil {
			return
		}
		for _, e := range page.Events {
			if !f(e) {
				return
			}
			after = e.ID
		}
		if len(page.Events) < replayPage {
			return
		}
	}
}
