package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"

	"skillfs/cmd/skillfs/api"
)

// Status gathers the daemon's status.
func (d *Daemon) Status(ctx context.Context) (*api.Status, error) {
	rows, err := d.db.Count(ctx)
	if err != nil {
		return nil, err
	}
	binds, err := d.db.OpenBinds(ctx, d.host, nil)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, b := range binds {
		n += len(b)
	}
	st := &api.Status{Home: d.cat.Home(), Mount: d.mountRoot, Socket: filepath.Join(d.cat.Home(), api.SocketName), Host: d.host,
		Sessions: d.fs.NumSessions(), Binds: n, Skills: rows.Skills, Versions: rows.Versions, Users: rows.Users,
		Readiness: d.Ready(ctx)}
	if d.lastErr != nil {
		st.LastError = d.lastErr.Load()
	}
	if d.keeper != nil {
		k := &api.KeeperStatus{Socket: d.opts.Keeper, Resumed: d.fs.Resumed(), Holds: true}
		if err := d.keeper.Holds(); err != nil {
			k.Holds, k.Error = false, err.Error()
		}
		st.Keeper = k
	}
	return st, nil
}

// SessionsServed is how many sessions the mount serves.
func (d *Daemon) SessionsServed() int { return d.fs.NumSessions() }

// errTap passes log records on and keeps the last one at error level.
type errTap struct {
	slog.Handler
	last *atomic.Pointer[api.LoggedError]
}

func (h errTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		msg := []string{r.Message}
		r.Attrs(func(a slog.Attr) bool {
			msg = append(msg, a.Key+"="+a.Value.String())
			return true
		})
		h.last.Store(&api.LoggedError{At: r.Time.UTC(), Message: strings.Join(msg, " ")})
	}
	return h.Handler.Handle(ctx, r)
}

func (h errTap) WithAttrs(as []slog.Attr) slog.Handler {
	return errTap{h.Handler.WithAttrs(as), h.last}
}

func (h errTap) WithGroup(name string) slog.Handler {
	return errTap{h.Handler.WithGroup(name), h.last}
}
