// Package activation records what agents do with the skills they are
// served: the activation recorder (a session's first open of a skill stored
// durably before the open returns, later opens counted and flushed in
// batches), the activation journal that keeps what the index cannot take
// until it can, the spill file of earlier versions, and the read audit. The
// daemon hands the recorder to the filesystem as its sink of opens and asks
// it for a session's activations.
package activation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// Index is what the recorder asks of the index: *index.DB, or in tests one
// that fails as an index that cannot be reached does.
type Index interface {
	Skill(ctx context.Context, slug string) (*skills.Skill, error)
	SkillSet(ctx context.Context) (*index.SkillSet, error)
	RecordActivation(ctx context.Context, session, slug string, at time.Time, evs ...*skills.Event) (bool, error)
	ApplySpill(ctx context.Context, id string, deltas []index.OpenDelta, evs ...*skills.Event) (bool, error)
	Activations(ctx context.Context, session string) ([]skills.Activation, error)
}

// Activated is the event of a session's first open of a skill: when, and
// the tools and MCP servers the skill adds.
type Activated struct {
	Session, Slug string
	At            time.Time
	Tools, MCPs   []string
}

// Events is the daemon's event log: RecordActivated has store write evs to
// the index together with the change they report (store passes them on to
// the index, which sets the ids of those it stores), then publishes those
// stored.
type Events interface {
	RecordActivated(store func(evs ...*skills.Event) error, evs ...Activated) error
}

// Metrics counts what the recorder records: every open (first: the
// skill's first in its session) and every flush of a batch.
type Metrics interface {
	Opened(slug string, first bool)
	Flushed(took time.Duration, err error)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) Opened(string, bool)          {}
func (noMetrics) Flushed(time.Duration, error) {}

// indexTimeout bounds each call the recorder and the read audit make to
// the index: an index that does not answer within it counts as
// unreachable, so an open waits for it at most this long, once, before the
// journal takes over.
var indexTimeout = 5 * time.Second

// indexCtx bounds a call to the index (indexTimeout).
func indexCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, indexTimeout)
}

// unreachable reports whether err says the index cannot be reached (or did
// not answer in time), as opposed to refusing what was asked.
func unreachable(err error) bool {
	return errors.Is(err, skills.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// AsUnavailable has an index that did not answer in time reported as one
// that cannot be reached (skills.ErrUnavailable).
func AsUnavailable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, skills.ErrUnavailable) {
		return fmt.Errorf("%w: %w", err, skills.ErrUnavailable)
	}
	return err
}

// closeRetries bounds how long the last flushes at shutdown try to store
// what is left before giving up (the recorder then journals its opens).
var closeRetries = []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
