package daemon

import (
	"context"
	"errors"
	"fmt"

	"skillfs/index"
	"skillfs/skills"
)

// Caps bound the open sessions: a session opens at most MaxChildren
// sub-agent sessions that are open at once, and a user has at most
// MaxUserSessions open sessions, sub-agent sessions included (a field zero
// or less is its default). One more is refused (ErrLimit, naming the cap
// and the setting that sets it), before anything is made of it; the index
// counts again in the transaction that stores the session, so creates at
// once, even on two hosts sharing the index, never pass a cap together.
type Caps struct {
	MaxChildren     int
	MaxUserSessions int
}

// The default caps. MaxChildren: a sandboxed agent opening children
// through its socket must not take the host's views and the index's rows
// without bound, and 64 is a sub-agent per task of any agent. A user may
// run thousands of agents at once.
const (
	MaxChildren            = 64
	DefaultMaxUserSessions = 10000
)

func (c Caps) withDefaults() Caps {
	if c.MaxChildren <= 0 {
		c.MaxChildren = MaxChildren
	}
	if c.MaxUserSessions <= 0 {
		c.MaxUserSessions = DefaultMaxUserSessions
	}
	return c
}

func (c Caps) index() index.SessionCaps {
	return index.SessionCaps{Children: c.MaxChildren, PerUser: c.MaxUserSessions}
}

// capSettings are the serve settings that set each cap, named by a refusal.
var capSettings = map[string]string{index.CapChildren: "max-children", index.CapPerUser: "max-user-sessions"}

// checkCaps refuses session s, about to be made, when it would pass one of
// the caps now.
func (d *Daemon) checkCaps(ctx context.Context, s *skills.Session) error {
	return capRefusal(d.db.CheckSessionCaps(ctx, s, d.opts.Caps.index()))
}

// capRefusal is err, the refusal of a session for a cap told as such: the
// cap, the setting that sets it, what to do.
func capRefusal(err error) error {
	var ce *index.CapError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%w (serve's --%s): close one first", ce, capSettings[ce.Cap])
}
