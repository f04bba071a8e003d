package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// daemon is the node's skillfs daemon, over its operator socket.
type daemon struct {
	c *api.Client
}

// maxPages bounds a listing of the plugin's sessions (pages of
// api.MaxSessionPage).
const maxPages = 100

// sessions lists the open top-level sessions of q (its host, client key
// and labels, when given), with their binds. Sub-agent
// sessions are left out: the plugin opens none, and a pod's session
// credential makes them with labels of its choosing (the daemon refuses
// the plugin's prefixes there; this holds without it too).
func (d daemon) sessions(ctx context.Context, q api.SessionQuery) ([]api.SessionInfo, error) {
	var all []api.SessionInfo
	after := ""
	for range maxPages {
		v := url.Values{"limit": {strconv.Itoa(api.MaxSessionPage)}}
		for k, val := range map[string]string{"host": q.Host, "key": q.Key, "after": after} {
			if val != "" {
				v.Set(k, val)
			}
		}
		for k, val := range q.Labels {
			v.Add("label", k+"="+val)
		}
		var page []api.SessionInfo
		if _, err := d.c.Call(ctx, http.MethodGet, "/v1/sessions?"+v.Encode(), nil, &page); err != nil {
			return nil, err
		}
		for _, s := range page {
			if s.Parent == "" {
				all = append(all, s)
			}
		}
		if len(page) < api.MaxSessionPage {
			return all, nil
		}
		after = page[len(page)-1].ID
	}
	return nil, fmt.Errorf("more than %d sessions carry labels %v: %w", maxPages*api.MaxSessionPage, q.Labels, skills.ErrLimit)
}

// host is the id of the daemon's host (the one serving the sessions it
// binds).
func (d daemon) host(ctx context.Context) (string, error) {
	var st api.Status
	if _, err := d.c.Call(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return "", err
	}
	if st.Host == "" {
		return "", fmt.Errorf("GET /v1/status names no host: %w", skills.ErrUnavailable)
	}
	return st.Host, nil
}

func (d daemon) session(ctx context.Context, id string) (*api.SessionInfo, error) {
	var info api.SessionInfo
	if _, err := d.c.Call(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (d daemon) create(ctx context.Context, req api.CreateRequest) (*api.SessionInfo, error) {
	var info api.SessionInfo
	if _, err := d.c.Call(ctx, http.MethodPost, "/v1/sessions", req, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (d daemon) close(ctx context.Context, id string) error {
	_, err := d.c.Call(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil)
	if errors.Is(err, skills.ErrNotFound) {
		return nil
	}
	return err
}

func (d daemon) bind(ctx context.Context, id string, b skills.Bind) (*api.BindResult, error) {
	var res api.BindResult
	if _, err := d.c.Call(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/mounts", b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// unbind removes the bind of session id at target; one that is not there
// is no error.
func (d daemon) unbind(ctx context.Context, id, target string) error {
	q := url.Values{"target": {target}}
	_, err := d.c.Call(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id)+"/mounts?"+q.Encode(), nil, nil)
	if errors.Is(err, skills.ErrNotFound) {
		return nil
	}
	return err
}

// ready reports whether the daemon answers on its socket and is ready.
func (d daemon) ready(ctx context.Context) error {
	var r api.Readiness
	_, err := d.c.Call(ctx, http.MethodGet, "/v1/ready", nil, &r)
	return err
}
