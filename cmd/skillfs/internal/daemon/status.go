package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Status is the daemon at a glance, for `skillfs status`.
type Status struct {
	Home      string       `json:"home"`
	Mount     string       `json:"mount"`
	Socket    string       `json:"socket"`
	Host      string       `json:"host"` // this daemon's host id (see `skillfs hosts`)
	Sessions  int          `json:"sessions"`
	Binds     int          `json:"binds"`
	Skills    int          `json:"skills"`
	Versions  int          `json:"versions"`
	Users     int          `json:"users"`
	Readiness Readiness    `json:"readiness"`
	LastError *LoggedError `json:"last_error,omitempty"`
}

// LoggedError is the last error the daemon logged.
type LoggedError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// Status gathers the daemon's status.
func (d *Daemon) Status(ctx context.Context) (*Status, error) {
	rows, err := d.cat.DB().Count(ctx)
	if err != nil {
		return nil, err
	}
	binds, err := d.cat.DB().OpenBinds(ctx, d.host, nil)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, b := range binds {
		n += len(b)
	}
	st := &Status{Home: d.cat.Home(), Mount: d.mountRoot, Socket: filepath.Join(d.cat.Home(), SocketName), Host: d.host,
		Sessions: d.fs.NumSessions(), Binds: n, Skills: rows.Skills, Versions: rows.Versions, Users: rows.Users,
		Readiness: d.Ready(ctx)}
	if d.lastErr != nil {
		st.LastError = d.lastErr.Load()
	}
	return st, nil
}

// errTap passes log records on and keeps the last one at error level.
type errTap struct {
	slog.Handler
	last *atomic.Pointer[LoggedError]
}

func (h errTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		msg := []string{r.Message}
		r.Attrs(func(a slog.Attr) bool {
			msg = append(msg, a.Key+"="+a.Value.String())
			return true
		})
		h.last.Store(&LoggedError{At: r.Time.UTC(), Message: strings.Join(msg, " ")})
	}
	return h.Handler.Handle(ctx, r)
}

func (h errTap) WithAttrs(as []slog.Attr) slog.Handler {
	return errTap{h.Handler.WithAttrs(as), h.last}
}

func (h errTap) WithGroup(name string) slog.Handler {
	return errTap{h.Handler.WithGroup(name), h.last}
}
