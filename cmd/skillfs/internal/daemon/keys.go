package daemon

import (
	"context"
	"errors"
	"fmt"

	"skillfs/cmd/skillfs/api"
	"skillfs/index"
	"skillfs/skills"
)

// A client key makes a create idempotent: among the open sessions of one
// user and one parent (none, for top-level sessions) a key names at most
// one session, and a create with the key of an open session answers that
// session as it is (SessionInfo.Existing), whatever else the request asks
// for. The index keeps that true across hosts (index.KeyTakenError); here
// a create under the daemon's lock looks first, so a retry costs no view.
// A closed session's key is free again.

// checkClient checks a create request's client key and labels.
func checkClient(req api.CreateRequest) error {
	if req.Key != "" {
		if err := skills.CheckSessionKey(req.Key); err != nil {
			return err
		}
	}
	return skills.CheckLabels(req.Labels)
}

// checkQuery checks the key and labels a list of sessions is narrowed to.
func checkQuery(q api.SessionQuery) error {
	return checkClient(api.CreateRequest{Key: q.Key, Labels: q.Labels})
}

// keyed is the open session of user uid and parent with client key key,
// as a create answers it; nil when key is "" or names none.
func (d *Daemon) keyed(ctx context.Context, uid, parent, key string) (*api.SessionInfo, error) {
	if key == "" {
		return nil, nil
	}
	s, err := d.db.SessionByKey(ctx, uid, parent, key)
	if errors.Is(err, skills.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return d.existing(ctx, s)
}

// keyTaken answers a create of s whose store failed with err: when the
// key was taken meanwhile (another host's create of it won), the session
// that has it; else err.
func (d *Daemon) keyTaken(ctx context.Context, err error, s *skills.Session) (*api.SessionInfo, error) {
	var taken *index.KeyTakenError
	if !errors.As(err, &taken) {
		return nil, err
	}
	var other *skills.Session
	if taken.Session != "" {
		other, err = d.Session(ctx, taken.Session)
	} else {
		other, err = d.db.SessionByKey(ctx, s.UID, s.Parent, s.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("session key %q: the open session it names: %w", s.Key, err)
	}
	d.log.Info("session key in use: the open session answered", "session", other.ID, "user", s.UID)
	return d.existing(ctx, other)
}

// existing describes open session s as the answer of a create that found
// it by its key.
func (d *Daemon) existing(ctx context.Context, s *skills.Session) (*api.SessionInfo, error) {
	mounts, err := d.db.Binds(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	info := d.info(s, mounts)
	info.Existing = true
	return info, d.placeElsewhere(ctx, info)
}
