package daemon

import (
	"context"
	"log/slog"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/activation"
	"skillfs/cmd/skillfs/internal/events"
	skfs "skillfs/fs"
	"skillfs/skills"
)

// activationRecorder is what the daemon asks of its activation recorder
// (activation.Recorder): it takes the mount's opens, answers a session's
// activations, forgets a closed session, and is flushed every flush
// interval and at shutdown (Close).
type activationRecorder interface {
	skfs.Sink
	Activations(ctx context.Context, session string) ([]skills.Activation, error)
	Forget(session string)
	Flush(ctx context.Context) error
	Close() error
	JournalRecords() int // for the metrics
}

var _ activationRecorder = (*activation.Recorder)(nil)

// newRecorder is an activation recorder on db that publishes its activated
// events through events and counts what it records in m.
func newRecorder(db activation.Index, hub *events.Hub, log *slog.Logger, m *metrics) *activation.Recorder {
	return activation.NewRecorder(db, activatedEvents{hub}, log, recorderMetrics{m})
}

// startRecorder makes the activation recorder with its journal, which
// keeps what the index could not take (also what a spill file of an earlier
// version holds), and delivers what it holds.
func (d *Daemon) startRecorder(ctx context.Context) error {
	var db activation.Index = d.db
	if d.opts.recorderIndex != nil {
		db = d.opts.recorderIndex(d.db)
	}
	rec := newRecorder(db, d.events, d.log, d.metrics)
	if err := rec.OpenJournal(ctx, d.cat.Home()); err != nil {
		return err
	}
	d.rec = rec
	d.closeJournal = func() { rec.CloseJournal() }
	return nil
}

// flushActivations flushes the recorder every interval until ctx ends; its
// Close does the last flush.
func (d *Daemon) flushActivations(ctx context.Context, every time.Duration) {
	periodically(ctx, every, func() { d.rec.Flush(ctx) })
}

// activatedEvents has the event hub store and publish the recorder's
// activated events.
type activatedEvents struct{ h *events.Hub }

func (a activatedEvents) RecordActivated(store func(evs ...*skills.Event) error, evs ...activation.Activated) error {
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		out[i] = events.Adds{Tools: e.Tools, MCPs: e.MCPs}.Activated(e.Session, e.Slug, e.At)
	}
	return a.h.Record(store, out...)
}

// recorderMetrics counts in the daemon's metrics (nil: nowhere) what the
// recorder records.
type recorderMetrics struct{ m *metrics }

func (r recorderMetrics) Opened(slug string, first bool)        { r.m.opened(slug, first) }
func (r recorderMetrics) Flushed(took time.Duration, err error) { r.m.flushed(took, err) }
