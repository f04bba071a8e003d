package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"skillfs/skills"
)

// BusyError is a request refused at one of the daemon's limits: nothing
// was done, and the answer is 503 with code busy and a Retry-After of
// RetryAfter (writeErr).
type BusyError struct {
	Msg        string
	RetryAfter time.Duration
}

func (e *BusyError) Error() string { return e.Msg }
func (e *BusyError) Unwrap() error { return skills.ErrBusy }

// retryAfter sets the Retry-After header of an answer to err when it is a
// BusyError: the whole seconds to wait, at least one.
func retryAfter(w http.ResponseWriter, err error) {
	var b *BusyError
	if errors.As(err, &b) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(b.RetryAfter.Seconds())))))
	}
}

// streamRetry is the Retry-After of an event stream refused at the cap.
const streamRetry = 5 * time.Second

// streamGate counts the event streams of one listener against its cap.
type streamGate struct {
	max  int64
	open atomic.Int64
}

func newStreamGate(n int) *streamGate { return &streamGate{max: int64(n)} }

// enter takes a place for one stream; false at the cap.
func (g *streamGate) enter() bool {
	if g.open.Add(1) > g.max {
		g.open.Add(-1)
		return false
	}
	return true
}

func (g *streamGate) leave() { g.open.Add(-1) }

// full is the refusal of a stream over the cap.
func (g *streamGate) full(listener string) error {
	setting := ", serve --max-streams"
	if listener == sandboxListener {
		setting = ""
	}
	return &BusyError{RetryAfter: streamRetry, Msg: fmt.Sprintf(
		"the %s serves as many event streams as it may at once (%d%s): try again later", listenerNoun(listener), g.max, setting)}
}

func listenerNoun(name string) string {
	switch name {
	case "tcp":
		return "TCP listener"
	case sandboxListener:
		return "session's API socket"
	}
	return "socket"
}

// minConns is the least a listener's connection cap is lowered to when
// the open file limit leaves less (fitConns).
const minConns = 16

// connCaps are the connection caps of the two listeners, fitted into the
// open file limit.
type connCaps struct {
	socket, tcp int
	lowered     bool   // the limit left less than asked for
	avail       uint64 // descriptors the API may take: the limit less the reserve
}

// fitConns fits the connection caps asked for (tcp 0: no TCP listener)
// into what the open file limit soft leaves after reserve descriptors for
// the mount, the store, the index and the journal: each connection holds
// one descriptor, and the API must never take those an agent's read needs.
// When the two do not fit, both are lowered in proportion, to minConns at
// the least.
func fitConns(soft uint64, reserve, socket, tcp int) connCaps {
	c := connCaps{socket: socket, tcp: tcp}
	if soft > uint64(reserve) {
		c.avail = soft - uint64(reserve)
	}
	want := uint64(socket + tcp)
	if want <= c.avail {
		return c
	}
	c.lowered = true
	c.socket = max(minConns, int(c.avail*uint64(socket)/want))
	if tcp > 0 {
		c.tcp = max(minConns, int(c.avail*uint64(tcp)/want))
	}
	return c
}

// streamsFor is the stream cap of a listener of conns connections: at
// most max, and at most half its connections, so the others answer
// requests whatever the streams hold.
func streamsFor(conns, limit int) int { return min(limit, conns/2) }
